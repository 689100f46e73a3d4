"""Keeps a service actor's security snapshot current: pulled from the router at start, when the router
says a new version exists, and by a version check every half second in case such a word was lost.

Only the router's own answer is trusted: a call that says "there is news" carries none, so a
process that calls it can make a partition ask the router sooner, nothing else.
"""

from __future__ import annotations

import asyncio
import logging
from typing import Any

from .authorizer import RequestGuard
from .names import lookup_router

log = logging.getLogger(__name__)

CHECK_INTERVAL_S = 0.5


class SecurityFeed:
    """Pulls the router's security snapshot into `guard` whenever the router's version is newer."""

    def __init__(self, guard: RequestGuard, namespace: str | None) -> None:
        self.guard = guard
        self.namespace = namespace
        self._router: Any = None
        # One check at a time, each begun after its caller asked: a check already under way may have read
        # the version before the router's change, so the router's word must not return on it.
        self._checking = asyncio.Lock()

    async def turn(self) -> None:
        """One version check (and pull if newer), begun after this call; failures are logged and retried at
        the next turn."""
        if self.namespace is None:
            return
        async with self._checking:
            try:
                if self._router is None:  # a GCS call: in a worker thread, never on this loop
                    self._router = await asyncio.get_running_loop().run_in_executor(None, lookup_router, self.namespace)
                version = await self._router.security_version.remote()
                if version > self.guard.version:
                    snapshot = await self._router.security_snapshot.remote()
                    if self.guard.install(snapshot):
                        log.info("%s: security state version %d in force", self.guard.where, snapshot.version)
            except Exception as e:  # the router is restarting: keep what we have, ask again
                log.debug("%s: could not read the security state from the router: %r", self.guard.where, e)
                self._router = None
