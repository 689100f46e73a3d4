"""Kafka's ACL model: resource patterns, operations, ALLOW/DENY bindings and the authorizer's decision.

The rules are those of Kafka's StandardAuthorizer: a binding matches a resource when its type is the
resource's and its name is the resource's name (LITERAL), a prefix of it (PREFIXED) or `*`; its
principal is the caller's or `User:*`; its host is `*` (a Ray caller has no host to match). A matching
DENY wins over any ALLOW; an ALLOW of READ, WRITE, DELETE or ALTER also allows DESCRIBE (a DENY of READ
denies only READ); ALL matches every operation. Super users bypass the bindings; a resource no
binding matches is denied unless `allow_everyone_if_no_acl_found`.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any, Iterable

RESOURCE_TYPES = ("GROUP", "TOPIC", "CLUSTER")
PATTERN_TYPES = ("LITERAL", "PREFIXED")
OPERATIONS = ("READ", "WRITE", "CREATE", "DELETE", "ALTER", "DESCRIBE", "ALL")
PERMISSIONS = ("ALLOW", "DENY")
CLUSTER_NAME = "kafka-cluster"
WILDCARD = "*"
ANY_USER = "User:*"

# An ALLOW of one of these operations also allows DESCRIBE (Kafka's IMPLIES_DESCRIBE).
_IMPLIES_DESCRIBE = frozenset({"DESCRIBE", "READ", "WRITE", "DELETE", "ALTER"})


class InvalidAclError(ValueError):
    """An ACL binding or filter with a field outside Kafka's values."""


@dataclass(frozen=True)
class AclBinding:
    """One ACL: `principal` is ALLOWed or DENYed `operation` on the resources `resource_name` names."""

    resource_type: str  # "GROUP" | "TOPIC" | "CLUSTER"
    resource_name: str  # a name, or "*"; the cluster's name is "kafka-cluster"
    pattern_type: str  # "LITERAL" | "PREFIXED"
    principal: str  # "User:billing" or "User:*"
    operation: str  # one of OPERATIONS
    permission: str = "ALLOW"  # "ALLOW" | "DENY"
    host: str = WILDCARD

    def validated(self) -> AclBinding:
        """This binding with its enum fields upper-cased; InvalidAclError naming the bad field otherwise."""
        b = AclBinding(
            _upper(self.resource_type), self.resource_name, _upper(self.pattern_type), self.principal,
            _upper(self.operation), _upper(self.permission), self.host,
        )
        _check(b.resource_type, RESOURCE_TYPES, "resource_type")
        _check(b.pattern_type, PATTERN_TYPES, "pattern_type")
        _check(b.operation, OPERATIONS, "operation")
        _check(b.permission, PERMISSIONS, "permission")
        if not isinstance(b.resource_name, str) or not b.resource_name:
            raise InvalidAclError(f"resource_name must be a non-empty str, got {b.resource_name!r}")
        if b.pattern_type == "PREFIXED" and b.resource_name == WILDCARD:
            raise InvalidAclError("a PREFIXED pattern cannot be '*' (use LITERAL '*' for every resource)")
        if b.resource_type == "CLUSTER" and b.resource_name != CLUSTER_NAME:
            raise InvalidAclError(f"the CLUSTER resource is named {CLUSTER_NAME!r}, not {b.resource_name!r}")
        check_principal(b.principal)
        if not isinstance(b.host, str) or not b.host:
            raise InvalidAclError(f"host must be a non-empty str, got {b.host!r}")
        return b

    def to_dict(self) -> dict:
        """The binding as plain JSON-able values (for the storage root)."""
        return {
            "resource_type": self.resource_type, "resource_name": self.resource_name,
            "pattern_type": self.pattern_type, "principal": self.principal, "operation": self.operation,
            "permission": self.permission, "host": self.host,
        }


def _upper(value: Any) -> Any:
    """A str upper-cased; anything else as it is (the checks then name it)."""
    return value.upper() if isinstance(value, str) else value


def _check(value: object, allowed: tuple[str, ...], field: str) -> None:
    if value not in allowed:
        raise InvalidAclError(f"{field} must be one of {allowed}, got {value!r}")


def check_principal(principal: object) -> str:
    """`principal` if it is Kafka's "Type:name" form (e.g. "User:billing"); InvalidAclError otherwise."""
    if not isinstance(principal, str) or ":" not in principal:
        raise InvalidAclError(f"a principal is 'User:<name>', got {principal!r}")
    kind, name = principal.split(":", 1)
    if kind != "User" or not name:
        raise InvalidAclError(f"a principal is 'User:<name>', got {principal!r}")
    return principal


def binding_matches_filter(
    b: AclBinding, principal: str | None = None, resource_type: str | None = None, resource_name: str | None = None
) -> bool:
    """Whether `b` fits a describe filter (None matches anything; names compare exactly, as Kafka's filters)."""
    return (
        (principal is None or b.principal == principal)
        and (resource_type is None or b.resource_type == _upper(resource_type))
        and (resource_name is None or b.resource_name == resource_name)
    )


def _name_matches(b: AclBinding, name: str) -> bool:
    if b.pattern_type == "LITERAL":
        return b.resource_name == name or b.resource_name == WILDCARD
    return name.startswith(b.resource_name)


def _operation_matches(b: AclBinding, operation: str) -> bool:
    if b.operation == "ALL" or b.operation == operation:
        return True
    return b.permission == "ALLOW" and operation == "DESCRIBE" and b.operation in _IMPLIES_DESCRIBE


class Authorizer:
    """Decides whether a principal may do an operation on a resource, from one snapshot of the bindings.

    Decisions are cached per (principal, operation, resource): a snapshot never changes, a new
    one comes with a new Authorizer.
    """

    _CACHE_LIMIT = 65536

    def __init__(
        self,
        bindings: Iterable[AclBinding],
        super_users: Iterable[str] = (),
        allow_everyone_if_no_acl_found: bool = False,
    ) -> None:
        self.super_users = frozenset(super_users)
        self.allow_everyone_if_no_acl_found = allow_everyone_if_no_acl_found
        self._by_type: dict[str, list[AclBinding]] = {t: [] for t in RESOURCE_TYPES}
        for b in bindings:
            self._by_type[b.resource_type].append(b)
        self._cache: dict[tuple[str, str, str, str], bool] = {}

    def authorize(self, principal: str, operation: str, resource_type: str, resource_name: str) -> bool:
        """Whether `principal` may do `operation` on the resource (Kafka's StandardAuthorizer rules)."""
        key = (principal, operation, resource_type, resource_name)
        cached = self._cache.get(key)
        if cached is None:
            cached = self._decide(principal, operation, resource_type, resource_name)
            if len(self._cache) >= self._CACHE_LIMIT:
                self._cache.clear()
            self._cache[key] = cached
        return cached

    def _decide(self, principal: str, operation: str, resource_type: str, resource_name: str) -> bool:
        if principal in self.super_users:
            return True
        if not isinstance(resource_name, str):  # a malformed request's name matches no binding
            return False
        found_resource_acl = False
        allowed = False
        for b in self._by_type.get(resource_type, ()):
            if not _name_matches(b, resource_name):
                continue
            found_resource_acl = True
            if b.principal != principal and b.principal != ANY_USER:
                continue
            if b.host != WILDCARD or not _operation_matches(b, operation):
                continue
            if b.permission == "DENY":
                return False
            allowed = True
        if allowed:
            return True
        return not found_resource_acl and self.allow_everyone_if_no_acl_found
