"""The consumer group records: their encoding, and a consumer group that survives compaction and a restart."""

from __future__ import annotations

import pytest
from consumer_context import ConsumerContext, owners, tps

from groupcoord.protocol import (
    DeleteGroupsRequest,
    Errors,
    GroupConfig,
    GroupCoordinator,
    ManualClock,
    OffsetCommitRequest,
    records,
)
from groupcoord.protocol.consumer import records as cr
from groupcoord.protocol.values import OffsetAndMetadata, TopicPartition
from groupcoord.storage.partition_log import PartitionLog

RECORDS = [
    records.Record(cr.ConsumerGroupMetadataKey("g"), cr.ConsumerGroupMetadataValue(7)),
    records.Record(
        cr.ConsumerGroupPartitionMetadataKey("g"), cr.ConsumerGroupPartitionMetadataValue((("t", 6), ("u", 1)))
    ),
    records.Record(
        cr.ConsumerGroupMemberMetadataKey("g", "m"),
        cr.ConsumerGroupMemberMetadataValue("i", "rack", "client", "/1.2.3.4", ("t", "u"), "x.*", "range", 30000),
    ),
    records.Record(cr.ConsumerGroupTargetAssignmentMetadataKey("g"), cr.ConsumerGroupTargetAssignmentMetadataValue(7)),
    records.Record(
        cr.ConsumerGroupTargetAssignmentMemberKey("g", "m"),
        cr.ConsumerGroupTargetAssignmentMemberValue((("t", (0, 2)),)),
    ),
    records.Record(
        cr.ConsumerGroupCurrentMemberAssignmentKey("g", "m"),
        cr.ConsumerGroupCurrentMemberAssignmentValue(7, 6, 1, (("t", (0,)),), (("u", (0,)),)),
    ),
]


@pytest.mark.parametrize("record", RECORDS + [records.Record(r.key, None) for r in RECORDS], ids=repr)
def test_each_record_and_its_tombstone_round_trip(record):
    assert records.decode_record(records.encode_record(record)) == record
    assert type(records.decode_record(records.encode_record(record)).key) is type(record.key)


def test_a_batch_of_consumer_records_round_trips():
    assert records.decode_batch(records.encode_batch(RECORDS)) == RECORDS


def test_an_unknown_value_version_is_a_clear_error():
    import msgpack

    bad = msgpack.packb([3, "g", [9, 1]])
    with pytest.raises(records.RecordFormatError, match="ConsumerGroupMetadataKey value version 9"):
        records.decode_record(bad)


def _flush(ctx: ConsumerContext) -> None:
    ctx.coord.on_durable(ctx.log.sync())


def test_a_consumer_group_survives_compaction_and_a_restart_from_disk(tmp_path):
    clock = ManualClock(1_000_000)
    plog = PartitionLog(tmp_path, clock=clock, segment_bytes=600, sync="never")
    ctx = ConsumerContext.__new__(ConsumerContext)
    ctx.config, ctx.clock, ctx.log, ctx.topics = GroupConfig(), clock, plog, {"t": 6, "u": 3}
    ctx.coord = GroupCoordinator(ctx.config, clock, plog)
    ctx.coord.update_topic_metadata(ctx.topics)
    # Churn: members come and go, subscriptions change, a second group is created and deleted.
    clients = [ctx.join(m, topics=("t", "u")) for m in "abcd"]
    _flush(ctx)
    ctx.settle(clients)
    commit = OffsetCommitRequest("cg", {TopicPartition("t", 0): OffsetAndMetadata(42)}, clients[0].epoch, "a")
    ctx.coord.commit_offsets(commit)
    for m in "bc":
        ctx.send(member_id=m, member_epoch=-1)
    rest = [clients[0], clients[3]]
    ctx.settle(rest)
    other = ctx.join("x", group_id="other")
    ctx.send("other", member_id="x", member_epoch=-1)
    deleted = ctx.coord.delete_groups(DeleteGroupsRequest(["other"]))
    _flush(ctx)
    assert deleted.result().results == {"other": Errors.NONE}
    ctx.heartbeat(rest[0], subscribed_topic_names=["t"])
    ctx.settle(rest)
    _flush(ctx)
    before = ctx.describe()
    records_before = len(list(plog.replay()))
    clock.advance(2 * 24 * 3600 * 1000)  # past the tombstone retention
    plog.compact()
    plog.close()
    reopened = PartitionLog(tmp_path, clock=clock, sync="never")
    assert len(list(reopened.replay())) < records_before
    fresh = GroupCoordinator(GroupConfig(), clock, reopened)
    fresh.load(reopened.replay())
    fresh.update_topic_metadata(ctx.topics)
    ctx.coord = fresh
    after = ctx.describe()
    assert sorted(after.members, key=repr) == sorted(before.members, key=repr)
    assert (after.group_epoch, after.assignment_epoch, after.group_state) == (
        before.group_epoch,
        before.assignment_epoch,
        "Stable",
    )
    assert "other" not in fresh.consumer.groups and fresh.groups.get_group("other") is None
    assert fresh.offsets.offsets_of("cg")[TopicPartition("t", 0)].offset == 42
    assert other.epoch == 2
    # The restarted shard goes on from where it was.
    for c in rest:
        ctx.heartbeat(c)
    assert owners(rest).keys() == tps("t", *range(6)) | tps("u", 0, 1, 2)  # d still subscribes to u
    assert all(tp.topic == "t" for tp in clients[0].owned)
    reopened.close()
