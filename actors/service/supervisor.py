"""One supervisor for every background loop of an actor (a partition's, or the router's replica repair):
no dead loop in a live actor.

Each loop is a turn run again and again. A turn that raises is logged and counted, and the loop
goes on after a backoff; an error the loop cannot go on from (the caller's `fatal` says which), or
a loop that ends on its own, fails the actor, so that Ray restarts it.
"""

from __future__ import annotations

import asyncio
import logging
from collections import Counter
from typing import Awaitable, Callable

log = logging.getLogger(__name__)

Turn = Callable[[], Awaitable[None]]


class LoopSupervisor:
    """Runs named loops on the actor's event loop and keeps them running, or fails the actor."""

    def __init__(
        self,
        partition: int | str,
        fail: Callable[[BaseException], None],
        backoff_s: float = 0.5,
        backoff_max_s: float = 60.0,
    ) -> None:
        self.partition = partition
        self.failures: Counter[str] = Counter()
        self.backoff_s = backoff_s
        self.backoff_max_s = backoff_max_s
        self._fail = fail
        self._tasks: dict[str, asyncio.Task] = {}
        self._closing = False
        self._failed: set[str] = set()

    def start(
        self,
        name: str,
        turn: Turn,
        period_s: float = 0.0,
        fatal: Callable[[Exception], bool] = lambda e: False,
    ) -> None:
        """Run `turn` every `period_s` (after a failure: after a growing backoff) until close()."""
        task = asyncio.get_running_loop().create_task(self._run(name, turn, period_s, fatal), name=name)
        task.add_done_callback(lambda t: self._ended(name, t))
        self._tasks[name] = task

    async def _run(self, name: str, turn: Turn, period_s: float, fatal: Callable[[Exception], bool]) -> None:
        consecutive = 0
        delay = period_s
        while True:
            if delay > 0:
                await asyncio.sleep(delay)
            try:
                await turn()
            except Exception as e:
                self.failures[name] += 1
                if fatal(e):
                    log.critical("partition %s: %s cannot go on: %r", self.partition, name, e)
                    self._failed.add(name)
                    self._fail(e)
                    return
                consecutive += 1
                delay = min(self.backoff_max_s, self.backoff_s * 2 ** (consecutive - 1))
                log.error(
                    "partition %s: %s failed (%d in a row, %d in all); retrying in %.1f s",
                    self.partition, name, consecutive, self.failures[name], delay, exc_info=e,
                )
                continue
            consecutive = 0
            delay = period_s

    def _ended(self, name: str, task: asyncio.Task) -> None:
        if self._closing or name in self._failed or task.cancelled():
            return  # closed, already failed, or cancelled from outside as the event loop shuts down
        error = task.exception()
        reason = error if error is not None else RuntimeError(f"background loop {name} ended")
        log.critical("partition %s: %s stopped while the actor serves: %r", self.partition, name, reason)
        self._fail(reason if isinstance(reason, Exception) else RuntimeError(repr(reason)))

    def running(self) -> list[str]:
        """The names of the loops that are running."""
        return [name for name, task in self._tasks.items() if not task.done()]

    async def close(self) -> None:
        """Stop every loop (for an in-process actor's close)."""
        self._closing = True
        for task in self._tasks.values():
            task.cancel()
        await asyncio.gather(*self._tasks.values(), return_exceptions=True)
