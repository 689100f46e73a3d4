"""A hot-standby shard: records a leader replicated are replayed as they come; taking over arms the sessions."""

from __future__ import annotations

from consumer_context import ConsumerContext
from shard_context import SESSION_MS, ShardContext

from groupcoord.protocol import Errors, GroupCoordinator, OffsetAndMetadata, TopicPartition
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


def test_take_over_arms_the_consumer_groups_sessions_so_a_silent_member_is_expired():
    # Issue 27 class 5: after a failover, a KIP-848 member that never heartbeats again must lose its
    # partitions when its session times out, as it would after a load (the standby armed no timers).
    leader = ConsumerContext(consumer_session_timeout_ms=45_000)
    member = leader.join("m1")
    assert member.owned
    standby = ConsumerContext(log=MemoryLog(), consumer_session_timeout_ms=45_000)
    standby.clock = leader.clock
    standby.coord = GroupCoordinator(standby.config, leader.clock, standby.log)
    standby.coord.replay_replicated(list(leader.log.records))
    standby.coord.take_over(len(leader.log.records), len(leader.log.records))
    standby.coord.update_topic_metadata(leader.topics)
    assert [m.member_id for m in standby.describe().members] == ["m1"]
    standby.advance(46_000)
    assert standby.describe().members == []  # expired: its partitions go to the others
