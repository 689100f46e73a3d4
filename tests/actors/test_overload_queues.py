"""The lag a partition actor measures counts every queue a request waits in, not only its event loop's.

A probe's call still in Ray's queue and a batch whose last requests have not run yet are lag
already (the overload benchmark's false expiries came from waits the loop probe did not see).
No sleeps: the probe reads a clock the tests move.
"""

from __future__ import annotations

import asyncio
from types import SimpleNamespace

from groupcoord.actors.client.member import max_throttled_wait_s
from groupcoord.actors.service import overload
from groupcoord.actors.service.overload import LAG_WINDOW_S, QUEUE_PROBE_TIMEOUT_S, LagProbe, queue_probe_turn
from groupcoord.actors.service.request_path import _throttled
from groupcoord.protocol import Errors, ManualClock
from groupcoord.protocol.apis import Api
from groupcoord.protocol.messages import HeartbeatResponse, OffsetCommitResponse, OffsetFetchResponse
from groupcoord.protocol.shard.clock import CoordinatorClock


class _Seconds:
    def __init__(self) -> None:
        self.t = 1000.0

    def __call__(self) -> float:
        return self.t


def _probe() -> tuple[LagProbe, _Seconds, CoordinatorClock, ManualClock]:
    base = ManualClock(1_000_000)
    clock = CoordinatorClock(base)
    now = _Seconds()
    return LagProbe(clock, monotonic=now), now, clock, base


def test_a_queue_probe_call_still_queued_is_lag_already_and_its_wait_is_held_for_the_window():
    probe, now, clock, _base = _probe()
    token = probe.queue_call_sent()
    now.t += 3.0  # the call waits in Ray's queue; the event loop itself is idle
    assert probe.behind_ms() >= 3000
    assert probe.throttle_time_ms() >= 3000
    assert probe.refresh() >= 3000 and clock.behind_ms >= 3000
    probe.queue_call_arrived(token)
    assert probe.queue_ms == 3000 and probe.lag_ms == 3000
    now.t += LAG_WINDOW_S / 2
    assert probe.behind_ms() == 3000  # the worst wait of the window, after the queue drained
    now.t += LAG_WINDOW_S
    probe.queue_call_arrived(probe.queue_call_sent())  # a quick call: the spike has left the window
    assert probe.lag_ms == 0 and probe.behind_ms() == 0


def test_only_the_probes_own_call_counts():
    probe, now, _clock, _base = _probe()
    token = probe.queue_call_sent()
    now.t += 2.0
    probe.queue_call_arrived("not-" + token)  # anyone else's call (a client naming a token) is ignored
    assert probe.queue_ms == 0 and probe.behind_ms() >= 2000
    probe.queue_call_abandoned()
    assert probe.behind_ms() == 0
    now.t += QUEUE_PROBE_TIMEOUT_S * 3
    token = probe.queue_call_sent()
    now.t += QUEUE_PROBE_TIMEOUT_S * 3  # a lost call stops counting past the timeout: due time is not frozen forever
    assert probe.behind_ms() == int(QUEUE_PROBE_TIMEOUT_S * 1000)


def test_a_batch_being_served_holds_due_time_at_its_arrival():
    probe, now, clock, base = _probe()
    probe.queue_ms = 500  # requests waited half a second in Ray's queue before the batch ran
    first = probe.batch_arrived()
    now.t += 1.0
    second = probe.batch_arrived()
    now.t += 2.0  # the batches yield to each other: the first one's last requests run 3 s after it began
    assert probe.behind_ms() >= 3500
    assert probe.throttle_time_ms() == 0  # the probes saw no wait: a long batch alone asks no client to back off
    probe.batch_served(first)
    assert probe.lag_ms == 3500  # noted: due time stays behind for the window
    base.advance(3500)
    probe.refresh()
    assert clock.due_ms() == 1_000_000  # nothing queued may have arrived later than the first batch
    probe.batch_served(second)
    assert probe.lag_ms == 3500


def test_the_queue_probe_turn_sends_a_counted_call_and_forgets_it_once_done():
    probe, now, _clock, _base = _probe()
    sent: list[str] = []

    async def call(token: str) -> None:
        sent.append(token)
        now.t += 0.25  # the call's wait in Ray's queue
        probe.queue_call_arrived(token)

    async def turns() -> None:
        await queue_probe_turn(probe, call, counted=False)  # the first call through a new handle is not counted
        assert probe.queue_ms == 0
        await queue_probe_turn(probe, call)

    asyncio.run(turns())
    assert len(sent) == 2 and probe.queue_ms == 250 and probe.behind_ms() == 250


def test_an_idle_actor_probes_its_queue_seldom_and_the_next_batch_ends_the_pause(monkeypatch):
    monkeypatch.setattr(overload, "QUEUE_PROBE_IDLE_INTERVAL_S", 600.0)  # only a batch can end the pause in time
    probe, _now, _clock, _base = _probe()

    async def idle_then_a_batch() -> None:
        pause = asyncio.ensure_future(probe.queue_probe_pause())
        for _ in range(5):
            await asyncio.sleep(0)
        assert not pause.done()  # no batch for a lag window: the probe waits for work
        probe.batch_served(probe.batch_arrived())
        await asyncio.wait_for(pause, 60)

    asyncio.run(idle_then_a_batch())


def test_while_batches_arrive_the_queue_probe_pauses_briefly(monkeypatch):
    monkeypatch.setattr(overload, "QUEUE_PROBE_IDLE_INTERVAL_S", 600.0)
    probe, now, _clock, _base = _probe()
    probe.batch_served(probe.batch_arrived())
    now.t += LAG_WINDOW_S / 2  # still within the window of the last batch

    async def pause() -> None:
        await asyncio.wait_for(probe.queue_probe_pause(), 60)  # QUEUE_PROBE_INTERVAL_S, not the idle pause

    asyncio.run(pause())


def test_the_probe_reads_the_clock_of_its_module_at_each_call(monkeypatch):
    # The simulator swaps overload's `time` for simulated time once the probe's class exists: the machine's clock
    # must not leak into a simulated run through a clock bound when the class was defined.
    now = _Seconds()
    monkeypatch.setattr(overload, "time", SimpleNamespace(monotonic=now))
    probe = LagProbe(CoordinatorClock(ManualClock(1_000_000)))
    probe.batch_arrived()
    now.t += 2.0
    assert probe.behind_ms() == 2000


def test_a_throttled_batch_tells_heartbeats_and_commits_to_wait_and_shares_equal_answers():
    none, rejoin = HeartbeatResponse(Errors.NONE), HeartbeatResponse(Errors.REBALANCE_IN_PROGRESS)
    commit, fetch = OffsetCommitResponse({}), OffsetFetchResponse(Errors.NONE, {})
    calls = [(Api.HEARTBEAT, None)] * 3 + [(Api.HEARTBEAT, None), (Api.OFFSET_COMMIT, None), (Api.OFFSET_FETCH, None)]
    out = _throttled(calls, [none, HeartbeatResponse(Errors.NONE), none, rejoin, commit, fetch], 250)
    assert [r.throttle_time_ms for r in out[:5]] == [250] * 5
    assert out[0] is out[1] is out[2] and out[3].error == Errors.REBALANCE_IN_PROGRESS
    assert out[4] == OffsetCommitResponse({}, throttle_time_ms=250) and out[5] is fetch  # a fetch is not throttled
    assert none.throttle_time_ms == 0  # the shard's shared answer is copied, never changed


def test_a_throttled_member_waits_at_most_its_interval_or_half_its_session():
    assert max_throttled_wait_s(1.0, 3.0) == 1.5  # Kafka's usual interval of a third of the session: it backs off
    assert max_throttled_wait_s(3.0, 45.0) == 22.5
    assert max_throttled_wait_s(2.0, 3.0) == 2.0  # never sooner than its interval
