"""The router's part in security: it keeps the principals, ACLs and quotas in its storage root, answers
their admin calls (Kafka's CreateAcls/DescribeAcls/DeleteAcls and credential management, which need ALTER
or DESCRIBE on the cluster), checks its own topic calls, and tells every partition of each change."""

from __future__ import annotations

import asyncio
import logging
from typing import Any

from groupcoord.protocol import Errors
from groupcoord.protocol.security.acl import AclBinding, InvalidAclError
from groupcoord.protocol.security.credentials import Credentials
from groupcoord.protocol.security.snapshot import SecuritySnapshot
from groupcoord.protocol.security.table import cluster_or_topic
from groupcoord.storage.security_store import SecurityStore

from .authorizer import RequestGuard

log = logging.getLogger(__name__)

_PUSH_TIMEOUT_S = 1.0


class RouterSecurity:
    """Mixed into RouterActor: `self.security` (a SecurityStore or None), `self.guard`, `self.partitions`."""

    security: SecurityStore | None
    guard: RequestGuard
    partitions: list[Any]

    def _open_security(self, root: str, metrics: Any) -> None:
        """Open the store in the router's root, create the operator's principal if asked, and guard with it."""
        config = self.spec.security  # type: ignore[attr-defined]
        self.security = SecurityStore(root)
        admin = config.admin_principal
        if admin and config.admin_hash and admin not in self.security.snapshot.principals:
            self.security.add_hashed_principal(admin, config.admin_hash)
        self.guard = RequestGuard(config, "router", metrics)
        self.guard.install(self.security.snapshot)

    def _store(self) -> SecurityStore:
        if self.security is None:
            raise RuntimeError(f"the service cannot open its storage: {self.error}")  # type: ignore[attr-defined]
        return self.security

    async def _changed(self) -> None:
        """A new version: in force here at once, and every partition is told to read it (best effort; those
        that miss it see the new version at their next check, within half a second)."""
        self.guard.install(self._store().snapshot)
        calls = [p.update_security.remote() for p in self.partitions]
        try:
            await asyncio.wait_for(asyncio.gather(*calls, return_exceptions=True), timeout=_PUSH_TIMEOUT_S)
        except TimeoutError:
            log.warning("not every partition took the new security state within %.0f s", _PUSH_TIMEOUT_S)

    def _cluster(self, credentials: Any, api: str, operation: str) -> Errors:
        if self.guard.cluster_allowed(credentials, api, operation):  # audits a refusal
            return Errors.NONE
        if self.guard.authenticate(credentials) is None:
            return Errors.SASL_AUTHENTICATION_FAILED
        return Errors.CLUSTER_AUTHORIZATION_FAILED

    def _topic_allowed(self, credentials: Any, api: str, operation: str, topic: str) -> Errors:
        """Kafka's CreateTopics rule for our topic calls: `operation` on the cluster or on the topic."""
        if not self.guard.enabled:
            return Errors.NONE
        principal = self.guard.authenticate(credentials)
        if principal is None:
            self.guard.refuse_unauthenticated(api, credentials)
            return Errors.SASL_AUTHENTICATION_FAILED
        name = topic if isinstance(topic, str) else ""
        allowed = cluster_or_topic(self.guard.authorizer, principal, operation, name)
        return Errors.NONE if self.guard.check(principal, api, allowed, (operation, "TOPIC", name)) else (
            Errors.TOPIC_AUTHORIZATION_FAILED)

    # --- what the partitions read ----------------------------------------------------------------

    async def security_version(self) -> int:
        """The version of the security state (partitions compare it with theirs)."""
        return self._store().snapshot.version

    async def security_snapshot(self) -> SecuritySnapshot:
        """The security state: principals' salted hashes (never a secret), ACLs and quotas."""
        return self._store().snapshot

    # --- principals ----------------------------------------------------------------------------------

    async def create_principal(self, name: str, credentials: Any = None) -> tuple[Errors, Credentials | None]:
        """A new principal and its credentials (the only time its secret is shown); ALTER on the cluster."""
        error = self._cluster(credentials, "create_principal", "ALTER")
        if error != Errors.NONE:
            return error, None
        try:
            principal, secret = self._store().create_principal(name)
        except FileExistsError:
            return Errors.INVALID_REQUEST, None
        except ValueError:
            return Errors.INVALID_PRINCIPAL_TYPE, None
        await self._changed()
        return Errors.NONE, Credentials(principal, secret)

    async def delete_principal(self, name: str, credentials: Any = None) -> Errors:
        """Remove a principal: its credentials stop working on every partition; ALTER on the cluster."""
        error = self._cluster(credentials, "delete_principal", "ALTER")
        if error != Errors.NONE:
            return error
        try:
            self._store().delete_principal(name)
        except KeyError:
            return Errors.RESOURCE_NOT_FOUND
        except ValueError:
            return Errors.INVALID_PRINCIPAL_TYPE
        await self._changed()
        return Errors.NONE

    async def list_principals(self, credentials: Any = None) -> tuple[Errors, list[str]]:
        """The principals' names; DESCRIBE on the cluster."""
        error = self._cluster(credentials, "list_principals", "DESCRIBE")
        return (error, []) if error != Errors.NONE else (Errors.NONE, self._store().list_principals())

    # --- ACLs and quotas ------------------------------------------------------------------------------

    async def create_acls(self, bindings: list[AclBinding], credentials: Any = None) -> tuple[Errors, str | None]:
        """Add ACL bindings (Kafka's CreateAcls: ALTER on the cluster); INVALID_REQUEST with the reason."""
        error = self._cluster(credentials, "create_acls", "ALTER")
        if error != Errors.NONE:
            return error, None
        try:
            added = self._store().create_acls(list(bindings))
        except (InvalidAclError, TypeError, AttributeError) as e:
            return Errors.INVALID_REQUEST, str(e)
        if added:
            await self._changed()
        return Errors.NONE, None

    async def describe_acls(self, principal: str | None = None, resource_type: str | None = None,
                            resource_name: str | None = None, credentials: Any = None) -> tuple[Errors, list]:
        """The bindings that fit the filter (Kafka's DescribeAcls: DESCRIBE on the cluster)."""
        error = self._cluster(credentials, "describe_acls", "DESCRIBE")
        if error != Errors.NONE:
            return error, []
        return Errors.NONE, self._store().describe_acls(principal, resource_type, resource_name)

    async def delete_acls(self, bindings: list[AclBinding], credentials: Any = None) -> tuple[Errors, int]:
        """Remove these bindings; how many were removed (Kafka's DeleteAcls: ALTER on the cluster)."""
        error = self._cluster(credentials, "delete_acls", "ALTER")
        if error != Errors.NONE:
            return error, 0
        try:
            removed = self._store().delete_acls(list(bindings))
        except (InvalidAclError, TypeError, AttributeError):
            return Errors.INVALID_REQUEST, 0
        if removed:
            await self._changed()
        return Errors.NONE, removed

    async def alter_client_quota(self, principal: str, request_rate: float | None,
                                 credentials: Any = None) -> Errors:
        """Set or remove a principal's request rate (requests/s; "User:*" is the default); ALTER on the cluster."""
        error = self._cluster(credentials, "alter_client_quota", "ALTER")
        if error != Errors.NONE:
            return error
        try:
            self._store().alter_quota(principal, request_rate)
        except (ValueError, TypeError):
            return Errors.INVALID_REQUEST
        await self._changed()
        return Errors.NONE

    async def describe_client_quotas(self, credentials: Any = None) -> tuple[Errors, dict[str, float]]:
        """Principal -> request rate; DESCRIBE on the cluster."""
        error = self._cluster(credentials, "describe_client_quotas", "DESCRIBE")
        return (error, {}) if error != Errors.NONE else (Errors.NONE, dict(self._store().snapshot.quotas))
