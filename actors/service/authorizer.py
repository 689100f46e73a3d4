"""The security edge of the partition actors and the router: who is calling, may they, how fast.

Every remote method of a service actor hands its request here first when authorization is on:
the credentials are checked against the principals' salted hashes (a verified secret is
remembered by its SHA-256 only, until that principal's hash changes), the request passes
through Kafka's table (protocol.security.table), the principal's request quota gives the
throttle time its responses carry, and every failure is counted and logged (rate-limited) with
principal, API, resource and operation, never with a secret. The state (principals, ACLs,
quotas) arrives as versioned snapshots from the router; a partition serves nothing under
authorization until it has one.
"""

from __future__ import annotations

import dataclasses
import hashlib
import logging
import time
from typing import Any, Awaitable, Callable

from groupcoord.protocol import Errors
from groupcoord.protocol.responses import error_response
from groupcoord.protocol.security.acl import CLUSTER_NAME, Authorizer
from groupcoord.protocol.security.credentials import Credentials, SecretHash
from groupcoord.protocol.security.quota import RequestQuota
from groupcoord.protocol.security.snapshot import SecurityConfig, SecuritySnapshot
from groupcoord.protocol.security.table import Admission, admit

log = logging.getLogger(__name__)

UNKNOWN_PRINCIPAL = "unknown"  # the metrics' label for credentials naming no principal (bounded cardinality)
_VERIFIED_LIMIT = 4096
_FAILED_LIMIT = 4096

Handler = Callable[[str, Any], Awaitable[Any]]
BatchHandler = Callable[[list], Awaitable[list]]


def with_throttle(response: Any, throttle_ms: int) -> Any:
    """`response` telling its client to wait `throttle_ms` before its next request."""
    if throttle_ms <= 0 or not hasattr(response, "throttle_time_ms"):
        return response
    return dataclasses.replace(response, throttle_time_ms=throttle_ms)


class RequestGuard:
    """Authentication, Kafka's ACL checks, the request quota and the audit of one service actor."""

    def __init__(self, config: SecurityConfig | None, label: str, metrics: Any = None,
                 clock: Callable[[], float] = time.monotonic) -> None:
        self.config = config or SecurityConfig()
        self.enabled = self.config.authorization
        self.label = label  # the partition ("3"), "router" or "kafka-listener": the metrics' partition tag
        self.where = f"partition {label}" if label.isdigit() else label
        self.metrics = metrics  # a RayMetrics, or None
        self.clock = clock
        self.snapshot: SecuritySnapshot | None = None  # None: nothing received yet (serve nothing)
        self.authorizer = Authorizer((), self.config.super_users, self.config.allow_everyone_if_no_acl_found)
        self.quota = RequestQuota({})
        self._verified: dict[bytes, tuple[str, SecretHash]] = {}  # sha256(principal, secret) -> what it matched
        self._failed: dict[bytes, SecretHash | None] = {}  # known-bad (principal, secret) -> the hash it failed
        self.failures: dict[tuple[str, str, str], int] = {}  # (principal, api, error name) -> count

    @property
    def ready(self) -> bool:
        """Whether requests can be checked: authorization is off, or a snapshot is in force."""
        return not self.enabled or self.snapshot is not None

    @property
    def version(self) -> int:
        """The version of the snapshot in force (-1 before the first)."""
        return -1 if self.snapshot is None else self.snapshot.version

    def install(self, snapshot: SecuritySnapshot) -> bool:
        """Put `snapshot` in force if it is newer than the one held; whether it was."""
        if self.snapshot is not None and snapshot.version <= self.snapshot.version:
            return False
        self.snapshot = snapshot
        self.authorizer = Authorizer(snapshot.acls, self.config.super_users, self.config.allow_everyone_if_no_acl_found)
        old = self.quota
        self.quota = RequestQuota(dict(snapshot.quotas))
        self.quota._buckets = old._buckets  # a new rate applies from now; what was spent stays spent
        self._failed.clear()
        return True

    # --- authentication ------------------------------------------------------------------------

    def authenticate(self, credentials: Any) -> str | None:
        """The principal `credentials` (a Credentials or its `wire` pair) prove, or None (absent, malformed,
        unknown, wrong or revoked)."""
        snapshot = self.snapshot
        if snapshot is None:
            return None
        if type(credentials) is tuple and len(credentials) == 2:  # Credentials.wire, as the client library sends
            principal, secret = credentials
        elif isinstance(credentials, Credentials):
            principal, secret = credentials.principal, credentials.secret
        else:
            return None
        if not isinstance(principal, str) or not isinstance(secret, str):
            return None
        stored = snapshot.principals.get(principal)
        if stored is None:
            return None
        key = hashlib.sha256(f"{principal}\0{secret}".encode()).digest()
        seen = self._verified.get(key)
        if seen is not None and seen[1] is stored:  # verified against this very hash: not revoked or replaced
            return principal
        if key in self._failed and self._failed[key] is stored:
            return None
        if not stored.matches(secret):
            if len(self._failed) >= _FAILED_LIMIT:
                self._failed.clear()
            self._failed[key] = stored
            return None
        if len(self._verified) >= _VERIFIED_LIMIT:
            self._verified.clear()
        self._verified[key] = (principal, stored)
        return principal

    # --- the request path --------------------------------------------------------------------

    def unready(self, api: str, req: Any) -> Any | None:
        """The answer while no snapshot has arrived yet (the client retries), else None."""
        if self.snapshot is None:
            return error_response(api, req, Errors.COORDINATOR_LOAD_IN_PROGRESS)
        return None

    def refuse_unauthenticated(self, api: str, credentials: Any) -> None:
        """Audit a request whose credentials proved nothing."""
        self._audit(self._claimed(credentials), api, Errors.SASL_AUTHENTICATION_FAILED, ())

    def _refuse_unauthenticated(self, api: str, req: Any, credentials: Any) -> Any:
        self.refuse_unauthenticated(api, credentials)
        return error_response(api, req, Errors.SASL_AUTHENTICATION_FAILED)

    def _claimed(self, credentials: Any) -> str:
        principal = credentials[0] if type(credentials) is tuple and credentials else getattr(
            credentials, "principal", None)
        snapshot = self.snapshot
        if isinstance(principal, str) and snapshot is not None and principal in snapshot.principals:
            return principal
        return UNKNOWN_PRINCIPAL

    def _admit(self, principal: str, api: str, req: Any) -> Admission:
        admission = admit(api, req, principal, self.authorizer)
        if admission.denied:
            error = Errors.GROUP_AUTHORIZATION_FAILED if any(d[1] == "GROUP" for d in admission.denied) else (
                Errors.TOPIC_AUTHORIZATION_FAILED)
            self._audit(principal, api, error, admission.denied)
        return admission

    async def call(self, api: str, req: Any, credentials: Any, handler: Handler) -> Any:
        """One request: checked, handled (what the table lets through) and answered with its throttle time."""
        waiting = self.unready(api, req)
        if waiting is not None:
            return waiting
        principal = self.authenticate(credentials)
        if principal is None:
            return self._refuse_unauthenticated(api, req, credentials)
        throttle = self.quota.record(principal, 1, self.clock())
        admission = self._admit(principal, api, req)
        if admission.request is None:
            response = admission.response
        else:
            response = await handler(api, admission.request)
            if admission.finish is not None:
                response = admission.finish(response)
        return with_throttle(response, throttle)

    async def batch(self, calls: list, credentials: Any, handler: BatchHandler) -> list:
        """The requests of one `batch` call: checked one by one, the admitted ones handled together in order."""
        if self.snapshot is None:
            return [error_response(api, req, Errors.COORDINATOR_LOAD_IN_PROGRESS) for api, req in calls]
        principal = self.authenticate(credentials)
        if principal is None:
            return [self._refuse_unauthenticated(api, req, credentials) for api, req in calls]
        throttle = self.quota.record(principal, len(calls), self.clock())
        admissions = [self._admit(principal, api, req) for api, req in calls]
        if all(a.request is req and a.finish is None for a, (_, req) in zip(admissions, calls, strict=True)):
            responses = await handler(calls)  # the usual case: everything allowed as it is
            return responses if throttle <= 0 else [with_throttle(r, throttle) for r in responses]
        runnable = [(api, a.request) for (api, _), a in zip(calls, admissions, strict=True) if a.request is not None]
        handled = iter(await handler(runnable) if runnable else [])
        responses = []
        for a in admissions:
            if a.request is None:
                response = a.response
            else:
                response = next(handled)
                if a.finish is not None:
                    response = a.finish(response)
            responses.append(with_throttle(response, throttle))
        return responses

    def check(self, principal_or_none: str | None, api: str, allowed: bool, resource: tuple[str, str, str]) -> bool:
        """Record the outcome of a router-level check (operation, resource type, name); whether it passed."""
        if not allowed:
            error = Errors.CLUSTER_AUTHORIZATION_FAILED if resource[1] == "CLUSTER" else (
                Errors.TOPIC_AUTHORIZATION_FAILED)
            self._audit(principal_or_none or UNKNOWN_PRINCIPAL, api, error, (resource,))
        return allowed

    def cluster_allowed(self, credentials: Any, api: str, operation: str) -> bool:
        """Whether an operation on the cluster may go ahead: always with authorization off, else for
        authenticated principals allowed `operation` on the cluster (refusals are audited)."""
        if not self.enabled:
            return True
        principal = self.authenticate(credentials)
        if principal is None:
            self.refuse_unauthenticated(api, credentials)
            return False
        allowed = self.authorizer.authorize(principal, operation, "CLUSTER", CLUSTER_NAME)
        return self.check(principal, api, allowed, (operation, "CLUSTER", CLUSTER_NAME))

    # --- audit ---------------------------------------------------------------------------------

    def failure_counts(self) -> dict[str, int]:
        """Refusals so far, as "principal api ERROR" -> count (for `status`)."""
        return {" ".join(k): n for k, n in sorted(self.failures.items())}

    def _audit(self, principal: str, api: str, error: Errors, denied: tuple) -> None:
        key = (principal, api, error.name)
        self.failures[key] = self.failures.get(key, 0) + 1
        if self.metrics is not None:
            try:
                self.metrics["groupcoord_auth_failures_total"].inc(
                    1, {"partition": self.label, "principal": principal, "api": api, "error": error.name})
            except Exception as e:  # a metrics hiccup must not fail the request
                log.debug("could not count an auth failure: %r", e)
        operation, resource_type, name = denied[0] if denied else ("", "", "")
        log.warning(
            "%s: %s denied %s for principal %s (operation %s on %s %r)", self.where, api, error.name, principal,
            operation or "-", resource_type or "-", name[:200],
            extra={"rate_key": ("auth", principal, api, error.name)},
        )
