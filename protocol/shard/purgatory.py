"""Delayed operations keyed by name and fired by deadline, driven by an injected clock."""

from __future__ import annotations

import heapq
import itertools
from typing import Any, Callable, Hashable

# A timer is a list [deadline_ms, seq, callback, heap_seq]: seq orders timers with equal
# deadlines by scheduling time; heap_seq names the one heap entry that stands for the timer.
_DEADLINE, _SEQ, _CALLBACK, _HEAP_SEQ = 0, 1, 2, 3

Runner = Callable[[Hashable, Callable[[], None]], None]


class Purgatory:
    """Timers by key: scheduling a key again replaces its timer; fire_due runs due ones in deadline order.

    Re-arming a timer for later (as a KIP-848 heartbeat does) only updates it: its heap entry keeps
    the earlier deadline and is pushed again with the real one when it surfaces. So the heap
    holds one entry per armed timer (plus cancelled ones not yet popped), not one per heartbeat,
    and timers still fire in (deadline, scheduling order).
    """

    def __init__(self) -> None:
        self._heap: list[tuple[int, int, Hashable]] = []
        self._timers: dict[Hashable, list[Any]] = {}
        self._seq = itertools.count()

    def schedule(self, key: Hashable, deadline_ms: int, callback: Callable[[], None]) -> None:
        """Arm (or re-arm) the timer `key` to run `callback` at `deadline_ms`."""
        seq = next(self._seq)
        timer = self._timers.get(key)
        if timer is not None and timer[_DEADLINE] <= deadline_ms:
            # Its heap entry is no later than the new deadline: update in place, fix up when it surfaces.
            timer[_DEADLINE] = deadline_ms
            timer[_SEQ] = seq
            timer[_CALLBACK] = callback
            return
        self._timers[key] = [deadline_ms, seq, callback, seq]
        heapq.heappush(self._heap, (deadline_ms, seq, key))

    def cancel(self, key: Hashable) -> None:
        """Disarm the timer `key`, if armed."""
        self._timers.pop(key, None)

    def deadline(self, key: Hashable) -> int | None:
        """When the timer `key` fires, or None if it is not armed."""
        t = self._timers.get(key)
        return None if t is None else t[_DEADLINE]

    def entry(self, key: Hashable) -> tuple[int, Callable[[], None]] | None:
        """The deadline and callback of the timer `key`, or None if it is not armed."""
        t = self._timers.get(key)
        return None if t is None else (t[_DEADLINE], t[_CALLBACK])

    def deadlines(self) -> dict[Hashable, int]:
        """Every armed timer's key and deadline (a copy)."""
        return {key: t[_DEADLINE] for key, t in self._timers.items()}

    def __contains__(self, key: Hashable) -> bool:
        return key in self._timers

    def __len__(self) -> int:
        return len(self._timers)

    def count_by_kind(self) -> dict[str, int]:
        """Armed timers by kind: the first element of a tuple key (e.g. "heartbeat"), else the key itself."""
        counts: dict[str, int] = {}
        for key in self._timers:
            kind = str(key[0] if isinstance(key, tuple) and key else key)
            counts[kind] = counts.get(kind, 0) + 1
        return counts

    def next_deadline(self, exact_until: int | None = None) -> int | None:
        """The earliest armed deadline, or None when nothing is armed.

        With `exact_until`, only the timers due by then are put in order: an answer at or before it is
        exact, a later one may be early (a lower bound). A session timer that every heartbeat re-arms then
        moves in the heap about once per session, not once per heartbeat.
        """
        self._settle_top(exact_until)
        return self._heap[0][0] if self._heap else None

    def fire_due(self, now_ms: int, limit: int | None = None, runner: Runner | None = None) -> int:
        """Run timers due at `now_ms` in deadline order, including those that firing arms; returns how many ran.

        At most `limit` run (all when None), so a caller can yield between batches. `runner(key,
        callback)` runs each one (default: the callback itself), so a caller can supervise them.
        """
        fired = 0
        while limit is None or fired < limit:
            self._settle_top(now_ms)
            if not self._heap or self._heap[0][0] > now_ms:
                return fired
            _, _, key = heapq.heappop(self._heap)
            callback = self._timers.pop(key)[_CALLBACK]
            if runner is None:
                callback()
            else:
                runner(key, callback)
            fired += 1
        return fired

    def has_due(self, now_ms: int) -> bool:
        """Whether a timer is due at `now_ms`."""
        deadline = self.next_deadline(now_ms)
        return deadline is not None and deadline <= now_ms

    def _settle_top(self, until: int | None = None) -> None:
        """Pop cancelled entries and re-push re-armed ones until the top entry is exact, none is left, or the
        top entry is later than `until` (every entry is at or before its timer's deadline)."""
        heap = self._heap
        timers = self._timers
        while heap:
            deadline, seq, key = heap[0]
            if until is not None and deadline > until:
                return
            t = timers.get(key)
            if t is None or t[_HEAP_SEQ] != seq:
                heapq.heappop(heap)  # cancelled, or replaced by an earlier entry
            elif t[_SEQ] != seq:
                # Re-armed since this entry was pushed: it moves to its real (deadline, seq).
                t[_HEAP_SEQ] = t[_SEQ]
                heapq.heapreplace(heap, (t[_DEADLINE], t[_SEQ], key))
            else:
                return
