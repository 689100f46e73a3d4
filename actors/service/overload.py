"""How far behind its requests a partition actor runs: the lag its shard's coordinator time subtracts.

A member's heartbeat that waits in the actor's queues was still sent in time: the coordinator's
lateness is not the member's failure. So the shard's deadlines run on coordinator time (see
CoordinatorClock), the machine's monotonic clock less the lag measured here, so nothing a client
says is trusted. Requests wait in two queues, and a probe measures each: the event loop's (how late
a short sleep wakes up) and Ray's before it (how long a call the actor sends itself takes to start
running: Ray's receiving threads, the GIL, the hand-over to the loop). The lag also sets
`throttle_time_ms`, which tells clients to back off (Kafka's way).
"""

from __future__ import annotations

import asyncio
import itertools
import logging
import math
import secrets
import time
from collections import deque
from typing import Any, Awaitable, Callable

from groupcoord.protocol import SystemClock
from groupcoord.protocol.shard.clock import CoordinatorClock

log = logging.getLogger(__name__)

PROBE_INTERVAL_S = 0.01  # the loop probe's sleep; its oversleep is the loop's lag (100 wake-ups a second)
PROBE_IDLE_INTERVAL_S = 0.1  # its sleep once no batch has arrived for a lag window (an overdue wake-up counts at once)
QUEUE_PROBE_INTERVAL_S = 0.05  # pause between the queue probe's calls (one is in flight at a time)
# The pause once no batch has arrived for a lag window: an idle actor's probe calls through Ray would otherwise cost
# it a few percent of a core. A batch that arrives ends the pause at once; a starved process is still seen by the
# loop probe, whose overdue wake-up counts while it is due.
QUEUE_PROBE_IDLE_INTERVAL_S = 1.0
# A queue probe's call not running after this long stops counting (a lost call must not freeze coordinator time).
QUEUE_PROBE_TIMEOUT_S = 30.0
# The lag is the worst wait seen this recently: after a spike, coordinator time stays that far behind
# for this long, so heartbeats still on their way (in Ray's queues, outside the loop) arrive in time.
LAG_WINDOW_S = 5.0
THROTTLE_AFTER_MS = 100  # lag past which responses ask clients to back off
MAX_THROTTLE_MS = 5_000


def _monotonic() -> float:
    # `time` looked up at each call, not bound once: the simulator swaps this module's `time` for its own clock.
    return time.monotonic()


def coordinator_clock() -> CoordinatorClock:
    """Coordinator time over the machine's clocks, for a partition's shard."""
    return CoordinatorClock(SystemClock())


class LagProbe:
    """Measures how late the actor runs the work it was handed, and keeps `clock.behind_ms` up to date.

    Three sources, each a wait that coordinator time subtracts: `turn` (how late the event loop
    runs a callback), the queue probe's calls (`queue_call_sent`, then `queue_call_arrived` once
    the call runs: Ray's queue before the loop), and the batches themselves (`batch_arrived` ..
    `batch_served`): a batch yields between its requests, so its last ones run long after it
    arrived. While a probe's call or a batch is still on its way, its age counts already, so
    coordinator time stands still while a queue grows, not only once it has drained.
    """

    def __init__(self, clock: CoordinatorClock, monotonic: Callable[[], float] | None = None) -> None:
        self.clock = clock
        self._now = monotonic or _monotonic  # seconds; tests hand in a clock they move
        self.lag_ms = 0  # the worst wait of the window: what coordinator time subtracts
        self.current_ms = 0  # the latest wait of the probes: what the throttle asks for
        self.max_lag_ms = 0
        self.queue_ms = 0  # the queue probe's last wait (Ray's queue and the loop's, together)
        # The window's waits, (when noted, seconds waited) with the waits decreasing: its first is the worst.
        self._window: deque[tuple[float, float]] = deque()
        self._due = float("inf")  # when the loop probe's sleep should end (none armed before the first turn)
        self._call: tuple[str, float] | None = None  # the queue probe's call in flight: (token, sent at)
        self._loop_ms = 0
        self._serving: dict[int, float] = {}  # batches being served: key -> when they arrived (oldest first)
        self._keys = itertools.count()
        self._last_batch = -math.inf  # when the latest batch arrived
        self._batch_event: asyncio.Event | None = None  # set by the next batch, while the queue probe idles

    def _outstanding_s(self, now: float, batches: bool = True) -> float:
        """How long the work still on its way has waited: the loop probe's overdue wake-up, the queue
        probe's call in flight and (with `batches`) the oldest batch being served."""
        waited = now - self._due
        if self._call is not None:
            waited = max(waited, min(now - self._call[1], QUEUE_PROBE_TIMEOUT_S))
        if batches and self._serving:
            waited = max(waited, now - next(iter(self._serving.values())))
        return max(0.0, waited)

    def behind_ms(self) -> int:
        """The lag now: the worst recent wait, or longer if a probe that is due or a batch has waited longer."""
        return max(self.lag_ms, int(self._outstanding_s(self._now()) * 1000))

    def refresh(self) -> int:
        """Bring the clock's lag up to date (before firing timers or handling requests); returns it."""
        self.clock.behind_ms = self.behind_ms()
        return self.clock.behind_ms

    def throttle_time_ms(self) -> int:
        """How long a client should wait before its next request: 0 unless the actor runs behind right now."""
        lag = max(self.current_ms, int(self._outstanding_s(self._now(), batches=False) * 1000))
        return 0 if lag < THROTTLE_AFTER_MS else min(MAX_THROTTLE_MS, lag)

    def _note(self, now: float, waited_s: float) -> None:
        window = self._window
        while window and window[-1][1] <= waited_s:
            window.pop()  # a smaller wait noted earlier can never be the window's worst again
        window.append((now, waited_s))
        while now - window[0][0] > LAG_WINDOW_S:
            window.popleft()
        self.lag_ms = int(window[0][1] * 1000)
        self.max_lag_ms = max(self.max_lag_ms, self.lag_ms)
        self.refresh()

    async def turn(self) -> None:
        """One loop probe: sleep briefly, note how late it woke (the supervisor runs this again and again)."""
        start = self._now()
        interval = PROBE_INTERVAL_S if self._active(start) else max(PROBE_INTERVAL_S, PROBE_IDLE_INTERVAL_S)
        self._due = start + interval
        await asyncio.sleep(interval)
        now = self._now()
        late_s = max(0.0, now - self._due)
        self._loop_ms = int(late_s * 1000)
        self.current_ms = max(self._loop_ms, self.queue_ms)
        self._note(now, late_s)

    def queue_call_sent(self) -> str:
        """A queue probe's call is about to be sent: its token, which `queue_call_arrived` expects back."""
        token = secrets.token_hex(8)
        self._call = (token, self._now())
        return token

    def queue_call_arrived(self, token: str) -> None:
        """The queue probe's call runs: note how long it waited. Any other token (not ours, or late) is ignored."""
        call = self._call
        if call is None or call[0] != token:
            return
        self._call = None
        now = self._now()
        waited_s = now - call[1]
        self.queue_ms = int(waited_s * 1000)
        self.current_ms = max(self._loop_ms, self.queue_ms)
        self._note(now, waited_s)

    def queue_call_abandoned(self) -> None:
        """The call in flight will not be counted (it timed out, or failed): its age stops counting."""
        self._call = None

    def batch_arrived(self) -> int:
        """A batch of requests starts running: it arrived a queue probe's wait ago. Returns its key."""
        key = next(self._keys)
        now = self._now()
        self._serving[key] = now - self.queue_ms / 1000
        self._last_batch = now
        if self._batch_event is not None:
            self._batch_event.set()
        self.refresh()
        return key

    def _active(self, now: float) -> bool:
        """Whether a batch arrived within the last lag window (the probes then run at their short intervals)."""
        return now - self._last_batch < LAG_WINDOW_S

    async def queue_probe_pause(self) -> None:
        """The pause before the next queue probe: short while batches arrive, long once none has for a lag window,
        and ended at once by the next batch."""
        if self._active(self._now()):
            await asyncio.sleep(QUEUE_PROBE_INTERVAL_S)
            return
        self._batch_event = event = asyncio.Event()
        try:
            await asyncio.wait_for(event.wait(), QUEUE_PROBE_IDLE_INTERVAL_S)
        except TimeoutError:
            pass
        finally:
            self._batch_event = None

    def batch_served(self, key: int) -> None:
        """Every request of the batch `key` has run: note how long its last one waited."""
        arrived = self._serving.pop(key, None)
        if arrived is not None:
            now = self._now()
            self._note(now, now - arrived)


async def queue_probe_turn(probe: LagProbe, call: Callable[[str], Awaitable[Any]], counted: bool = True) -> None:
    """One queue probe: `call(token)` sends a call through Ray to this actor's `queue_probe`; wait until it is done.

    With `counted` False the call is sent but its wait not noted (the first call through a new
    handle also resolves the actor's address).
    """
    token = probe.queue_call_sent() if counted else "warm-up"
    try:
        await asyncio.wait_for(call(token), QUEUE_PROBE_TIMEOUT_S)
    except TimeoutError:
        log.warning("the queue probe's call did not run within %.0f s", QUEUE_PROBE_TIMEOUT_S)
    finally:
        probe.queue_call_abandoned()
    await probe.queue_probe_pause()
