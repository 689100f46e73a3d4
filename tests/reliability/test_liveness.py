"""No silent failure on the server: supervised loops, records before state, bounded sweeps, monotonic time, KIP-211.

The shard is driven by a ManualClock; the actor's loops run in this process on asyncio (the
PartitionActor class without Ray) over a real PartitionLog in a temporary directory.
"""

from __future__ import annotations

import asyncio
import dataclasses
import os
from typing import Any

import pytest
from rel_shard import CONFIG, Shard

from groupcoord.actors.service import PartitionActor
from groupcoord.protocol import Errors, GroupConfig, GroupCoordinator, ManualClock, MemoryLog
from groupcoord.protocol import messages as msg
from groupcoord.protocol.log import RecordBatchTooLarge
from groupcoord.protocol.values import OffsetAndMetadata, TopicPartition
from groupcoord.storage import StorageRoot
from groupcoord.storage.compaction import CLEANED_SUFFIX
from groupcoord.storage.segment import segment_file_name

HOUR_MS = 3_600_000
T0, T1, U0 = TopicPartition("t", 0), TopicPartition("t", 1), TopicPartition("u", 0)


class LogThatRefuses(MemoryLog):
    """A MemoryLog that refuses appends (as a log refuses an oversized batch) while `refusing` is set."""

    refusing = False

    def append(self, records) -> int:
        if not self.refusing:
            return super().append(records)
        raise RecordBatchTooLarge(f"refused {len(records)} records")


def _ids(shard: Shard, group: str) -> list[str]:
    return sorted(shard.coord.groups.groups[group].members)


def _state(shard: Shard, group: str) -> str:
    group_obj = shard.coord.groups.get_group(group)
    return "Dead" if group_obj is None else group_obj.state.value


# --- supervised timers -----------------------------------------------------------------------------


def test_a_timer_callback_that_raises_is_counted_and_sessions_still_expire():
    shard = Shard()
    coord = shard.coord

    def broken() -> None:
        raise RuntimeError("a bug in one timer")

    coord.runtime.timers.schedule(("heartbeat", "stable", "bogus"), shard.clock.now_ms() + 1, broken)
    shard.clock.advance(shard.session_ms + 1)
    coord.tick()
    assert coord.timer_failures == 1
    # The sessions of "stable" (no heartbeats) still expired: its dynamic members are gone.
    assert _state(shard, "stable") in ("PreparingRebalance", "Empty", "CompletingRebalance")
    assert shard.ids["@m0"] not in coord.groups.groups["stable"].members


async def _local_actor(path: Any, **runtime: Any) -> PartitionActor:
    StorageRoot(path, 1)  # as start() does: a partition only opens an existing root
    actor = PartitionActor(0, 1, str(path))
    for name, value in runtime.items():
        setattr(actor.runtime, name, value)
    actor.runtime.supervisor.backoff_s = 0.01
    while not await actor.is_loaded():
        await asyncio.sleep(0.005)
    return actor


async def _until(predicate: Any, what: str, timeout_s: float = 20.0) -> None:
    deadline = asyncio.get_running_loop().time() + timeout_s
    while not predicate():
        if asyncio.get_running_loop().time() > deadline:
            raise AssertionError(f"never happened: {what}")
        await asyncio.sleep(0.01)


def test_the_actor_timer_loop_survives_a_failing_callback_and_a_failing_turn(tmp_path):
    async def scenario():
        actor = await _local_actor(tmp_path)
        rt = actor.runtime
        coord = rt.coord
        fired = []

        def broken() -> None:
            raise RuntimeError("a bug in one timer")

        real_fire = coord.fire_timers
        calls = {"n": 0}

        def fire_once_broken(limit: int) -> bool:
            calls["n"] += 1
            if calls["n"] == 1:
                raise RuntimeError("a bug in the turn itself")
            return real_fire(limit)

        coord.fire_timers = fire_once_broken
        now = coord.runtime.monotonic()
        coord.runtime.timers.schedule(("heartbeat", "g", "bad"), now, broken)
        coord.runtime.timers.schedule(("heartbeat", "g", "good"), now + 1, lambda: fired.append(True))
        rt.kick()
        await _until(lambda: fired, "the timer after the failing one fired")
        # And the loop still serves timers armed later.
        coord.runtime.timers.schedule(("heartbeat", "g", "later"), coord.runtime.monotonic(), lambda: fired.append(2))
        rt.kick()
        await _until(lambda: 2 in fired, "a later timer fired")
        failures, running = rt.loop_failures(), rt.supervisor.running()
        await actor.close()
        return failures, running

    failures, running = asyncio.run(scenario())
    assert failures["timers"] == 1 and failures["timer callbacks"] == 1
    assert "timers" in running and "compaction" in running


def test_a_failing_compaction_is_counted_and_retried_while_commits_are_served(tmp_path):
    tps = {TopicPartition("t", p): OffsetAndMetadata(1) for p in range(50)}

    async def scenario():
        actor = await _local_actor(tmp_path, compaction_interval_s=0.02)
        rt = actor.runtime
        rt.log.segment_bytes = 2048
        rt.log.min_compaction_bytes = 1
        # A directory where compaction writes its cleaned segment: opening it fails (EISDIR).
        blocker = rt.log.directory / (segment_file_name(0) + CLEANED_SUFFIX)
        os.makedirs(blocker)
        commits = []
        for i in range(20):
            offsets = {tp: OffsetAndMetadata(i) for tp in tps}
            response = await actor.commit_offsets(msg.OffsetCommitRequest("g", offsets))
            commits.append(set(response.errors.values()))
        await _until(lambda: rt.supervisor.failures["compaction"] >= 2, "compaction failed twice")
        served = await actor.commit_offsets(msg.OffsetCommitRequest("g", {tp: OffsetAndMetadata(99) for tp in tps}))
        failures_while_blocked = rt.supervisor.failures["compaction"]
        os.rmdir(blocker)
        await _until(lambda: not rt.log.compaction_due(), "compaction succeeded once unblocked")
        fetched = await actor.fetch_offsets(msg.OffsetFetchRequest("g", list(tps)))
        running = rt.supervisor.running()
        await actor.close()
        return commits, served, failures_while_blocked, fetched, running

    commits, served, failures, fetched, running = asyncio.run(scenario())
    assert all(c == {Errors.NONE} for c in commits)
    assert set(served.errors.values()) == {Errors.NONE}
    assert failures >= 2
    assert {p.offset for p in fetched.offsets.values()} == {99}
    assert "compaction" in running


def test_a_loop_that_cannot_go_on_fails_the_actor(tmp_path):
    async def scenario():
        actor = await _local_actor(tmp_path, compaction_interval_s=0.02)
        rt = actor.runtime
        failed: list[BaseException] = []
        rt.fail = failed.append  # instead of ending this test process
        await asyncio.get_running_loop().run_in_executor(None, rt.log.close)  # the log is gone
        await _until(lambda: failed, "the actor was failed")
        running = rt.supervisor.running()
        rt.log = None
        await actor.close()
        return failed, running

    failed, running = asyncio.run(scenario())
    assert "closed" in str(failed[0]) and "compaction" not in running


# --- records before state ------------------------------------------------------------------------


def _refusal_cases(shard: Shard) -> list[tuple[str, Any, Any]]:
    """(api, request, what a refused answer carries) for every request type that writes records."""
    opaque = [msg.MemberIdentity(m) for m in _ids(shard, "opaque")]
    return [
        ("join_group", msg.JoinGroupRequest("fresh", 10_000, 30_000, protocol_type="consumer",
                                        protocols=[("range", b"")], require_known_member_id=False),
         lambda r: r.error),
        ("leave_group", msg.LeaveGroupRequest("opaque", opaque), lambda r: r.error),
        ("commit_offsets", msg.OffsetCommitRequest("empty", {T0: OffsetAndMetadata(50)}),
         lambda r: set(r.errors.values()).pop()),
        ("delete_offsets", msg.OffsetDeleteRequest("empty", [U0]), lambda r: r.error),
        ("delete_groups", msg.DeleteGroupsRequest(["empty"]), lambda r: r.results["empty"]),
    ]


def test_every_request_whose_records_are_refused_leaves_no_trace_and_later_requests_work():
    log = LogThatRefuses()
    shard = Shard(log=log)
    m0 = shard.ids["@m0"]
    reads = [
        ("heartbeat", msg.HeartbeatRequest("stable", 1, m0)),
        ("fetch_offsets", msg.OffsetFetchRequest("stable")),
        ("list_groups", msg.ListGroupsRequest()),
        ("describe_groups", msg.DescribeGroupsRequest(["stable", "empty"])),
    ]
    for api, req, error_of in _refusal_cases(shard):
        before = shard.snapshot()
        log.refusing = True
        response = getattr(shard.coord, api)(req).result()
        assert error_of(response) == Errors.UNKNOWN_SERVER_ERROR, (api, response)
        for read_api, read in reads:  # requests that write nothing are answered as usual
            assert getattr(shard.coord, read_api)(read).result() is not None
        log.refusing = False
        assert shard.snapshot() == before, api
    # Every refused request succeeds once the log takes writes again, and the rest goes on working.
    cases = _refusal_cases(shard)
    for api, req, error_of in cases[1:] + cases[:1]:  # the join last: it waits out the initial delay
        response, _ = shard.answer(api, req)
        assert error_of(response) in (Errors.NONE, Errors.MEMBER_ID_REQUIRED), (api, response)
    assert _state(shard, "empty") == "Dead" and _state(shard, "opaque") == "Empty"
    again = shard.coord.commit_offsets(msg.OffsetCommitRequest("empty", {T0: OffsetAndMetadata(3)})).result()
    assert set(again.errors.values()) == {Errors.NONE} and _state(shard, "empty") == "Empty"


def test_a_session_expiry_whose_record_is_refused_leaves_the_group_and_is_retried():
    log = LogThatRefuses()
    shard = Shard(log=log)
    coord = shard.coord
    survivor = _ids(shard, "opaque")[0]
    coord.leave_group(msg.LeaveGroupRequest("opaque", [msg.MemberIdentity(_ids(shard, "opaque")[1])]))
    shard.answer("heartbeat", msg.HeartbeatRequest("opaque", 1, survivor))  # the rebalance runs out
    generation = coord.groups.groups["opaque"].generation_id
    before = (_state(shard, "opaque"), _ids(shard, "opaque"), generation)
    log.refusing = True
    shard.clock.advance(shard.session_ms + shard.rebalance_ms + 1)  # the last member's session ends
    coord.tick()
    assert (_state(shard, "opaque"), _ids(shard, "opaque"), coord.groups.groups["opaque"].generation_id) == before
    assert coord.timer_failures >= 1
    log.refusing = False
    shard.clock.advance(2_000)
    coord.tick()
    assert _state(shard, "opaque") == "Empty" and _ids(shard, "opaque") == []


# --- bounded sweeps --------------------------------------------------------------------------------


def _bare_shard() -> tuple[GroupCoordinator, ManualClock, MemoryLog]:
    clock, log = ManualClock(1_000_000), MemoryLog()
    return GroupCoordinator(GroupConfig(min_session_timeout_ms=10), clock, log), clock, log


def test_offset_expiry_runs_in_bounded_steps_and_keeps_a_commit_made_between_steps():
    coord, clock, log = _bare_shard()
    coord.retention.step_size = 1_000
    many = {TopicPartition("big", p): OffsetAndMetadata(p) for p in range(5_000)}
    coord.commit_offsets(msg.OffsetCommitRequest("bulk", many))
    clock.advance(coord.config.offsets_retention_ms + coord.config.offsets_retention_check_interval_ms)
    start = len(log.records)
    assert coord.fire_timers(1)  # one step: more to do
    first_step = len(log.records) - start
    assert 0 < first_step <= 1_000
    late = TopicPartition("big", 4_999)
    coord.commit_offsets(msg.OffsetCommitRequest("bulk", {late: OffsetAndMetadata(7)}))
    steps = 1
    while coord.fire_timers(1):
        steps += 1
    assert steps >= 4
    assert {tp: v.offset for tp, v in coord.offsets.offsets_of("bulk").items()} == {late: 7}
    assert coord.groups.get_group("bulk").state.value == "Empty"


def test_session_expiry_fires_a_bounded_number_of_timers_per_turn():
    coord, clock, _ = _bare_shard()
    for i in range(30):
        coord.join_group(msg.JoinGroupRequest(f"pending-{i}", 10_000, 30_000, protocol_type="consumer",
                                          protocols=[("range", b"")]))
    clock.advance(10_000)
    assert coord.fire_timers(10)
    assert sum(1 for g in coord.groups.groups.values() if g.pending_members) == 20


# --- monotonic deadlines ----------------------------------------------------------------------


@pytest.mark.parametrize("step_ms", [HOUR_MS, -HOUR_MS])
def test_a_wall_clock_step_expires_no_session_early_or_late(step_ms):
    shard = Shard()
    coord = shard.coord
    m0 = shard.ids["@m0"]
    members = set(_ids(shard, "stable"))
    for m in members:
        instance = "inst-a" if m == shard.ids["@static"] else None
        assert coord.heartbeat(msg.HeartbeatRequest("stable", 1, m, instance)).result().error == Errors.NONE
    shard.clock.step_wall(step_ms)
    shard.clock.advance(shard.session_ms - 1)
    coord.tick()
    assert set(_ids(shard, "stable")) == members and _state(shard, "stable") == "Stable"  # not early
    shard.clock.advance(1)
    coord.tick()
    assert m0 not in _ids(shard, "stable")  # not late
    # What is recorded carries the wall clock.
    coord.commit_offsets(msg.OffsetCommitRequest("empty", {T0: OffsetAndMetadata(1)}))
    assert shard.log.records[-1].value.commit_timestamp == shard.clock.now_ms()


# --- KIP-211 --------------------------------------------------------------------------------------


def _commit_with_retention(shard: Shard, group: str, tp: TopicPartition, **member: Any) -> None:
    req = msg.OffsetCommitRequest(group, {tp: OffsetAndMetadata(5)}, retention_time_ms=100, **member)
    assert set(shard.coord.commit_offsets(req).result().errors.values()) == {Errors.NONE}


def _expiry_shard() -> Shard:
    """The prebuilt groups, with the retention check every millisecond."""
    return Shard(dataclasses.replace(CONFIG, offsets_retention_check_interval_ms=1))


def _run_expiry(shard: Shard, after_ms: int) -> None:
    """Let `after_ms` pass; the retention check runs on its way."""
    shard.clock.advance(after_ms)
    shard.coord.tick()


def test_explicit_retention_expires_in_an_empty_consumer_group():
    shard = _expiry_shard()
    ids = _ids(shard, "opaque")
    shard.coord.leave_group(msg.LeaveGroupRequest("opaque", [msg.MemberIdentity(m) for m in ids]))
    assert _state(shard, "opaque") == "Empty"
    _commit_with_retention(shard, "opaque", U0)
    _run_expiry(shard, 100)
    assert U0 not in shard.coord.offsets.offsets_of("opaque")


def test_explicit_retention_expires_in_a_group_without_protocol_type():
    shard = _expiry_shard()
    _commit_with_retention(shard, "empty", U0)
    _run_expiry(shard, 99)
    assert U0 in shard.coord.offsets.offsets_of("empty")
    _run_expiry(shard, 1)
    assert U0 not in shard.coord.offsets.offsets_of("empty")


def test_explicit_retention_expires_for_an_unsubscribed_topic_of_a_stable_consumer_group_only():
    shard = _expiry_shard()
    m0 = shard.ids["@m0"]
    _commit_with_retention(shard, "stable", U0, generation_id=1, member_id=m0)  # "u": nobody subscribes
    _commit_with_retention(shard, "stable", T1, generation_id=1, member_id=m0)  # "t": subscribed
    _run_expiry(shard, 100)
    offsets = shard.coord.offsets.offsets_of("stable")
    assert U0 not in offsets and T1 in offsets


def test_explicit_retention_does_not_expire_where_kafka_expires_nothing():
    shard = _expiry_shard()
    m0 = shard.ids["@m0"]
    _commit_with_retention(shard, "opaque", U0, generation_id=1, member_id=_ids(shard, "opaque")[0])
    # A Stable group whose subscriptions cannot be read, and a rebalancing consumer group.
    shard.coord.join_group(msg.JoinGroupRequest("stable", 10_000, 30_000, m0, protocol_type="consumer",
                                            protocols=[("range", b"x")]))
    assert _state(shard, "stable") == "PreparingRebalance"
    _commit_with_retention(shard, "stable", U0, generation_id=1, member_id=m0)
    _run_expiry(shard, 100)
    assert U0 in shard.coord.offsets.offsets_of("opaque") and U0 in shard.coord.offsets.offsets_of("stable")
