"""What a handler knows about the request it serves: its version, its client and the service behind it."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from .bridge import BridgeSession

# The listener is the only broker of its cluster: every partition's leader and every group's coordinator.
NODE_ID = 0
# Kafka's "authorized operations not requested" value.
NO_AUTHORIZED_OPERATIONS = -(2**31)


@dataclass(frozen=True)
class Endpoint:
    """Where the listener is reached: advertised to clients by Metadata and FindCoordinator."""

    host: str
    port: int


@dataclass(frozen=True)
class RequestContext:
    """One request's API version, its client (id and "/host" as Kafka shows it) and the service bridge (with the
    connection's credentials)."""

    api_key: int
    version: int
    client_id: str
    client_host: str
    bridge: BridgeSession
    endpoint: Endpoint

    def broker(self) -> dict[str, Any]:
        """The listener as a broker entry of Metadata, FindCoordinator and Fetch."""
        return {"node_id": NODE_ID, "host": self.endpoint.host, "port": self.endpoint.port, "rack": None}
