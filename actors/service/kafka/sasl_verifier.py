"""Checks a SASL/PLAIN username and password against the service's own principals.

There is one credential store: the router's (its storage root's security.json). The listener
holds the router's security snapshot (salted hashes only) through the same SecurityFeed and
RequestGuard the partition actors use, asks the router for a newer version before each check
(so a principal created a moment ago can log in), and audits a failure as they do. What it
verifies is only the door: every request of the connection then carries the credentials to the
partition actors, which check them again, so a principal deleted later stops working there.
Failed logins are counted in groupcoord_auth_failures_total (partition "kafka-listener", api
"SaslAuthenticate") when the service exports metrics, and logged as every refusal is.
"""

from __future__ import annotations

import asyncio
import logging
from typing import Any

from groupcoord.protocol.security.credentials import Credentials
from groupcoord.protocol.security.snapshot import SecurityConfig

from ..authorizer import RequestGuard
from ..security_feed import SecurityFeed

log = logging.getLogger(__name__)

LABEL = "kafka-listener"
AUDIT_API = "SaslAuthenticate"


class PlainVerifier:
    """Verifies (principal, password) pairs against the principals of the service in `namespace`, and answers
    ACL questions with its `config` (super users, allow.everyone.if.no.acl.found)."""

    def __init__(self, namespace: str | None, config: SecurityConfig, metrics: Any = None) -> None:
        self.guard = RequestGuard(config, LABEL, metrics)
        self.feed = SecurityFeed(self.guard, namespace)
        self._refreshing = asyncio.Lock()
        self.authenticated = 0
        self.failed = 0

    async def __call__(self, principal: str, password: str) -> Credentials | None:
        """The credentials to send on for a principal whose password is right, else None (audited)."""
        async with self._refreshing:  # a login waits for a refresh under way (the feed skips a turn while busy)
            await self.feed.turn()  # the router's newest principals (one version check; a pull if newer)
        pair = (principal, password)
        if self.guard.authenticate(pair) is None:
            self.failed += 1
            self.guard.refuse_unauthenticated(AUDIT_API, pair)
            return None
        self.authenticated += 1
        return Credentials(principal, password)

    async def authorize(self, principal: str, operation: str, resource_type: str, name: str) -> bool:
        """Whether the service's ACLs (as of now) let `principal` do `operation` on the resource."""
        async with self._refreshing:
            await self.feed.turn()
        return self.guard.authorizer.authorize(principal, operation, resource_type, name)

    def stats(self) -> dict:
        """Authentications that passed and failed, and the failures by principal ("unknown" if none)."""
        return {"authenticated": self.authenticated, "failed": self.failed,
                "failures": self.guard.failure_counts()}
