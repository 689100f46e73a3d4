"""A hot-standby shard: records a leader replicated are replayed as they come; taking over arms the sessions."""

from __future__ import annotations

from shard_context import SESSION_MS, ShardContext

from groupcoord.protocol import Errors, OffsetAndMetadata, TopicPartition
from groupcoord.protocol.messages import OffsetCommitRequest, OffsetFetchRequest
from groupcoord.protocol.shard.log import MemoryLog


def test_standby_fed_in_pieces_serves_the_leaders_state_after_take_over():
    leader = ShardContext()
    gen = leader.stable_group(2)
    tp = TopicPartition("t", 0)
    req = OffsetCommitRequest("group", {tp: OffsetAndMetadata(42)}, generation_id=gen.generation, member_id=gen.leader)
    assert leader.coord.commit_offsets(req).result().errors[tp] == Errors.NONE

    standby_log = MemoryLog()
    standby = ShardContext(log=standby_log, clock=leader.clock)
    records = list(leader.log.records)
    for i in range(0, len(records), 2):  # as replicated batches arrive below the high watermark
        standby.coord.replay_replicated(records[i : i + 2])
    assert standby.coord.next_deadline() is not None  # only the retention check: no session armed yet
    standby_log.records.extend(records)
    standby.coord.take_over(len(records), len(records))

    assert standby.state() == "Stable" and standby.member_ids() == set(gen.members)
    fetched = standby.coord.fetch_offsets(OffsetFetchRequest("group", [tp])).result().offsets[tp]
    assert fetched.offset == 42
    # New writes continue the log from the offset taken over.
    again = OffsetCommitRequest("group", {tp: OffsetAndMetadata(43)}, gen.generation, gen.leader)
    assert standby.coord.commit_offsets(again).result().errors[tp] == Errors.NONE
    assert standby.coord.runtime.end_offset == len(records) + 1 == len(standby_log.records)
    # Taking over gave every member a fresh session: the one that heartbeats stays, the other expires.
    standby.advance(SESSION_MS - 1)
    assert standby.heartbeat("group", gen.generation, gen.leader) == Errors.NONE
    assert standby.member_ids() == set(gen.members)
    standby.advance(2)
    assert standby.state() == "PreparingRebalance"
