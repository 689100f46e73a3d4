"""The pending-sync timeout (KAFKA-12890): members must sync within the rebalance timeout."""

from shard_context import GROUP, REBALANCE_MS, ShardContext

from groupcoord.protocol.errors import Errors

LONG_SESSION = 100_000


def test_member_that_never_syncs_is_removed_even_when_the_group_went_stable():
    ctx = ShardContext()
    gen = ctx.join_members(2, session_timeout_ms=LONG_SESSION)
    late = gen.followers[0]
    ctx.send_sync(GROUP, gen.generation, gen.leader, {gen.leader: b"L", late: b"F"})
    assert ctx.state() == "Stable"
    ctx.advance(REBALANCE_MS - 1)
    assert ctx.member_ids() == set(gen.members)
    ctx.advance(1)
    assert ctx.member_ids() == {gen.leader}
    assert ctx.state() == "PreparingRebalance"


def test_heartbeats_do_not_count_as_sync():
    ctx = ShardContext()
    gen = ctx.join_members(2)
    late = gen.followers[0]
    ctx.send_sync(GROUP, gen.generation, gen.leader, {})
    for _ in range(REBALANCE_MS // 5_000):
        ctx.advance(5_000)
        ctx.heartbeat(GROUP, gen.generation, gen.leader)
        ctx.heartbeat(GROUP, gen.generation, late)
    assert late not in ctx.member_ids()
    assert ctx.heartbeat(GROUP, gen.generation, late) == Errors.UNKNOWN_MEMBER_ID


def test_leader_that_never_syncs_is_removed_and_parked_followers_rejoin():
    ctx = ShardContext()
    gen = ctx.join_members(2, session_timeout_ms=LONG_SESSION)
    follower = gen.followers[0]
    parked = ctx.send_sync(GROUP, gen.generation, follower)
    ctx.advance(REBALANCE_MS)
    assert parked.result().error == Errors.REBALANCE_IN_PROGRESS
    assert ctx.member_ids() == {follower}
    assert ctx.state() == "PreparingRebalance"
    r = ctx.rejoin(GROUP, follower, session_timeout_ms=LONG_SESSION).result()
    assert (r.generation_id, r.leader) == (gen.generation + 1, follower)


def test_when_nobody_syncs_everyone_is_removed_and_the_group_becomes_empty():
    ctx = ShardContext()
    gen = ctx.join_members(2, session_timeout_ms=LONG_SESSION)
    ctx.advance(REBALANCE_MS)
    assert ctx.state() == "Empty"
    assert ctx.describe().members == []
    assert ctx.log.records[-1].value.generation == gen.generation + 1


def test_nobody_is_removed_when_everyone_synced():
    ctx = ShardContext()
    gen = ctx.stable_group(3, session_timeout_ms=LONG_SESSION)
    ctx.advance(REBALANCE_MS * 2)
    assert ctx.member_ids() == set(gen.members)
    assert ctx.state() == "Stable"


def test_pending_sync_timer_of_an_old_generation_has_no_effect():
    ctx = ShardContext()
    gen = ctx.join_members(2, session_timeout_ms=LONG_SESSION)
    ctx.advance(REBALANCE_MS // 2)
    joins = [ctx.rejoin(GROUP, m, session_timeout_ms=LONG_SESSION) for m in gen.members]
    gen2 = ctx.generation_of({m: d.result() for m, d in zip(gen.members, joins, strict=True)})
    ctx.sync_all(gen2)
    ctx.advance(REBALANCE_MS)
    assert ctx.member_ids() == set(gen.members)
    assert ctx.state() == "Stable"


def test_the_sync_timer_is_cancelled_once_every_member_synced():
    # Kafka's removePendingSyncMember: armed until the last member syncs, then nothing is left for it to expire.
    ctx = ShardContext()
    gen = ctx.join_members(3, session_timeout_ms=LONG_SESSION)
    ctx.send_sync(GROUP, gen.generation, gen.leader, {m: b"a" for m in gen.members})
    ctx.send_sync(GROUP, gen.generation, gen.followers[0])
    assert ctx.state() == "Stable" and ctx.coord.gauges().timers.get("sync") == 1
    ctx.send_sync(GROUP, gen.generation, gen.followers[1])
    assert ctx.coord.gauges().timers.get("sync", 0) == 0
    ctx.advance(REBALANCE_MS * 2)
    assert ctx.member_ids() == set(gen.members) and ctx.state() == "Stable"
