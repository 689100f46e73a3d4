"""A log that refuses a batch as too large: the request gets Kafka's error and the shard keeps its state.

Kafka's Java coordinator maps MESSAGE_TOO_LARGE / RECORD_LIST_TOO_LARGE on a group or offset write
to UNKNOWN_SERVER_ERROR and reverts what the write would have changed. The 256 MiB case against
the real PartitionLog is in tests/reliability/test_rel_bad_input_shard.py.
"""

from __future__ import annotations

from shard_context import GROUP, INITIAL_DELAY_MS, SESSION_MS, ShardContext

from groupcoord.protocol.errors import Errors
from groupcoord.protocol.messages import OffsetCommitRequest, OffsetFetchRequest
from groupcoord.protocol.shard.log import MemoryLog, RecordBatchTooLarge
from groupcoord.protocol.values import OffsetAndMetadata, TopicPartition


class RefusingLog(MemoryLog):
    """A MemoryLog that refuses every append while `refusing` is set, as a log refuses an oversized batch."""

    def __init__(self) -> None:
        super().__init__()
        self.refusing = False

    def append(self, records) -> int:
        if self.refusing:
            raise RecordBatchTooLarge(f"batch of {len(records)} records refused")
        return super().append(records)


def _context() -> tuple[ShardContext, RefusingLog]:
    log = RefusingLog()
    return ShardContext(log=log), log


def test_a_refused_assignment_fails_every_parked_sync_and_the_group_rebalances():
    ctx, log = _context()
    gen = ctx.join_members(3)
    parked = {m: ctx.send_sync(GROUP, gen.generation, m) for m in gen.followers}
    records_before = list(log.records)
    log.refusing = True
    parked[gen.leader] = ctx.send_sync(GROUP, gen.generation, gen.leader, {m: b"big" for m in gen.members})
    assert {m: d.result().error for m, d in parked.items()} == dict.fromkeys(gen.members, Errors.UNKNOWN_SERVER_ERROR)
    assert log.records == records_before
    assert ctx.state() == "PreparingRebalance"
    assert all(not m.assignment for m in ctx.group().members.values())
    # Once the log takes writes again, the members rejoin and the group becomes Stable.
    log.refusing = False
    rejoined = {m: ctx.rejoin(GROUP, m) for m in gen.members}
    again = ctx.generation_of({m: d.result() for m, d in rejoined.items()})
    assert again.generation == gen.generation + 1
    assert all(r.error == Errors.NONE for r in ctx.sync_all(again).values())
    assert ctx.state() == "Stable"


def test_a_refused_static_replacement_leaves_the_old_member_id_in_place():
    ctx, log = _context()
    joined = {i: ctx.join(group_instance_id=i) for i in ("a", "b")}
    ctx.advance(2 * INITIAL_DELAY_MS)
    gen = ctx.generation_of({mid: d.result() for mid, d in joined.values()})
    ctx.sync_all(gen)
    old_id = joined["b"][0]
    records_before = list(log.records)
    log.refusing = True
    response = ctx.send_join(group_instance_id="b").result()
    assert response.error == Errors.UNKNOWN_SERVER_ERROR and response.member_id == ""
    assert (response.generation_id, response.leader) == (gen.generation, gen.leader)
    assert log.records == records_before
    log.refusing = False
    assert ctx.state() == "Stable" and ctx.member_ids() == {joined["a"][0], old_id}
    assert ctx.heartbeat(GROUP, gen.generation, old_id, "b") == Errors.NONE
    # The old id's session timer runs again: without heartbeats it expires.
    ctx.heartbeat(GROUP, gen.generation, joined["a"][0], "a")
    ctx.advance(SESSION_MS + 1)
    assert old_id not in ctx.member_ids()


def test_a_refused_commit_fails_every_partition_and_keeps_the_committed_offsets():
    ctx, log = _context()
    tps = [TopicPartition("t", p) for p in range(3)]
    first = ctx.coord.commit_offsets(OffsetCommitRequest("simple", {tp: OffsetAndMetadata(5) for tp in tps}))
    assert set(first.result().errors.values()) == {Errors.NONE}
    log.refusing = True
    refused = ctx.coord.commit_offsets(OffsetCommitRequest("simple", {tp: OffsetAndMetadata(9) for tp in tps}))
    assert refused.result().errors == dict.fromkeys(tps, Errors.UNKNOWN_SERVER_ERROR)
    log.refusing = False
    fetched = ctx.coord.fetch_offsets(OffsetFetchRequest("simple", tps)).result()
    assert {tp: p.offset for tp, p in fetched.offsets.items()} == dict.fromkeys(tps, 5)
