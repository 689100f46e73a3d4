"""The security settings of start(), checked and turned into the SecurityConfig every service actor gets."""

from __future__ import annotations

from typing import Any, Sequence

from groupcoord.protocol.security.acl import InvalidAclError, check_principal
from groupcoord.protocol.security.credentials import Credentials, SecretHash
from groupcoord.protocol.security.snapshot import SecurityConfig

from ..client.handle import ServiceError


def security_config(authorization: bool, super_users: Sequence[str], admin_credentials: Any,
                    allow_everyone_if_no_acl_found: bool) -> SecurityConfig:
    """The SecurityConfig of start()'s arguments; the admin's secret is hashed here and never leaves the driver.

    ServiceError (never showing a secret) for a malformed super user or credentials.
    """
    if isinstance(super_users, str):
        raise ServiceError("super_users is a list of principals, e.g. ['User:admin']")
    try:
        users = tuple(check_principal(u) for u in super_users)
    except InvalidAclError as e:
        raise ServiceError(f"super_users: {e}") from None
    if admin_credentials is None:
        return SecurityConfig(bool(authorization), users, bool(allow_everyone_if_no_acl_found))
    if not isinstance(admin_credentials, Credentials) or not isinstance(admin_credentials.secret, str) or (
            not admin_credentials.secret):
        raise ServiceError("admin_credentials must be Credentials('User:<name>', <secret>)")
    try:
        principal = check_principal(admin_credentials.principal)
    except InvalidAclError as e:
        raise ServiceError(f"admin_credentials: {e}") from None
    return SecurityConfig(bool(authorization), users, bool(allow_everyone_if_no_acl_found),
                          principal, SecretHash.of(admin_credentials.secret))
