"""One version of a service's security state: principals' hashes, ACL bindings and request quotas."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Mapping

from .acl import AclBinding
from .credentials import SecretHash


@dataclass(frozen=True)
class SecurityConfig:
    """How a service authorizes: whether at all, its super users, and Kafka's allow.everyone.if.no.acl.found."""

    authorization: bool = False
    super_users: tuple[str, ...] = ()
    allow_everyone_if_no_acl_found: bool = False
    # The operator's first principal, created at start if absent: its name and its secret's hash (never the secret).
    admin_principal: str | None = None
    admin_hash: SecretHash | None = None


@dataclass(frozen=True)
class SecuritySnapshot:
    """Principals (their secrets' hashes), ACL bindings and quotas as of `version` (higher is newer)."""

    version: int = 0
    principals: Mapping[str, SecretHash] = field(default_factory=dict)
    acls: tuple[AclBinding, ...] = ()
    quotas: Mapping[str, float] = field(default_factory=dict)  # principal or "User:*" -> requests per second

    def to_dict(self) -> dict:
        """JSON-able form (hashes only: no secret is ever part of a snapshot)."""
        return {
            "version": self.version,
            "principals": {p: h.to_dict() for p, h in sorted(self.principals.items())},
            "acls": [b.to_dict() for b in self.acls],
            "quotas": dict(sorted(self.quotas.items())),
        }

    @classmethod
    def from_dict(cls, data: Mapping) -> SecuritySnapshot:
        """The snapshot `to_dict` wrote."""
        return cls(
            int(data["version"]),
            {p: SecretHash(**h) for p, h in data.get("principals", {}).items()},
            tuple(AclBinding(**b) for b in data.get("acls", ())),
            {p: float(r) for p, r in data.get("quotas", {}).items()},
        )
