"""Delayed operations keyed by name and fired by deadline, driven by an injected clock."""

from __future__ import annotations

import heapq
import itertools
from typing import Callable, Hashable


class Purgatory:
    """Timers by key: scheduling a key again replaces its timer; fire_due runs due ones in deadline order."""

    def __init__(self) -> None:
        self._heap: list[tuple[int, int, Hashable]] = []
        self._timers: dict[Hashable, tuple[int, int, Callable[[], None]]] = {}
        self._seq = itertools.count()

    def schedule(self, key: Hashable, deadline_ms: int, callback: Callable[[], None]) -> None:
        """Arm (or re-arm) the timer `key` to run `callback` at `deadline_ms`."""
        seq = next(self._seq)
        self._timers[key] = (deadline_ms, seq, callback)
        heapq.heappush(self._heap, (deadline_ms, seq, key))

    def cancel(self, key: Hashable) -> None:
        """Disarm the timer `key`, if armed."""
        self._timers.pop(key, None)

    def deadline(self, key: Hashable) -> int | None:
        """When the timer `key` fires, or None if it is not armed."""
        t = self._timers.get(key)
        return None if t is None else t[0]

    def __contains__(self, key: Hashable) -> bool:
        return key in self._timers

    def __len__(self) -> int:
        return len(self._timers)

    def next_deadline(self) -> int | None:
        """The earliest armed deadline, or None when nothing is armed."""
        self._drop_stale()
        return self._heap[0][0] if self._heap else None

    def fire_due(self, now_ms: int) -> int:
        """Run every timer due at `now_ms`, including those that firing arms; returns how many ran."""
        fired = 0
        while True:
            self._drop_stale()
            if not self._heap or self._heap[0][0] > now_ms:
                return fired
            _, _, key = heapq.heappop(self._heap)
            _, _, callback = self._timers.pop(key)
            callback()
            fired += 1

    def _drop_stale(self) -> None:
        heap = self._heap
        while heap:
            _deadline, seq, key = heap[0]
            t = self._timers.get(key)
            if t is not None and t[1] == seq:
                return
            heapq.heappop(heap)
