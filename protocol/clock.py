"""Clocks: the shard never reads the machine's time itself, it is handed one of these."""

from __future__ import annotations

import time
from typing import Protocol


class Clock(Protocol):
    """Anything that tells the time in milliseconds."""

    def now_ms(self) -> int:
        """The current time in milliseconds."""
        ...


class SystemClock:
    """The wall clock, in milliseconds since the epoch."""

    def now_ms(self) -> int:
        """Milliseconds since the epoch, by the machine's wall clock."""
        return time.time_ns() // 1_000_000


class ManualClock:
    """A clock that moves only when told to, so tests advance time instead of sleeping."""

    def __init__(self, now_ms: int = 0) -> None:
        self._now = int(now_ms)

    def now_ms(self) -> int:
        """The time this clock has been set or advanced to, in milliseconds."""
        return self._now

    def advance(self, ms: int) -> None:
        """Move the clock forward by `ms` milliseconds."""
        if ms < 0:
            raise ValueError(f"a clock cannot go back: advance({ms})")
        self._now += int(ms)
