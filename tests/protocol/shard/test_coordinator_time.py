"""Coordinator time: a shard whose runner falls behind expires no member for the heartbeats still queued.

The runner (the partition actor) sets how far behind it runs; the shard's deadlines follow the
base clock less that lag, never going back. Lateness of the coordinator is not the member's failure.
"""

from __future__ import annotations

from groupcoord.protocol import (
    Errors,
    GroupConfig,
    GroupCoordinator,
    HeartbeatRequest,
    JoinGroupRequest,
    LeaveGroupRequest,
    ManualClock,
    MemberIdentity,
    MemoryLog,
    SyncGroupRequest,
)
from groupcoord.protocol.shard.clock import CoordinatorClock

SESSION_MS = 10_000
CONFIG = GroupConfig(min_session_timeout_ms=100, initial_rebalance_delay_ms=50)


def _stable_group(coord: GroupCoordinator, base: ManualClock, members: int) -> list[tuple[str, int]]:
    joins = [coord.join_group(JoinGroupRequest("g", SESSION_MS, 60_000, protocols=[("range", b"")],
                                               require_known_member_id=False)) for _ in range(members)]
    while not joins[-1].done():
        base.advance(CONFIG.initial_rebalance_delay_ms)
        coord.tick()
    answers = [j.result() for j in joins]
    leader = answers[0].leader
    for a in answers:
        assignments = {b.member_id: b"" for b in answers} if a.member_id == leader else {}
        assert coord.sync_group(SyncGroupRequest("g", a.generation_id, a.member_id,
                                                 assignments=assignments)).result().error == Errors.NONE
    return [(a.member_id, a.generation_id) for a in answers]


def _shard() -> tuple[GroupCoordinator, ManualClock, CoordinatorClock]:
    base = ManualClock(1_000_000)
    clock = CoordinatorClock(base)
    return GroupCoordinator(CONFIG, clock, MemoryLog()), base, clock


def test_a_coordinator_running_behind_expires_no_member_whose_heartbeat_waits_in_its_queue():
    coord, base, clock = _shard()
    members = _stable_group(coord, base, 3)
    # The coordinator falls 15 s behind: a session and a half pass on the machine's clock while the
    # members' heartbeats (sent in time) wait in its queue.
    base.advance(15_000)
    clock.behind_ms = 15_000
    coord.tick()
    # The queued heartbeats are served now, late: every member is still in the group.
    for member_id, generation in members:
        assert coord.heartbeat(HeartbeatRequest("g", generation, member_id)).result().error == Errors.NONE
    assert len(coord.groups.get_group("g").members) == 3


def test_a_member_that_really_stopped_expires_once_the_coordinator_caught_up():
    coord, base, clock = _shard()
    _quiet, (alive, generation) = _stable_group(coord, base, 2)
    base.advance(15_000)
    clock.behind_ms = 15_000
    coord.tick()
    assert len(coord.groups.get_group("g").members) == 2  # still behind: nobody can be judged yet
    # The queue drained; only `alive` had a heartbeat in it.
    clock.behind_ms = 0
    assert coord.heartbeat(HeartbeatRequest("g", generation, alive)).result().error == Errors.NONE
    coord.tick()
    assert set(coord.groups.get_group("g").members) == {alive}
    assert coord.stats.session_expirations == 1


def test_due_time_never_goes_back_and_the_clock_keeps_the_base_times():
    base = ManualClock(5_000)
    clock = CoordinatorClock(base)
    assert clock.due_ms() == 5_000
    base.advance(1_000)
    clock.behind_ms = 3_000  # the lag grew faster than time passed: due time stands still
    assert clock.due_ms() == 5_000
    base.advance(1_000)
    clock.behind_ms = 500
    assert clock.due_ms() == 6_500
    # What happens is stamped on the base clock: a heartbeat served now restarts its session from now.
    assert clock.monotonic_ms() == base.monotonic_ms() == 7_000
    assert clock.now_ms() == base.now_ms() == 7_000


def test_a_heartbeat_served_promptly_while_the_lag_is_high_keeps_its_whole_session():
    # One cause of the overload benchmark's false expiries: while the lag is high (the worst wait of a
    # window), a heartbeat that happened to be served at once restarted its session from now less that
    # lag, cutting the session short by the lag; the member's next heartbeat, sent in time and queued no
    # longer than the lag says, found it expired.
    coord, base, clock = _shard()
    [(member_id, generation)] = _stable_group(coord, base, 1)
    clock.behind_ms = 8_000  # the coordinator has run 8 s behind for a while
    base.advance(8_000)
    assert coord.heartbeat(HeartbeatRequest("g", generation, member_id)).result().error == Errors.NONE
    # Its next heartbeat is sent 2.5 s later (well within the 10 s session) and waits 8 s in the queue.
    base.advance(10_000)
    coord.tick()
    assert member_id in coord.groups.get_group("g").members
    base.advance(500)
    assert coord.heartbeat(HeartbeatRequest("g", generation, member_id)).result().error == Errors.NONE
    # And one that really stopped is still judged: its session passes once no queued request can be older.
    clock.behind_ms = 0
    base.advance(SESSION_MS)
    coord.tick()
    assert member_id not in coord.groups.get_group("g").members


def test_a_coordinator_without_lag_expires_on_time():
    coord, base, _clock = _shard()
    (member_id, _generation), _other = _stable_group(coord, base, 2)
    base.advance(SESSION_MS - 1)
    coord.tick()
    assert member_id in coord.groups.get_group("g").members
    base.advance(1)
    coord.tick()
    assert coord.groups.get_group("g") is None or member_id not in coord.groups.get_group("g").members


def test_a_timer_armed_for_no_delay_runs_before_later_requests_while_the_coordinator_lags():
    coord, base, clock = _shard()
    [(member_id, generation)] = _stable_group(coord, base, 1)
    # A member id handed out and not yet used: the group cannot end a join phase early while it is pending.
    pending = coord.join_group(JoinGroupRequest("g", SESSION_MS, 60_000, protocols=[("range", b"")],
                                                require_known_member_id=True)).result()
    assert pending.error == Errors.MEMBER_ID_REQUIRED
    clock.behind_ms = 200  # the coordinator runs behind: due time stands still while 100 ms pass
    base.advance(100)
    leave = coord.leave_group(LeaveGroupRequest("g", [MemberIdentity(member_id)])).result()
    assert leave.error == Errors.NONE
    # With no member left the rebalance timeout is 0, so the join phase ends at once (Kafka arms a 0 ms timer):
    # the group is Empty at the next generation before anyone joins again, lag or not.
    coord.tick()
    group = coord.groups.get_group("g")
    assert (group.state.name, group.generation_id) == ("EMPTY", generation + 1)
