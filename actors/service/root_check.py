"""Checks a storage root passes before a service starts on it: one service per root, nothing foreign or lost."""

from __future__ import annotations

from groupcoord.storage import StorageError, StorageRoot

from ..client.handle import ServiceError


def check_service_root(storage_path: str, num_partitions: int) -> None:
    """Refuse (touching nothing) a root another service holds, a foreign directory, a root missing a partition."""
    try:
        root = StorageRoot(storage_path, num_partitions, create=True)
        missing = root.missing_partitions()
        if not missing:
            root.unlock_service(root.lock_for_service())  # the new service's router takes it for good
    except (StorageError, OSError) as e:
        raise ServiceError(str(e)) from e
    if missing:
        dirs = ", ".join(str(root.partition_dir(p)) for p in missing)
        raise ServiceError(
            f"storage root {storage_path} holds partitions {missing} whose directories are missing ({dirs}): their "
            f"logs are lost or this node does not see the storage. Refusing to serve them empty; if they are gone "
            f"for good, StorageRoot({storage_path!r}, {num_partitions}).recover_lost_partition(p) starts each "
            f"empty, losing its committed offsets and groups"
        )
