"""Clocks: the shard never reads the machine's time itself, it is handed one of these.

A clock tells two times. `now_ms()` is the wall clock: it goes into what is recorded (commit and
expire timestamps, when a group changed state). `monotonic_ms()` drives every deadline (sessions,
rebalance and retention timers): it never steps, so an NTP correction of the wall clock cannot
expire a session early or keep it alive late.
"""

from __future__ import annotations

import time
from typing import Callable, Protocol


class Clock(Protocol):
    """Anything that tells the time in milliseconds (a clock without `monotonic_ms` uses `now_ms` for both)."""

    def now_ms(self) -> int:
        """The current wall-clock time in milliseconds."""
        ...


def monotonic_ms_of(clock: Clock) -> Callable[[], int]:
    """The function that reads `clock`'s monotonic time: its `monotonic_ms`, or `now_ms` if it has none."""
    return getattr(clock, "monotonic_ms", clock.now_ms)


def due_ms_of(clock: Clock) -> Callable[[], int]:
    """The function that tells which deadlines have passed: the clock's `due_ms`, or its monotonic time."""
    return getattr(clock, "due_ms", None) or monotonic_ms_of(clock)



class SystemClock:
    """The machine's clocks: the wall clock for timestamps, the monotonic clock for deadlines."""

    def now_ms(self) -> int:
        """Milliseconds since the epoch, by the machine's wall clock."""
        return time.time_ns() // 1_000_000

    def monotonic_ms(self) -> int:
        """Milliseconds of the machine's monotonic clock (arbitrary origin, never steps)."""
        return time.monotonic_ns() // 1_000_000


class ManualClock:
    """A clock that moves only when told to, so tests advance time instead of sleeping.

    `advance` moves both times together; `step_wall` moves only the wall clock (either way), as
    an NTP step does on a real machine.
    """

    def __init__(self, now_ms: int = 0) -> None:
        self._now = int(now_ms)
        self._wall_offset = 0

    def now_ms(self) -> int:
        """The wall-clock time this clock has been set, advanced or stepped to, in milliseconds."""
        return self._now + self._wall_offset

    def monotonic_ms(self) -> int:
        """The monotonic time: where `advance` has moved the clock, regardless of wall steps."""
        return self._now

    def advance(self, ms: int) -> None:
        """Move the clock forward by `ms` milliseconds."""
        if ms < 0:
            raise ValueError(f"a clock cannot go back: advance({ms})")
        self._now += int(ms)

    def step_wall(self, ms: int) -> None:
        """Step the wall clock alone by `ms` (negative: back), leaving deadlines where they are."""
        self._wall_offset += int(ms)


class CoordinatorClock:
    """Coordinator time: deadlines are armed on another clock's monotonic time and judged on it less the
    coordinator's lag.

    A heartbeat that waits in the coordinator's queue was sent in time. So what happens is stamped
    when it happens (`monotonic_ms`, the base clock's: a heartbeat served restarts its session
    from then), while whether a deadline has passed is judged on `due_ms`: the base time less
    `behind_ms`, how long the oldest work still queued may have waited (whoever runs the shard
    measures and sets it), never going back. While the lag grows, due time stands still; once the
    queue drains, it catches up and what is really overdue fires. A deadline passes only when no
    request still queued can have arrived before it. The wall clock is the base clock's.
    """

    def __init__(self, base: Clock) -> None:
        self.base = base
        self._monotonic = monotonic_ms_of(base)
        self.behind_ms = 0
        self._last = self._monotonic()

    def now_ms(self) -> int:
        """The base clock's wall-clock time."""
        return self.base.now_ms()

    def monotonic_ms(self) -> int:
        """The base clock's monotonic time: when something happens (a session restarts from it)."""
        return self._monotonic()

    def due_ms(self) -> int:
        """The base clock's monotonic time less `behind_ms`, never below an earlier reading: deadlines
        up to it have passed."""
        t = self._monotonic() - self.behind_ms
        if t > self._last:
            self._last = t
        return self._last
