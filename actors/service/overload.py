"""How far behind its requests a partition actor runs: the lag its shard's coordinator time subtracts.

A member's heartbeat that waits in the actor's queue was still sent in time: the coordinator's
lateness is not the member's failure. So the shard's deadlines run on coordinator time (see
CoordinatorClock), the machine's monotonic clock less the lag measured here by a probe on the
actor's own event loop (how late a short sleep wakes up), so nothing a client says is trusted.
The lag also sets `throttle_time_ms`, which tells clients to back off (Kafka's way).
"""

from __future__ import annotations

import asyncio
import logging
import time
from collections import deque

from groupcoord.protocol import SystemClock
from groupcoord.protocol.shard.clock import CoordinatorClock

log = logging.getLogger(__name__)

PROBE_INTERVAL_S = 0.01  # the probe's sleep; its oversleep is the loop's lag (100 wake-ups a second)
# The lag is the worst oversleep seen this recently: after a spike, coordinator time stays that far behind
# for this long, so heartbeats still on their way (in Ray's queues, outside the loop) arrive in time.
LAG_WINDOW_S = 5.0
THROTTLE_AFTER_MS = 100  # lag past which responses ask clients to back off
MAX_THROTTLE_MS = 5_000


def coordinator_clock() -> CoordinatorClock:
    """Coordinator time over the machine's clocks, for a partition's shard."""
    return CoordinatorClock(SystemClock())


class LagProbe:
    """Measures how late the event loop runs work it was handed, and keeps `clock.behind_ms` up to date."""

    def __init__(self, clock: CoordinatorClock) -> None:
        self.clock = clock
        self.lag_ms = 0  # the worst lag of the window: what coordinator time subtracts
        self.current_ms = 0  # the last probe's: what the throttle asks for
        self.max_lag_ms = 0
        self._samples: deque[tuple[float, float]] = deque()
        self._due = time.monotonic() + PROBE_INTERVAL_S

    def behind_ms(self) -> int:
        """The lag now: the worst recent oversleep, or longer if the probe that is due now has not run yet."""
        overdue = (time.monotonic() - self._due) * 1000
        return max(self.lag_ms, int(overdue))

    def refresh(self) -> int:
        """Bring the clock's lag up to date (before firing timers); returns it."""
        self.clock.behind_ms = self.behind_ms()
        return self.clock.behind_ms

    def throttle_time_ms(self) -> int:
        """How long a client should wait before its next request: 0 unless the actor runs behind right now."""
        overdue = (time.monotonic() - self._due) * 1000
        lag = max(self.current_ms, int(overdue))
        return 0 if lag < THROTTLE_AFTER_MS else min(MAX_THROTTLE_MS, lag)

    async def turn(self) -> None:
        """One probe: sleep briefly, note how late it woke (the supervisor runs this again and again)."""
        self._due = time.monotonic() + PROBE_INTERVAL_S
        await asyncio.sleep(PROBE_INTERVAL_S)
        now = time.monotonic()
        late_s = max(0.0, now - self._due)
        samples = self._samples
        samples.append((now, late_s))
        while samples and now - samples[0][0] > LAG_WINDOW_S:
            samples.popleft()
        self.current_ms = int(late_s * 1000)
        self.lag_ms = int(max(s for _, s in samples) * 1000)
        self.max_lag_ms = max(self.max_lag_ms, self.lag_ms)
        self.clock.behind_ms = self.lag_ms
