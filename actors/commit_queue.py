"""Coalescing asynchronous commits: many commit_async calls, one actor call at a time."""

from __future__ import annotations

import logging
import threading
from typing import Callable

from groupcoord.protocol import OffsetAndMetadata, TopicPartition

log = logging.getLogger(__name__)

Offsets = dict[TopicPartition, OffsetAndMetadata]
CommitCallback = Callable[[Offsets, BaseException | None], None]


class CommitQueue:
    """Merges pending async commits (latest offset per partition wins) and sends them one batch at a time.

    `send(offsets)` is called on the queue's thread and raises on failure. Finished callbacks
    are handed back through `drain_callbacks()`, so that they run in the consumer's own thread,
    as Kafka runs commit callbacks inside poll().
    """

    def __init__(self, send: Callable[[Offsets], None], name: str = "groupcoord-committer") -> None:
        self._send = send
        self._cond = threading.Condition()
        self._pending: Offsets = {}
        self._callbacks: list[tuple[Offsets, CommitCallback | None]] = []
        self._done: list[tuple[CommitCallback, Offsets, BaseException | None]] = []
        self._in_flight = False
        self._closed = False
        self.batches_sent = 0
        self._thread = threading.Thread(target=self._run, name=name, daemon=True)
        self._thread.start()

    def submit(self, offsets: Offsets, callback: CommitCallback | None = None) -> None:
        """Queue offsets for the next batch; `callback(offsets, error)` is reported later."""
        with self._cond:
            if self._closed:
                raise RuntimeError("the commit queue is closed")
            self._pending.update(offsets)
            self._callbacks.append((dict(offsets), callback))
            self._cond.notify_all()

    def _run(self) -> None:
        while True:
            with self._cond:
                while not self._pending and not self._closed:
                    self._cond.wait()
                if not self._pending:
                    return
                batch, self._pending = self._pending, {}
                callbacks, self._callbacks = self._callbacks, []
                self._in_flight = True
            error: BaseException | None = None
            try:
                self._send(batch)
            except BaseException as e:  # reported to the callbacks, never lost
                error = e
                log.debug("async commit of %d partitions failed: %r", len(batch), e)
            with self._cond:
                self.batches_sent += 1
                self._in_flight = False
                self._done.extend((cb, offs, error) for offs, cb in callbacks if cb is not None)
                self._cond.notify_all()

    def flush(self, timeout_s: float | None = None) -> bool:
        """Wait until everything submitted so far has been sent; False on timeout."""
        with self._cond:
            return self._cond.wait_for(lambda: not self._pending and not self._in_flight, timeout_s)

    def drain_callbacks(self) -> None:
        """Run the callbacks of finished commits in the calling thread."""
        with self._cond:
            done, self._done = self._done, []
        for cb, offsets, error in done:
            cb(offsets, error)

    def close(self, timeout_s: float | None = None) -> None:
        """Send what is pending, stop the thread and run the remaining callbacks."""
        with self._cond:
            self._closed = True
            self._cond.notify_all()
        self._thread.join(timeout_s)
        self.drain_callbacks()
