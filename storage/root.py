"""The storage root: the directory holding every partition directory and a metadata file.

The metadata file records the number of offsets partitions, which is fixed when a service is
first started (as in Kafka), the storage format version, the id of the service the root
belongs to and the partitions it holds. Creating a root makes every partition directory
durable first, then the metadata file, atomically and only once: a temporary file is written
and fsynced, then hard-linked to its final name, which fails if another process created it
first; the loser then reads and checks the winner's file. From then on a listed partition whose
directory is missing is lost (a node that does not see the storage, a deleted directory) and is
refused, never served empty, unless `recover_lost_partition` is called for it.

A running service holds `root.lock` (an OS lock, see storage.fileops) so a second service on
the same root is refused.
"""

from __future__ import annotations

import json
import logging
import os
import uuid
from pathlib import Path
from typing import Any

from .errors import StorageConfigError, StorageError
from .fileops import OS_FILES, FileOps, makedirs_durably, replace_file_durably, write_all
from .partition_log import PartitionLog

log = logging.getLogger(__name__)

METADATA_FILE = "groupcoord-storage.json"
FORMAT_VERSION = 1
PARTITION_DIR_PREFIX = "__consumer_offsets-"
ROOT_LOCK_FILE = "root.lock"
# Names groupcoord itself creates in a root (besides partition directories): a directory holding
# only these is a groupcoord root, maybe one whose creation a crash interrupted.
_OWN_NAMES = (
    METADATA_FILE, METADATA_FILE + ".tmp", ROOT_LOCK_FILE, "topics.json", "topics.json.tmp", "end_offsets.jsonl"
)


class LostPartitionError(StorageError):
    """The root lists a partition whose directory is missing: its log is lost, or not visible from here."""


class RootInUseError(StorageError):
    """Another running service holds the storage root."""


class StorageRoot:
    """The storage of a whole service: `partition_dir(i)` and `open_partition(i)` for each partition.

    With `create`, a missing root is created; otherwise opening one without metadata is refused
    (a partition restarted on a node that does not see the storage must not start empty).
    `files` is the file-operation seam.
    """

    def __init__(
        self,
        path: str | os.PathLike[str],
        num_partitions: int,
        *,
        create: bool = True,
        files: FileOps | None = None,
    ) -> None:
        if not isinstance(num_partitions, int) or num_partitions <= 0:
            raise ValueError(f"num_partitions must be a positive integer, not {num_partitions!r}")
        self.path = Path(path)
        self.num_partitions = num_partitions
        self.files = files if files is not None else OS_FILES
        meta = self._read_metadata()
        if meta is None:
            if not create:
                raise StorageConfigError(
                    f"{self.path} is not a groupcoord storage root (it has no {METADATA_FILE}): is the "
                    f"storage visible from this node? Start the service with it to create it"
                )
            self._check_creatable()
            meta = self._create_metadata()
        self._check(meta, create)
        self.service_id: str | None = meta.get("service_id")
        self.partitions: list[int] = meta.get("partitions", list(range(num_partitions)))

    @property
    def metadata_path(self) -> Path:
        """Where the metadata file is."""
        return self.path / METADATA_FILE

    def _read_metadata(self) -> dict[str, Any] | None:
        try:
            text = self.metadata_path.read_text()
        except (FileNotFoundError, NotADirectoryError):
            return None
        try:
            meta = json.loads(text)
        except json.JSONDecodeError as e:
            raise StorageConfigError(f"storage metadata {self.metadata_path} is not valid JSON: {e}") from e
        if not isinstance(meta, dict):
            raise StorageConfigError(f"storage metadata {self.metadata_path} is not a JSON object")
        return meta

    def _check_creatable(self) -> None:
        """Refuse, touching nothing, a directory that is neither empty nor a groupcoord root."""
        if not self.path.exists():
            return
        if not self.path.is_dir():
            raise StorageConfigError(f"storage root {self.path} is not a directory")
        foreign = sorted(
            name for name in os.listdir(self.path)
            if name not in _OWN_NAMES and not name.startswith(f".{METADATA_FILE}.")
            and self._partition_number(name) is None
        )
        if foreign:
            shown = ", ".join(foreign[:5]) + (", ..." if len(foreign) > 5 else "")
            raise StorageConfigError(
                f"storage root {self.path} is neither empty nor a groupcoord storage root (it holds {shown} "
                f"and no {METADATA_FILE}); give an empty or new directory"
            )
        found = sorted(p for p in self.partitions_on_disk() if p >= self.num_partitions
                       and any(self.partition_dir_unchecked(p).iterdir()))
        if found:
            raise StorageConfigError(
                f"storage root {self.path} has no {METADATA_FILE} but holds partition directories "
                f"up to {PARTITION_DIR_PREFIX}{found[-1]}, more than the {self.num_partitions} "
                f"offsets partitions asked for; start with num_partitions={found[-1] + 1} or more, "
                f"or use an empty storage root"
            )

    def _create_metadata(self) -> dict[str, Any]:
        files = self.files
        makedirs_durably(files, self.path)
        for p in range(self.num_partitions):
            try:
                files.mkdir(self.partition_dir_unchecked(p))
            except FileExistsError:
                pass
        files.fsync_directory(self.path)  # every partition directory exists before the root lists it
        meta = {
            "format_version": FORMAT_VERSION,
            "num_partitions": self.num_partitions,
            "service_id": uuid.uuid4().hex,
            "partitions": list(range(self.num_partitions)),
        }
        tmp = self.path / f".{METADATA_FILE}.{uuid.uuid4().hex}.tmp"
        fd = files.create(tmp, exclusive=True)
        try:
            write_all(files, fd, (json.dumps(meta, indent=2) + "\n").encode())
            files.fsync(fd)
        finally:
            files.close(fd)
        try:
            files.link(tmp, self.metadata_path)
        except FileExistsError:
            log.info("%s: storage metadata was created concurrently, checking it", self.path)
            return self._read_metadata() or meta
        finally:
            files.unlink(tmp)
        files.fsync_directory(self.path)
        log.info("%s: created storage root for %d offsets partitions", self.path, self.num_partitions)
        return meta

    def _check(self, meta: dict[str, Any], create: bool) -> None:
        version = meta.get("format_version")
        if version != FORMAT_VERSION:
            raise StorageConfigError(
                f"storage root {self.path} has format version {version!r}; this version of groupcoord "
                f"reads format version {FORMAT_VERSION} only"
            )
        recorded = meta.get("num_partitions")
        if recorded != self.num_partitions:
            raise StorageConfigError(
                f"storage root {self.path} was created with {recorded} offsets partitions, but "
                f"{self.num_partitions} were asked for. The number of offsets partitions is fixed when "
                f"a service is first started (as in Kafka): start with num_partitions={recorded}, or "
                f"use a new, empty storage root to start over with {self.num_partitions}."
            )
        if ("partitions" not in meta or "service_id" not in meta) and create:
            meta.update(self._upgrade(meta))

    def _upgrade(self, meta: dict[str, Any]) -> dict[str, Any]:
        """A root written before roots recorded their service and partitions: record them now."""
        missing = [p for p in range(self.num_partitions) if not self.partition_dir_unchecked(p).is_dir()]
        if missing:
            log.warning("%s: recording a root of an older version; partitions %s had no directory and "
                        "start empty", self.path, missing)
            for p in missing:
                self.files.mkdir(self.partition_dir_unchecked(p))
            self.files.fsync_directory(self.path)
        meta = {**meta, "service_id": uuid.uuid4().hex, "partitions": list(range(self.num_partitions))}
        self._write_metadata(meta)
        return meta

    def _write_metadata(self, meta: dict[str, Any]) -> None:
        replace_file_durably(self.files, self.metadata_path, (json.dumps(meta, indent=2) + "\n").encode())

    def partition_dir(self, partition: int) -> Path:
        """The directory of offsets partition `partition`."""
        if not 0 <= partition < self.num_partitions:
            raise ValueError(f"partition {partition} is outside 0..{self.num_partitions - 1}")
        return self.partition_dir_unchecked(partition)

    def partition_dir_unchecked(self, partition: int) -> Path:
        """Where the directory of `partition` is, whether or not the root has that partition."""
        return self.path / f"{PARTITION_DIR_PREFIX}{partition}"

    @staticmethod
    def _partition_number(name: str) -> int | None:
        suffix = name.removeprefix(PARTITION_DIR_PREFIX)
        return int(suffix) if suffix != name and suffix.isdigit() else None

    def missing_partitions(self) -> list[int]:
        """The partitions the root lists whose directory is missing: lost, or not visible from here."""
        return [p for p in self.partitions if not self.partition_dir_unchecked(p).is_dir()]

    def open_partition(self, partition: int, **options: Any) -> PartitionLog:
        """Open (recovering) the log of `partition`; options go to PartitionLog.

        LostPartitionError if the root lists the partition but its directory is missing: a lost log
        is never served as an empty one (see recover_lost_partition).
        """
        directory = self.partition_dir(partition)
        if partition in self.partitions and not directory.is_dir():
            raise LostPartitionError(
                f"partition directory {directory} is missing, but storage root {self.path} holds partition "
                f"{partition}: its log is lost or this node does not see the storage. Refusing to serve it "
                f"empty; if the log is gone for good, StorageRoot.recover_lost_partition({partition}) starts "
                f"it empty (losing its committed offsets and groups)"
            )
        return PartitionLog(directory, files=self.files, **options)

    def recover_lost_partition(self, partition: int) -> str:
        """Deliberately start a lost partition empty; returns (and logs) what is lost. No-op if it is there."""
        directory = self.partition_dir(partition)
        if directory.is_dir():
            return f"partition {partition} is not lost: {directory} exists; nothing done"
        makedirs_durably(self.files, directory)
        message = (
            f"partition {partition} of storage root {self.path} was recreated empty: every committed offset "
            f"and every group metadata record of the groups on that partition is lost; those groups start "
            f"over (members rejoin, consumers fall back to auto.offset.reset)"
        )
        log.warning("%s", message)
        return message

    def lock_for_service(self) -> int:
        """Take the root's service lock (held until `unlock_service` or the process ends).

        RootInUseError naming the root if another running service holds it.
        """
        handle = self.files.lock(self.path / ROOT_LOCK_FILE)
        if handle is None:
            raise RootInUseError(
                f"storage root {self.path} is in use by another running groupcoord service (it holds "
                f"{self.path / ROOT_LOCK_FILE}); stop that service, or give another storage path"
            )
        return handle

    def unlock_service(self, handle: int) -> None:
        """Release a lock taken by lock_for_service."""
        self.files.unlock(handle)

    def partitions_on_disk(self) -> list[int]:
        """The partition numbers that have a directory under the root."""
        found = []
        for name in os.listdir(self.path):
            number = self._partition_number(name)
            if number is not None and (self.path / name).is_dir():
                found.append(number)
        return sorted(found)

    def __repr__(self) -> str:
        return f"StorageRoot({str(self.path)!r}, num_partitions={self.num_partitions})"
