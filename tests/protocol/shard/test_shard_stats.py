"""The shard's counters and gauges (the facts behind the service's metrics), driven by a ManualClock."""

from __future__ import annotations

from shard_context import GROUP, INITIAL_DELAY_MS, SESSION_MS, HeldLog, ShardContext
from test_log_refusal import RefusingLog

from groupcoord.protocol import Errors, OffsetAndMetadata, TopicPartition
from groupcoord.protocol.messages import DeleteGroupsRequest, OffsetCommitRequest, OffsetDeleteRequest
from groupcoord.protocol.shard.stats import consumer_lag


def commit(ctx: ShardContext, group: str, offsets: dict, generation: int = -1, member: str = "") -> None:
    req = OffsetCommitRequest(group, {tp: OffsetAndMetadata(o) for tp, o in offsets.items()}, generation, member)
    assert set(ctx.coord.commit_offsets(req).result().errors.values()) == {Errors.NONE}


def test_a_rebalance_is_counted_with_its_time_from_first_join_to_stable():
    ctx = ShardContext()
    gen = ctx.join_members(3)
    ctx.advance(250)  # the leader takes a while to compute the assignment
    ctx.sync_all(gen)
    stats = ctx.coord.stats
    assert (stats.rebalances, stats.completed_rebalances) == (1, 1)
    # Two initial delays (the later joins extend the first, KIP-134), then the 250 ms before the sync.
    assert stats.take_rebalance_durations() == [2 * INITIAL_DELAY_MS + 250]
    assert stats.take_rebalance_durations() == []


def test_a_rebalance_restarted_before_stable_counts_from_its_first_join():
    ctx = ShardContext()
    gen = ctx.join_members(2)
    ctx.advance(100)
    late, late_join = ctx.join(client_id="late")  # CompletingRebalance -> PreparingRebalance again
    parked = {m: ctx.rejoin(GROUP, m) for m in gen.members} | {late: late_join}
    gen2 = ctx.generation_of({m: d.result() for m, d in parked.items()})
    ctx.sync_all(gen2)
    stats = ctx.coord.stats
    assert (stats.rebalances, stats.completed_rebalances) == (2, 1)
    (duration,) = stats.take_rebalance_durations()
    assert duration == 2 * INITIAL_DELAY_MS + 100


def test_commits_and_session_expirations_are_counted_by_live_work_only():
    ctx = ShardContext()
    gen = ctx.stable_group(2)
    commit(ctx, GROUP, {TopicPartition("t", p): 5 for p in range(3)}, gen.generation, gen.leader)
    commit(ctx, "simple", {TopicPartition("t", 0): 1})
    assert (ctx.coord.stats.offset_commits, ctx.coord.stats.commit_requests) == (4, 2)
    ctx.heartbeat(GROUP, gen.generation, gen.leader)
    ctx.advance(SESSION_MS - 1)
    ctx.heartbeat(GROUP, gen.generation, gen.leader)
    ctx.advance(2)
    assert ctx.coord.stats.session_expirations == 1  # the silent follower
    restarted = ctx.restart()
    assert restarted.coord.stats.offset_commits == 0 and restarted.coord.gauges().offsets == 4


def test_gauges_count_groups_by_state_members_offsets_and_what_waits():
    ctx = ShardContext(log=HeldLog())
    gen = ctx.stable_group(2)
    commit(ctx, "simple", {TopicPartition("t", 0): 1, TopicPartition("t", 1): 2})
    ctx.join("other")  # a new group: PreparingRebalance, its join parked
    g = ctx.coord.gauges()
    assert g.groups_by_state == {"Empty": 1, "PreparingRebalance": 1, "CompletingRebalance": 0, "Stable": 1,
                                 "Dead": 0, "Assigning": 0, "Reconciling": 0}
    assert (g.groups, g.members, g.offsets) == (3, 3, 2)
    assert g.parked == {"join_group": 1, "sync_group": 0}
    assert g.timers["session"] == 2 and "heartbeat" not in g.timers  # one session timer per group with members
    assert g.timers["join"] == 1 and g.timers["offsets-retention"] == 1
    ctx.log.hold()
    held = ctx.coord.commit_offsets(OffsetCommitRequest("simple", {TopicPartition("t", 0): OffsetAndMetadata(3)}))
    assert ctx.coord.gauges().awaiting_durability == 1 and not held.done()
    ctx.release()
    assert ctx.coord.gauges().awaiting_durability == 0
    assert gen.generation == 1


def test_expirations_and_deletions_are_counted():
    ctx = ShardContext(offsets_retention_ms=1000, offsets_retention_check_interval_ms=500)
    commit(ctx, "old", {TopicPartition("t", p): 1 for p in range(3)})
    commit(ctx, "kept", {TopicPartition("t", 0): 1, TopicPartition("u", 0): 1})
    ctx.coord.delete_offsets(OffsetDeleteRequest("kept", [TopicPartition("u", 0)]))
    ctx.coord.delete_groups(DeleteGroupsRequest(["kept"]))
    ctx.advance(1500)
    stats = ctx.coord.stats
    assert (stats.offset_deletions, stats.offset_expirations, stats.group_deletions) == (1, 3, 2)


def test_what_the_log_refused_is_counted_as_a_failure_not_as_removed():
    log = RefusingLog()
    ctx = ShardContext(log=log, offsets_retention_ms=1000, offsets_retention_check_interval_ms=500)
    commit(ctx, "old", {TopicPartition("t", p): 1 for p in range(3)})
    commit(ctx, "empty", {TopicPartition("t", 0): 1})
    log.refusing = True
    refused = ctx.coord.delete_groups(DeleteGroupsRequest(["empty"])).result()
    assert refused.results == {"empty": Errors.UNKNOWN_SERVER_ERROR}
    ctx.advance(1500)  # retention passes find 4 expired offsets; the log refuses their tombstones
    stats = ctx.coord.stats
    failed = stats.expiry_write_failures
    assert failed >= 1 and (stats.offset_expirations, stats.group_deletions) == (0, 0)
    log.refusing = False
    ctx.advance(500)  # the next pass removes them, counted once
    assert (stats.offset_expirations, stats.group_deletions, stats.expiry_write_failures) == (4, 2, failed)


def test_consumer_lag_is_end_offset_minus_committed_where_the_end_is_known():
    ctx = ShardContext()
    commit(ctx, "g", {TopicPartition("t", 0): 10, TopicPartition("t", 1): 50, TopicPartition("x", 0): 1})
    ends = {"t": {0: 25, 1: 40}}
    lagging = consumer_lag(ctx.coord.offsets.items(), ends)
    lags = {(i.group, i.topic, i.partition): (i.committed, i.lag) for i in lagging}
    assert lags == {("g", "t", 0): (10, 15), ("g", "t", 1): (50, 0)}  # never negative; x has no end offset


def test_consumer_lag_reads_partitions_past_the_dense_columns_and_only_topics_with_ends():
    ctx = ShardContext()
    commit(ctx, "g", {TopicPartition("t", 5000): 7, TopicPartition("t", 2): 1, TopicPartition("u", 0): 3})
    commit(ctx, "h", {TopicPartition("u", 0): 4})
    lags = {(i.group, i.topic, i.partition): i.lag
            for i in consumer_lag(ctx.coord.offsets.items(), {"t": {5000: 9, 2: 1}, "u": {}})}
    assert lags == {("g", "t", 5000): 2, ("g", "t", 2): 0}  # "u" has no end offsets: none of its offsets counts
