"""AdminClient's security operations: principals (a secret shown once), Kafka's ACLs and request quotas."""

from __future__ import annotations

from typing import Any

from groupcoord.protocol import Errors
from groupcoord.protocol.security.acl import AclBinding
from groupcoord.protocol.security.credentials import Credentials

from .errors import raise_for


class SecurityAdmin:
    """Mixed into AdminClient (which provides `_router`): the calls `kafka-acls.sh` and SCRAM management make."""

    def _router(self, method: str, *args: Any) -> Any:  # pragma: no cover - AdminClient's
        raise NotImplementedError

    # --- principals ---------------------------------------------------------------------------------

    def create_principal(self, name: str) -> Credentials:
        """A new principal ("billing" -> "User:billing") and its credentials; the secret is shown only here."""
        error, credentials = self._router("create_principal", name)
        raise_for(error, f"creating principal {name!r}"
                  + (": it exists already" if error == Errors.INVALID_REQUEST else ""))
        return credentials

    def delete_principal(self, name: str) -> None:
        """Remove a principal; its credentials stop working on every partition within a second."""
        raise_for(self._router("delete_principal", name), f"deleting principal {name!r}")

    def list_principals(self) -> list[str]:
        """The principals' names ("User:billing", ...)."""
        error, names = self._router("list_principals")
        raise_for(error, "listing principals")
        return names

    # --- ACLs ---------------------------------------------------------------------------------------

    def create_acls(self, bindings: list[AclBinding]) -> None:
        """Add ACL bindings (as `kafka-acls.sh --add`); in force on every partition within a second."""
        error, reason = self._router("create_acls", list(bindings))
        raise_for(error, f"creating ACLs: {reason}" if reason else "creating ACLs")

    def describe_acls(self, principal: str | None = None, resource_type: str | None = None,
                      resource_name: str | None = None) -> list[AclBinding]:
        """The bindings that fit the filter (None matches anything), as `kafka-acls.sh --list`."""
        error, bindings = self._router("describe_acls", principal, resource_type, resource_name)
        raise_for(error, "describing ACLs")
        return bindings

    def delete_acls(self, bindings: list[AclBinding]) -> int:
        """Remove these bindings (as `kafka-acls.sh --remove`); how many were removed."""
        error, removed = self._router("delete_acls", list(bindings))
        raise_for(error, "deleting ACLs")
        return removed

    # --- quotas ---------------------------------------------------------------------------------------

    def alter_client_quota(self, principal: str, request_rate: float | None) -> None:
        """Set a principal's request quota in requests per second ("User:*": every principal's default;
        None removes it); a principal over it gets throttle_time_ms in its responses."""
        raise_for(self._router("alter_client_quota", principal, request_rate), f"altering the quota of {principal!r}")

    def describe_client_quotas(self) -> dict[str, float]:
        """Principal -> request rate (requests per second)."""
        error, quotas = self._router("describe_client_quotas")
        raise_for(error, "describing quotas")
        return quotas
