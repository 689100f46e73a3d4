"""The handle a user's process holds on a running service: its shape, its router and its partition actors."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

import ray

from groupcoord.protocol import partition_for


class ServiceError(RuntimeError):
    """The service cannot be started or reached; the message says why and what to do."""


@dataclass(frozen=True)
class PartitionReplicas:
    """One offsets partition's replicas (Ray node ids, hex): leader, epoch, replicas, in-sync set, follower lags."""

    partition: int
    leader_epoch: int
    leader: str | None
    replicas: list[str]
    in_sync: list[str]
    lags: dict[str, int | None] = field(default_factory=dict)  # follower node -> records behind the leader


@dataclass
class Service:
    """A handle on a running service; picklable, so Ray tasks and actors can be given one."""

    namespace: str
    num_partitions: int
    storage_path: str
    router: Any
    partitions: list[Any] = field(default_factory=list)
    kafka_bootstrap: str | None = None  # "host:port" of the service's Kafka listener, if it has one

    def find_coordinator(self, group_id: str) -> tuple[int, Any]:
        """The partition owning `group_id` and its actor, computed locally (no router hop)."""
        p = partition_for(group_id, self.num_partitions)
        return p, self.partitions[p]

    def partition(self, i: int) -> Any:
        """The actor of offsets partition `i`."""
        return self.partitions[i]

    def describe_partitions(self) -> list[PartitionReplicas]:
        """Every partition's leader, leader epoch, replicas and in-sync replicas (one replica without replication)."""
        return [PartitionReplicas(**d) for d in ray.get(self.router.describe_partitions.remote())]

    def refresh(self) -> None:
        """Ask the router for the partition actors again (after one was replaced)."""
        self.partitions = ray.get(self.router.partition_handles.remote())
