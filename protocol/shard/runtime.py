"""The shard's runtime: appending records through replay, durability waiters, timers and time."""

from __future__ import annotations

import logging
from collections import deque
from typing import Callable, Iterable, Sequence, TypeVar

from ..records import Record
from .clock import Clock, due_ms_of, monotonic_ms_of
from .deferred import Deferred
from .log import RecordLog
from .purgatory import Purgatory
from .stats import ShardStats

log = logging.getLogger(__name__)

T = TypeVar("T")


class ShardRuntime:
    """Logs records and applies them through replay, and releases work once the log is durable.

    This is the one path by which the persisted state of a shard changes: `append` stages the
    records in the log and replays them into memory (the same replay that recovery runs); responses
    and follow-up actions wait in `when_durable` until the log says those records are on disk.
    """

    def __init__(self, clock: Clock, log: RecordLog, replay: Callable[[Iterable[Record]], None]) -> None:
        self.clock = clock
        self.monotonic = monotonic_ms_of(clock)
        self.due = due_ms_of(clock)  # which deadlines have passed (see CoordinatorClock)
        self.log = log
        self.timers = Purgatory()
        self.stats = ShardStats()
        self._replay = replay
        self._end = log.durable_offset
        self._durable = log.durable_offset
        self._waiters: deque[tuple[int, Callable[[], None]]] = deque()

    def now(self) -> int:
        """The wall-clock time in milliseconds: for what is recorded (commit and state timestamps)."""
        return self.clock.now_ms()

    def deadline_in(self, delay_ms: int) -> int:
        """The deadline of a timer armed to run `delay_ms` from now. One armed for no delay is due at once on
        coordinator time too, so it runs before requests that come after it, as Kafka's zero-delay timers do."""
        return self.due() if delay_ms <= 0 else self.monotonic() + delay_ms

    def append(self, records: Sequence[Record]) -> int:
        """Stage `records` in the log, then replay them into memory; returns the log end offset.

        The log goes first so that a batch it refuses (RecordBatchTooLarge) changes nothing.
        """
        if not records:
            return self._end
        end = self.log.append(records)
        self._replay(records)
        self._end = end
        self.on_durable(self.log.durable_offset)
        return self._end

    def resume_at(self, end_offset: int, durable_offset: int) -> None:
        """Continue from a log this runtime did not write (a follower's copy becoming the leader's)."""
        if self._waiters:
            raise RuntimeError("cannot move a runtime that still has responses waiting")
        self._end = end_offset
        self._durable = min(durable_offset, end_offset)

    def when_durable(self, action: Callable[[], None]) -> None:
        """Run `action` once everything appended so far is durable (at once if it already is)."""
        if self._durable >= self._end and not self._waiters:
            action()
        else:
            self._waiters.append((self._end, action))

    def respond(self, value: T) -> Deferred[T]:
        """A response that completes once every earlier write is durable."""
        if self._durable >= self._end and not self._waiters:  # when_durable's own test, without its closure
            return Deferred.completed(value)
        d: Deferred[T] = Deferred()
        self.complete(d, value)
        return d

    def complete(self, deferred: Deferred[T], value: T) -> None:
        """Complete `deferred` with `value` once every earlier write is durable."""
        self.when_durable(lambda: deferred.complete(value))

    @property
    def end_offset(self) -> int:
        """The log end offset after the last append."""
        return self._end

    @property
    def durable_offset(self) -> int:
        """How far the log is known to be durable."""
        return self._durable

    def on_durable(self, offset: int) -> None:
        """The log is durable up to `offset`: run the waiters whose records are now on disk."""
        if offset > self._durable:
            self._durable = offset
        waiters = self._waiters
        while waiters and waiters[0][0] <= self._durable:
            _, action = waiters.popleft()
            action()

    def waiting(self) -> int:
        """How many responses and actions wait for durability."""
        return len(self._waiters)
