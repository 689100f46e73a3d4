"""The security state kept in a storage root: principals as salted hashes, ACL bindings and quotas.

One JSON file, rewritten atomically and durably (write, fsync, rename, fsync the directory) through
the `FileOps` seam on every change, with a version that only grows. Secrets are never written: a
new principal's secret is returned once to its creator and only its PBKDF2 hash is stored.
"""

from __future__ import annotations

import dataclasses
import json
import logging
import os
from pathlib import Path
from typing import Any

from groupcoord.protocol.security.acl import AclBinding, binding_matches_filter, check_principal
from groupcoord.protocol.security.credentials import SecretHash, new_secret, principal_of
from groupcoord.protocol.security.snapshot import SecuritySnapshot

from .fileops import OS_FILES, FileOps, makedirs_durably, replace_file_durably

log = logging.getLogger(__name__)

SECURITY_FILE = "security.json"


class SecurityStore:
    """A service's principals, ACLs and quotas, persisted in its storage root; `files` is the file seam."""

    def __init__(self, root: str | os.PathLike, *, files: FileOps | None = None) -> None:
        self.root = Path(root)
        self.files = files if files is not None else OS_FILES
        makedirs_durably(self.files, self.root)
        path = self.root / SECURITY_FILE
        self.snapshot = SecuritySnapshot.from_dict(json.loads(path.read_text())) if path.exists() else (
            SecuritySnapshot())

    def _save(self, **changes: Any) -> SecuritySnapshot:
        snapshot = dataclasses.replace(self.snapshot, version=self.snapshot.version + 1, **changes)
        replace_file_durably(self.files, self.root / SECURITY_FILE, json.dumps(snapshot.to_dict(), indent=1).encode())
        self.snapshot = snapshot
        return snapshot

    # --- principals ---------------------------------------------------------------------------

    def create_principal(self, name: str, secret: str | None = None) -> tuple[str, str]:
        """Add a principal; its (principal, secret), the secret new unless given. FileExistsError if it exists."""
        principal = principal_of(name)
        if principal in self.snapshot.principals:
            raise FileExistsError(f"principal {principal!r} already exists")
        secret = secret if secret is not None else new_secret()
        self._save(principals={**self.snapshot.principals, principal: SecretHash.of(secret)})
        log.info("principal %s created", principal)
        return principal, secret

    def add_hashed_principal(self, principal: str, secret_hash: SecretHash) -> None:
        """Add a principal whose secret's hash was made elsewhere (the operator's first, hashed by start())."""
        principal = principal_of(principal)
        if principal in self.snapshot.principals:
            raise FileExistsError(f"principal {principal!r} already exists")
        self._save(principals={**self.snapshot.principals, principal: secret_hash})
        log.info("principal %s created", principal)

    def delete_principal(self, name: str) -> None:
        """Remove a principal (its credentials stop working); KeyError if there is none."""
        principal = principal_of(name)
        if principal not in self.snapshot.principals:
            raise KeyError(f"no principal {principal!r}")
        self._save(principals={p: h for p, h in self.snapshot.principals.items() if p != principal})
        log.info("principal %s deleted", principal)

    def list_principals(self) -> list[str]:
        """The principals, sorted."""
        return sorted(self.snapshot.principals)

    # --- ACLs -----------------------------------------------------------------------------------

    def create_acls(self, bindings: list[AclBinding]) -> int:
        """Add bindings (validated; those already present are kept once); how many were new."""
        valid = [b.validated() for b in bindings]
        current = list(self.snapshot.acls)
        new = [b for b in dict.fromkeys(valid) if b not in current]
        if new:
            self._save(acls=tuple(current + new))
        return len(new)

    def delete_acls(self, bindings: list[AclBinding]) -> int:
        """Remove exactly these bindings; how many were removed."""
        gone = {b.validated() for b in bindings}
        kept = tuple(b for b in self.snapshot.acls if b not in gone)
        removed = len(self.snapshot.acls) - len(kept)
        if removed:
            self._save(acls=kept)
        return removed

    def describe_acls(
        self, principal: str | None = None, resource_type: str | None = None, resource_name: str | None = None
    ) -> list[AclBinding]:
        """The bindings that fit the filter (None matches anything)."""
        return [b for b in self.snapshot.acls if binding_matches_filter(b, principal, resource_type, resource_name)]

    # --- quotas ---------------------------------------------------------------------------------

    def alter_quota(self, principal: str, request_rate: float | None) -> None:
        """Set (or, with None, remove) a principal's request rate in requests per second ("User:*": the default)."""
        check_principal(principal)
        quotas = {p: r for p, r in self.snapshot.quotas.items() if p != principal}
        if request_rate is not None:
            if not isinstance(request_rate, (int, float)) or isinstance(request_rate, bool) or request_rate <= 0:
                raise ValueError(f"request_rate must be a positive number of requests per second, got {request_rate!r}")
            quotas[principal] = float(request_rate)
        self._save(quotas=quotas)
