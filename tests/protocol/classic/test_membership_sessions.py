"""Session timeouts: bounds, expiry, what refreshes a session, and the new-member join timeout."""

import pytest
from shard_context import GROUP, REBALANCE_MS, SESSION_MS, ShardContext

from groupcoord.protocol.classic.rebalance import _session_key
from groupcoord.protocol.errors import Errors


@pytest.mark.parametrize("session_ms", [10, 600_000])
def test_session_timeout_bounds_are_inclusive(session_ms):
    ctx = ShardContext()
    r = ctx.send_join(session_timeout_ms=session_ms).result()
    assert r.error == Errors.MEMBER_ID_REQUIRED


@pytest.mark.parametrize("session_ms", [9, 600_001])
def test_session_timeout_out_of_bounds_is_invalid(session_ms):
    ctx = ShardContext()
    r = ctx.send_join(session_timeout_ms=session_ms, member_id="client-1").result()
    assert (r.error, r.member_id, r.generation_id) == (Errors.INVALID_SESSION_TIMEOUT, "client-1", -1)


def test_session_timeout_is_checked_before_the_group_lookup():
    ctx = ShardContext()
    r = ctx.send_join("nowhere", session_timeout_ms=9, member_id="client-1").result()
    assert r.error == Errors.INVALID_SESSION_TIMEOUT
    assert ctx.describe("nowhere").group_state == "Dead"


def test_rebalance_timeout_is_not_bounded():
    ctx = ShardContext()
    _, pending = ctx.join(rebalance_timeout_ms=5)
    ctx.advance(3_000)
    assert pending.result().error == Errors.NONE


def test_expired_session_removes_the_member_and_rebalances():
    ctx = ShardContext()
    gen = ctx.stable_group(2)
    survivor = gen.followers[0]
    ctx.advance(SESSION_MS // 2)
    assert ctx.heartbeat(GROUP, 1, survivor) == Errors.NONE
    ctx.advance(SESSION_MS // 2 - 1)
    assert ctx.member_ids() == set(gen.members)
    ctx.advance(1)
    assert ctx.member_ids() == {survivor}
    assert ctx.state() == "PreparingRebalance"
    assert ctx.heartbeat(GROUP, 1, gen.leader) == Errors.UNKNOWN_MEMBER_ID
    r = ctx.rejoin(GROUP, survivor).result()
    assert (r.generation_id, r.leader) == (2, survivor)


def test_heartbeats_keep_a_member_alive():
    ctx = ShardContext()
    gen = ctx.stable_group(1)
    for _ in range(10):
        ctx.advance(SESSION_MS - 1)
        assert ctx.heartbeat(GROUP, 1, gen.leader) == Errors.NONE
    assert ctx.state() == "Stable"
    assert ctx.member_ids() == {gen.leader}


def test_a_rejected_heartbeat_does_not_refresh_the_session():
    ctx = ShardContext()
    gen = ctx.stable_group(1)
    ctx.advance(SESSION_MS - 1)
    assert ctx.heartbeat(GROUP, 7, gen.leader) == Errors.ILLEGAL_GENERATION
    ctx.advance(1)
    assert ctx.member_ids() == set()


def test_heartbeat_during_preparing_rebalance_refreshes_the_session():
    ctx = ShardContext()
    gen = ctx.stable_group(2)
    follower = gen.followers[0]
    rejoin = ctx.rejoin(GROUP, gen.leader)
    for _ in range(3):
        ctx.advance(SESSION_MS - 1)
        assert ctx.heartbeat(GROUP, 1, follower) == Errors.REBALANCE_IN_PROGRESS
    assert follower in ctx.member_ids()
    assert not rejoin.done()


def test_member_parked_in_join_survives_its_session_expiry():
    ctx = ShardContext()
    gen = ctx.stable_group(2)
    follower = gen.followers[0]
    rejoin = ctx.rejoin(GROUP, follower, protocols=(("range", b"changed"),))
    for _ in range(2):
        ctx.advance(SESSION_MS - 1)
        assert ctx.heartbeat(GROUP, 1, gen.leader) == Errors.REBALANCE_IN_PROGRESS
    assert ctx.member_ids() == set(gen.members)
    assert not rejoin.done()
    ctx.advance(REBALANCE_MS - 2 * (SESSION_MS - 1))
    r = rejoin.result()
    assert (r.error, r.generation_id, r.leader) == (Errors.NONE, 2, follower)


def test_member_parked_in_sync_survives_its_session_expiry():
    ctx = ShardContext()
    gen = ctx.join_members(2)
    follower = gen.followers[0]
    parked = ctx.send_sync(GROUP, gen.generation, follower)
    ctx.advance(SESSION_MS - 1)
    assert ctx.heartbeat(GROUP, gen.generation, gen.leader) == Errors.NONE
    ctx.advance(2)
    assert ctx.member_ids() == set(gen.members)
    assert not parked.done()
    ctx.send_sync(GROUP, gen.generation, gen.leader, {follower: b"mine"})
    assert parked.result().assignment == b"mine"


def test_session_restarts_when_the_assignment_is_delivered():
    ctx = ShardContext()
    gen = ctx.join_members(2)
    follower = gen.followers[0]
    parked = ctx.send_sync(GROUP, gen.generation, follower)
    ctx.advance(SESSION_MS // 2)
    assert ctx.heartbeat(GROUP, gen.generation, gen.leader) == Errors.NONE
    ctx.advance(SESSION_MS // 2 + 1_000)
    ctx.send_sync(GROUP, gen.generation, gen.leader, {follower: b"mine"})
    assert parked.result().error == Errors.NONE
    ctx.advance(SESSION_MS - 1)
    assert follower in ctx.member_ids()
    ctx.advance(1)
    assert follower not in ctx.member_ids()


def test_new_member_is_removed_after_the_new_member_join_timeout():
    ctx = ShardContext()
    gen = ctx.stable_group(2, session_timeout_ms=500_000, rebalance_timeout_ms=400_000)
    _, newcomer = ctx.join(session_timeout_ms=500_000, rebalance_timeout_ms=400_000)
    assert ctx.state() == "PreparingRebalance"
    ctx.advance(299_999)
    assert not newcomer.done()
    ctx.advance(1)
    r = newcomer.result()
    assert (r.error, r.member_id) == (Errors.UNKNOWN_MEMBER_ID, "")
    assert ctx.member_ids() == set(gen.members)
    assert ctx.state() == "PreparingRebalance"


def test_new_member_join_timeout_does_not_apply_after_its_first_generation():
    ctx = ShardContext()
    gen = ctx.stable_group(1, session_timeout_ms=500_000, rebalance_timeout_ms=400_000)
    for _ in range(2):
        ctx.advance(250_000)
        assert ctx.heartbeat(GROUP, 1, gen.leader) == Errors.NONE
    assert ctx.member_ids() == {gen.leader}


def test_sync_in_stable_does_not_refresh_the_session():
    """Java's classicGroupSyncToClassicGroup answers a Stable sync without rescheduling the heartbeat."""
    ctx = ShardContext()
    gen = ctx.stable_group(1)
    ctx.advance(SESSION_MS - 1)
    assert ctx.send_sync(GROUP, 1, gen.leader).result().error == Errors.NONE
    ctx.advance(1)
    assert ctx.member_ids() == set()


def test_a_group_has_one_session_timer_which_a_heartbeat_leaves_alone_and_each_member_ends_on_its_own_deadline():
    """Members share their group's session timer: a heartbeat moves only its member's deadline, the timer
    fires at the earliest deadline, removes no one whose session goes on, and is armed again for the next."""
    ctx = ShardContext()
    gen = ctx.stable_group(3)
    silent, *talking = gen.members
    timers, key = ctx.coord.runtime.timers, _session_key(GROUP)
    assert [k for k in timers.deadlines() if k[0] in ("session", "heartbeat")] == [key]
    first, action = timers.entry(key)
    ctx.advance(SESSION_MS - 1)
    for m in talking:
        assert ctx.heartbeat(GROUP, 1, m) == Errors.NONE
    assert timers.entry(key) == (first, action)  # the heartbeats did not touch the timer
    ctx.advance(1)  # the silent member's session ends: it alone is removed, the timer moves to the others'
    assert silent not in ctx.member_ids() and ctx.member_ids() == set(talking)
    assert timers.deadline(key) == first + SESSION_MS - 1
    ctx.advance(SESSION_MS - 2)
    assert ctx.member_ids() == set(talking)
    ctx.advance(1)
    assert ctx.member_ids() == set()
    assert key not in timers


def test_a_session_timer_that_fires_before_any_session_ended_waits_for_the_earliest_one_left():
    """Every member heartbeated since the timer was armed: it fires, removes no one, and is armed for the
    earliest deadline now, at which the member that fell silent is removed (neither earlier nor later)."""
    ctx = ShardContext()
    gen = ctx.stable_group(3)
    quiet, *talking = gen.members
    timers, key = ctx.coord.runtime.timers, _session_key(GROUP)
    first = timers.deadline(key)
    third = SESSION_MS // 3
    ctx.advance(third)
    assert ctx.heartbeat(GROUP, 1, quiet) == Errors.NONE  # its last: its session now ends at first + third
    ctx.advance(third)
    for m in talking:
        assert ctx.heartbeat(GROUP, 1, m) == Errors.NONE
    ctx.advance(SESSION_MS - 2 * third)  # the timer's deadline: every session is still running
    assert ctx.member_ids() == set(gen.members)
    assert timers.deadline(key) == first + third
    ctx.advance(third - 1)
    for m in talking:
        assert ctx.heartbeat(GROUP, 1, m) == Errors.NONE
    assert ctx.member_ids() == set(gen.members)
    ctx.advance(1)
    assert ctx.member_ids() == set(talking)
    assert ctx.state() == "PreparingRebalance"
