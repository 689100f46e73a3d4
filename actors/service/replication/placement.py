"""Checks of a replicated service's shape before it starts: the factor, the in-sync minimum, the nodes."""

from __future__ import annotations

import json
import os
from pathlib import Path
from typing import Any

import ray

from groupcoord.storage.epoch_checkpoint import write_json_atomically

from ...client.handle import ServiceError

PLACEMENT_FILE = "replication-placement.json"


def check_replication(replication_factor: int, min_insync_replicas: int) -> None:
    """Refuse a replication factor or an in-sync minimum that cannot work."""
    if not isinstance(replication_factor, int) or isinstance(replication_factor, bool) or replication_factor < 1:
        raise ServiceError(f"replication_factor must be a positive int, got {replication_factor!r}")
    if not isinstance(min_insync_replicas, int) or isinstance(min_insync_replicas, bool):
        raise ServiceError(f"min_insync_replicas must be an int, got {min_insync_replicas!r}")
    if not 1 <= min_insync_replicas <= replication_factor:
        raise ServiceError(
            f"min_insync_replicas must be between 1 and the replication factor {replication_factor}, "
            f"got {min_insync_replicas}"
        )


def acks_needed(replication_factor: int, min_insync_replicas: int) -> int:
    """Replicas that must hold a write before it is acknowledged: min_insync_replicas, and never less
    than a majority, which the election needs so that it cannot lose an acknowledged write."""
    return max(min_insync_replicas, replication_factor // 2 + 1)


def check_alive_nodes(replication_factor: int) -> None:
    """Refuse a replication factor above the number of alive Ray nodes (replicas go on distinct nodes)."""
    alive = sum(1 for n in ray.nodes() if n.get("Alive"))
    if replication_factor > alive:
        raise ServiceError(
            f"replication_factor {replication_factor} needs that many Ray nodes for its replicas, "
            f"but only {alive} are alive; add nodes or lower the replication factor"
        )


def head_node_id() -> str:
    """The Ray head node's id (this process's node if no head is listed)."""
    heads = [n["NodeID"] for n in ray.nodes() if n.get("Alive") and "node:__internal_head__" in n.get("Resources", {})]
    return heads[0] if heads else ray.get_runtime_context().get_node_id()


class PlacementFile:
    """The router's durable record of every partition's voting replicas (id, node, actor name)."""

    def __init__(self, root: str | os.PathLike[str], files: Any = None) -> None:
        self.path = Path(root) / PLACEMENT_FILE
        self.files = files

    def read(self) -> dict[str, Any] | None:
        """The saved placement, or None when the service has none yet."""
        try:
            return json.loads(self.path.read_text())
        except FileNotFoundError:
            return None

    def write(
        self, generation: int, partitions: list[list[tuple[str, str, str]]], learners: dict | None = None
    ) -> None:
        """Replace the saved placement durably (voters per partition, and learners being repaired)."""
        body = {"generation": generation, "partitions": partitions, "learners": learners or {}}
        if self.files is not None:
            write_json_atomically(self.path, body, self.files)
        else:
            write_json_atomically(self.path, body)
