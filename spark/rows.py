"""The reference decoder: log records, one at a time, as the rows of the commits and groups tables.

The columnar decoder (columnar.py) falls back to it for a block it does not understand, and shares its
group-row builder.
"""

from __future__ import annotations

import logging
from typing import Iterable

import pyarrow as pa

from groupcoord.protocol.consumer.records import CONSUMER_KEY_TYPES
from groupcoord.protocol.records import GroupMetadataKey, OffsetCommitKey, Record

from .schema import COMMITS_SCHEMA, GROUPS_SCHEMA

log = logging.getLogger(__name__)


def records_to_tables(records: Iterable[tuple[int, int, Record]], log_partition: int) -> tuple[pa.Table, pa.Table]:
    """(offset, timestamp, record) triples as the commits and groups tables, one record at a time.

    The reference path: the columnar decoder falls back to it for a block it does not understand.
    """
    c_group: list[str] = []
    c_topic: list[str] = []
    c_part: list[int] = []
    c_offset: list[int | None] = []
    c_epoch: list[int | None] = []
    c_meta: list[str | None] = []
    c_cts: list[int | None] = []
    c_ets: list[int | None] = []
    c_tomb: list[bool] = []
    c_pos: list[int] = []
    c_lts: list[int] = []
    g_rows: dict[str, list] = {name: [] for name in GROUPS_SCHEMA.names}
    for offset, ts, (key, value) in records:
        if type(key) is OffsetCommitKey:
            c_group.append(key.group)
            c_topic.append(key.topic)
            c_part.append(key.partition)
            if value is None:
                c_offset.append(None)
                c_epoch.append(None)
                c_meta.append(None)
                c_cts.append(None)
                c_ets.append(None)
                c_tomb.append(True)
            else:
                c_offset.append(value.offset)
                c_epoch.append(value.leader_epoch)
                c_meta.append(value.metadata)
                c_cts.append(value.commit_timestamp)
                c_ets.append(value.expire_timestamp)
                c_tomb.append(False)
            c_pos.append(offset)
            c_lts.append(ts)
        elif type(key) is GroupMetadataKey:
            add_group_row(g_rows, key, value, log_partition, offset, ts)
        elif type(key) in CONSUMER_KEY_TYPES:
            continue  # consumer group (KIP-848) records: membership, not offsets; no report reads them
        else:  # pragma: no cover - record_from_obj only builds these key types
            log.warning("log partition %d: skipping a record with unknown key %r at offset %d",
                        log_partition, key, offset)
    n = len(c_group)
    commits = pa.table(
        [
            pa.array(c_group, pa.string()),
            pa.array(c_topic, pa.string()),
            pa.array(c_part, pa.int32()),
            pa.array(c_offset, pa.int64()),
            pa.array(c_epoch, pa.int32()),
            pa.array(c_meta, pa.string()),
            pa.array(c_cts, pa.int64()),
            pa.array(c_ets, pa.int64()),
            pa.array(c_tomb, pa.bool_()),
            pa.array([log_partition] * n, pa.int32()),
            pa.array(c_pos, pa.int64()),
            pa.array(c_lts, pa.int64()),
        ],
        schema=COMMITS_SCHEMA,
    )
    return commits, pa.Table.from_pydict(g_rows, schema=GROUPS_SCHEMA)


def add_group_row(rows: dict[str, list], key: GroupMetadataKey, value, log_partition: int, offset: int,
                  ts: int) -> None:
    """Append one group-metadata record to the column lists of GROUPS_SCHEMA."""
    rows["group"].append(key.group)
    if value is None:
        for name in ("generation", "protocol_type", "protocol", "leader", "member_count", "members"):
            rows[name].append(None)
        rows["timestamp"].append(ts)
        rows["tombstone"].append(True)
    else:
        rows["generation"].append(value.generation)
        rows["protocol_type"].append(value.protocol_type)
        rows["protocol"].append(value.protocol)
        rows["leader"].append(value.leader)
        rows["member_count"].append(len(value.members))
        rows["members"].append(
            [
                {
                    "member_id": m.member_id,
                    "group_instance_id": m.group_instance_id,
                    "client_id": m.client_id,
                    "client_host": m.client_host,
                    "rebalance_timeout": m.rebalance_timeout,
                    "session_timeout": m.session_timeout,
                }
                for m in value.members
            ]
        )
        state_ts = value.current_state_timestamp
        rows["timestamp"].append(state_ts if state_ts is not None and state_ts >= 0 else ts)
        rows["tombstone"].append(False)
    rows["log_partition"].append(log_partition)
    rows["log_offset"].append(offset)
    rows["log_timestamp"].append(ts)
