"""The service that runs on the cluster: partition actors, the router, and start/connect/stop."""

import importlib
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from .lifecycle import DEFAULT_NAMESPACE, DEFAULT_STORAGE_PATH, FSYNC_POLICIES, connect, start, stop
    from .partition_actor import PartitionActor
    from .router import RouterActor
    from .spec import Observability

# Imported on first use (PEP 562), so that an actor's process loads only its own modules.
_HOMES = {
    "DEFAULT_NAMESPACE": ".lifecycle",
    "DEFAULT_STORAGE_PATH": ".lifecycle",
    "FSYNC_POLICIES": ".lifecycle",
    "Observability": ".spec",
    "PartitionActor": ".partition_actor",
    "RouterActor": ".router",
    "connect": ".lifecycle",
    "start": ".lifecycle",
    "stop": ".lifecycle",
}

__all__ = [
    "DEFAULT_NAMESPACE",
    "DEFAULT_STORAGE_PATH",
    "FSYNC_POLICIES",
    "Observability",
    "PartitionActor",
    "RouterActor",
    "connect",
    "start",
    "stop",
]


def __getattr__(name: str) -> Any:
    if name not in _HOMES:
        raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
    value = getattr(importlib.import_module(_HOMES[name], __name__), name)
    globals()[name] = value
    return value
