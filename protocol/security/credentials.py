"""A principal's credentials, and the salted hash of a secret that is all a service keeps of it."""

from __future__ import annotations

import hashlib
import hmac
import os
import secrets
from dataclasses import dataclass, field
from typing import Mapping

from .acl import check_principal

ENV_VARIABLE = "GROUPCOORD_CREDENTIALS"
# PBKDF2-HMAC-SHA256 as SCRAM-SHA-256 uses it; secrets are 256 random bits, so stretching guards only a
# leaked store against guessing, and Kafka's minimum of 4096 iterations is enough for that.
HASH_ITERATIONS = 4096
_SALT_BYTES = 16


@dataclass(frozen=True)
class Credentials:
    """Who a client is: a principal ("User:billing") and its secret; the repr never shows the secret."""

    principal: str
    secret: str = field(repr=False)

    def __repr__(self) -> str:
        return f"Credentials(principal={self.principal!r}, secret=<hidden>)"

    __str__ = __repr__

    @property
    def wire(self) -> tuple[str, str]:
        """The pair the client library sends as `credentials=` (a plain tuple pickles several times faster
        than any class, and every request of an authorizing service carries one); never log it."""
        return (self.principal, self.secret)

    def __reduce__(self) -> tuple:
        # Pickled as a plain pair: every request of a service with authorization carries one, and a
        # dataclass's default pickling (through Ray's cloudpickle) costs more than the check itself.
        return Credentials, (self.principal, self.secret)

    @classmethod
    def from_env(cls, environ: Mapping[str, str] | None = None) -> Credentials | None:
        """Credentials from GROUPCOORD_CREDENTIALS="User:<name>:<secret>", or None when it is not set.

        ValueError (not naming the secret) when it is set but malformed.
        """
        value = (os.environ if environ is None else environ).get(ENV_VARIABLE)
        if not value:
            return None
        return cls.parse(value)

    @classmethod
    def parse(cls, value: str) -> Credentials:
        """Credentials from "User:<name>:<secret>" (the form of GROUPCOORD_CREDENTIALS and --credentials)."""
        parts = value.split(":", 2)
        if len(parts) != 3 or parts[0] != "User" or not parts[1] or not parts[2]:
            raise ValueError(f"credentials are 'User:<name>:<secret>' ({ENV_VARIABLE} or --credentials)")
        return cls(f"User:{parts[1]}", parts[2])


def new_secret() -> str:
    """A fresh secret: 256 random bits, URL-safe."""
    return secrets.token_urlsafe(32)


@dataclass(frozen=True)
class SecretHash:
    """The salted PBKDF2 hash of a principal's secret (hex), as the storage root keeps it."""

    salt: str
    digest: str
    iterations: int = HASH_ITERATIONS

    @classmethod
    def of(cls, secret: str, iterations: int = HASH_ITERATIONS) -> SecretHash:
        """Hash `secret` with a new random salt."""
        salt = os.urandom(_SALT_BYTES)
        return cls(salt.hex(), _derive(secret, salt, iterations).hex(), iterations)

    def matches(self, secret: str) -> bool:
        """Whether `secret` is the one hashed here (a constant-time comparison)."""
        if not isinstance(secret, str):
            return False
        candidate = _derive(secret, bytes.fromhex(self.salt), self.iterations)
        return hmac.compare_digest(candidate, bytes.fromhex(self.digest))

    def to_dict(self) -> dict:
        """JSON-able form for the storage root."""
        return {"salt": self.salt, "digest": self.digest, "iterations": self.iterations}


def _derive(secret: str, salt: bytes, iterations: int) -> bytes:
    return hashlib.pbkdf2_hmac("sha256", secret.encode(), salt, iterations)


def principal_of(name: str) -> str:
    """"billing" -> "User:billing" ("User:billing" stays as it is); ValueError for an empty or odd name."""
    if not isinstance(name, str) or not name:
        raise ValueError(f"a principal name must be a non-empty str, got {name!r}")
    principal = name if name.startswith("User:") else f"User:{name}"
    check_principal(principal)
    if principal == "User:*" or ":" in principal[len("User:"):]:
        raise ValueError(f"{name!r} cannot name a principal")
    return principal
