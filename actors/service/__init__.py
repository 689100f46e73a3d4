"""The service that runs on the cluster: partition actors, the router, and start/connect/stop."""

from .lifecycle import DEFAULT_NAMESPACE, DEFAULT_STORAGE_PATH, FSYNC_POLICIES, connect, start, stop
from .partition_actor import PartitionActor
from .router import RouterActor
from .spec import Observability

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
