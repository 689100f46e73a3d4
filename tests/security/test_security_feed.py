"""A partition's security feed: the router's word that its state changed returns only once the partition has it.

The router awaits `update_security` on every partition before `create_acls` (and the other changes)
answer; a check already under way (the half-second one) may have read the version before the
change, so the word must wait for a check of its own. No Ray: the router is a stand-in.
"""

from __future__ import annotations

import asyncio
import threading
from types import SimpleNamespace

from groupcoord.actors.service import security_feed
from groupcoord.actors.service.security_feed import SecurityFeed


class _Guard:
    where = "partition 0"

    def __init__(self) -> None:
        self.version = 1

    def install(self, snapshot) -> bool:
        self.version = snapshot.version
        return True


class _Router:
    def __init__(self) -> None:
        self.version = 1
        self.hold_next_answer: asyncio.Event | None = None
        self.security_version = SimpleNamespace(remote=self._version)
        self.security_snapshot = SimpleNamespace(remote=self._snapshot)

    async def _version(self) -> int:
        read, hold = self.version, self.hold_next_answer
        self.hold_next_answer = None
        if hold is not None:
            await hold.wait()  # the answer was read, and is on its way back
        return read

    async def _snapshot(self):
        return SimpleNamespace(version=self.version)


def test_the_routers_word_waits_for_a_check_begun_after_it():
    async def scenario() -> tuple[int, int]:
        guard, router = _Guard(), _Router()
        feed = SecurityFeed(guard, "ns")
        feed._router = router
        router.hold_next_answer = held = asyncio.Event()
        periodic = asyncio.create_task(feed.turn())  # reads version 1: nothing new
        await asyncio.sleep(0)
        router.version = 2  # create_acls: a new version, and the word to every partition
        word = asyncio.create_task(feed.turn())
        await asyncio.sleep(0)
        held.set()
        await word
        in_force_when_word_returned = guard.version
        await periodic
        return in_force_when_word_returned, guard.version

    assert asyncio.run(scenario()) == (2, 2)


def test_the_router_is_looked_up_in_a_worker_thread_not_on_the_loop(monkeypatch):
    """A named-actor lookup is a synchronous GCS call: on the loop it would stall every request behind it."""
    threads = []

    def lookup(namespace):
        threads.append(threading.current_thread())
        return _Router()

    monkeypatch.setattr(security_feed, "lookup_router", lookup)
    guard = _Guard()

    async def scenario():
        await SecurityFeed(guard, "ns").turn()
        return threading.current_thread()

    loop_thread = asyncio.run(scenario())
    assert threads and threads[0] is not loop_thread
