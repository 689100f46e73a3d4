"""What a service is made of: the settings its router and every partition actor are created with."""

from __future__ import annotations

from dataclasses import dataclass, field

from groupcoord.protocol.config import GroupConfig


@dataclass(frozen=True)
class ServiceSpec:
    """A service's namespace, storage root, partition count, fsync policy and group settings."""

    namespace: str | None  # where the router is named; None for a partition run outside a service
    storage_path: str
    num_partitions: int
    fsync: str = "always"
    config: GroupConfig = field(default_factory=GroupConfig)
    replication_factor: int = 1  # replicas per partition, on distinct nodes (1: one PartitionActor)
    min_insync_replicas: int = 1  # replicas (leader included) that hold a write durably before it is acknowledged
