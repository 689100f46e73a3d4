"""Column layouts of the loaded histories, as Arrow schemas (the Spark schemas follow from them).

Times are int64 milliseconds since the epoch throughout, so that reports are exact. The log
position of a record is its offsets partition (`log_partition`) and its offset in that
partition's log (`log_offset`); `log_timestamp` is when the batch holding it was appended.
"""

from __future__ import annotations

import logging

import pyarrow as pa

log = logging.getLogger(__name__)

COMMIT_KEY = ["group", "topic", "partition"]
LOG_POSITION = ["log_partition", "log_offset"]
# Commits per partition in the window of Burrow's rules (its "intervals" setting).
DEFAULT_WINDOW = 10

# The last columns of both histories: whether the record is a tombstone, and where it is in the log.
_RECORD_FIELDS = [
    pa.field("tombstone", pa.bool_(), nullable=False),
    pa.field("log_partition", pa.int32(), nullable=False),
    pa.field("log_offset", pa.int64(), nullable=False),
    pa.field("log_timestamp", pa.int64(), nullable=False),
]

COMMITS_SCHEMA = pa.schema(
    [
        pa.field("group", pa.string(), nullable=False),
        pa.field("topic", pa.string(), nullable=False),
        pa.field("partition", pa.int32(), nullable=False),
        # Value fields are null for a tombstone (the committed offset was deleted).
        pa.field("offset", pa.int64()),
        pa.field("leader_epoch", pa.int32()),
        pa.field("metadata", pa.string()),
        pa.field("commit_timestamp", pa.int64()),
        pa.field("expire_timestamp", pa.int64()),
        *_RECORD_FIELDS,
    ]
)

MEMBER_TYPE = pa.struct(
    [
        pa.field("member_id", pa.string()),
        pa.field("group_instance_id", pa.string()),
        pa.field("client_id", pa.string()),
        pa.field("client_host", pa.string()),
        pa.field("rebalance_timeout", pa.int32()),
        pa.field("session_timeout", pa.int32()),
    ]
)

GROUPS_SCHEMA = pa.schema(
    [
        pa.field("group", pa.string(), nullable=False),
        # Value fields are null for a tombstone (the group was deleted).
        pa.field("generation", pa.int32()),
        pa.field("protocol_type", pa.string()),
        pa.field("protocol", pa.string()),
        pa.field("leader", pa.string()),
        pa.field("member_count", pa.int32()),
        pa.field("members", pa.list_(MEMBER_TYPE)),
        # The group's current_state_timestamp, or the append time when the record has none.
        pa.field("timestamp", pa.int64(), nullable=False),
        *_RECORD_FIELDS,
    ]
)

END_OFFSETS_SCHEMA = pa.schema(
    [
        pa.field("topic", pa.string(), nullable=False),
        pa.field("partition", pa.int32(), nullable=False),
        pa.field("offset", pa.int64(), nullable=False),
        pa.field("timestamp", pa.int64(), nullable=False),
    ]
)


def table_to_ipc(table: pa.Table) -> bytes:
    """A table as one Arrow IPC stream (the block format RayDP's JVM side reads from Ray's store)."""
    sink = pa.BufferOutputStream()
    with pa.ipc.new_stream(sink, table.schema) as writer:
        writer.write_table(table)
    return sink.getvalue().to_pybytes()
