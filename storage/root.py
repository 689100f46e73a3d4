"""The storage root: the directory holding every partition directory and a metadata file.

The metadata file records the number of offsets partitions, which is fixed when a service is
first started (as in Kafka), and the storage format version. It is created atomically and
only once: a temporary file is written and fsynced, then hard-linked to its final name, which
fails if another process created it first; the loser then reads and checks the winner's file.
"""

from __future__ import annotations

import json
import logging
import os
import tempfile
from pathlib import Path
from typing import Any

from .errors import StorageConfigError
from .fsync import FsyncFn, fsync_directory, os_fsync
from .partition_log import PartitionLog

log = logging.getLogger(__name__)

METADATA_FILE = "groupcoord-storage.json"
FORMAT_VERSION = 1
PARTITION_DIR_PREFIX = "__consumer_offsets-"


class StorageRoot:
    """The storage of a whole service: `partition_dir(i)` and `open_partition(i)` for each partition."""

    def __init__(
        self, path: str | os.PathLike[str], num_partitions: int, *, fsync: FsyncFn | None = None
    ) -> None:
        if not isinstance(num_partitions, int) or num_partitions <= 0:
            raise ValueError(f"num_partitions must be a positive integer, not {num_partitions!r}")
        self.path = Path(path)
        self.num_partitions = num_partitions
        self._fsync = fsync if fsync is not None else os_fsync
        self.path.mkdir(parents=True, exist_ok=True)
        meta = self._read_metadata()
        if meta is None:
            self._check_partition_dirs()
            meta = self._create_metadata()
        self._check(meta)

    @property
    def metadata_path(self) -> Path:
        """Where the metadata file is."""
        return self.path / METADATA_FILE

    def _read_metadata(self) -> dict[str, Any] | None:
        try:
            text = self.metadata_path.read_text()
        except FileNotFoundError:
            return None
        try:
            meta = json.loads(text)
        except json.JSONDecodeError as e:
            raise StorageConfigError(f"storage metadata {self.metadata_path} is not valid JSON: {e}") from e
        if not isinstance(meta, dict):
            raise StorageConfigError(f"storage metadata {self.metadata_path} is not a JSON object")
        return meta

    def _check_partition_dirs(self) -> None:
        found = sorted(p for p in self.partitions_on_disk() if p >= self.num_partitions)
        if found:
            raise StorageConfigError(
                f"storage root {self.path} has no {METADATA_FILE} but holds partition directories "
                f"up to {PARTITION_DIR_PREFIX}{found[-1]}, more than the {self.num_partitions} "
                f"offsets partitions asked for; start with num_partitions={found[-1] + 1} or more, "
                f"or use an empty storage root"
            )

    def _create_metadata(self) -> dict[str, Any]:
        meta = {"format_version": FORMAT_VERSION, "num_partitions": self.num_partitions}
        fd, name = tempfile.mkstemp(prefix=f".{METADATA_FILE}.", suffix=".tmp", dir=self.path)
        tmp = Path(name)
        with open(fd, "w") as f:
            json.dump(meta, f, indent=2)
            f.write("\n")
            f.flush()
            self._fsync(f.fileno())
        try:
            os.link(tmp, self.metadata_path)
        except FileExistsError:
            log.info("%s: storage metadata was created concurrently, checking it", self.path)
            return self._read_metadata() or meta
        finally:
            os.unlink(tmp)
        fsync_directory(self.path, self._fsync)
        log.info("%s: created storage root for %d offsets partitions", self.path, self.num_partitions)
        return meta

    def _check(self, meta: dict[str, Any]) -> None:
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

    def partition_dir(self, partition: int) -> Path:
        """The directory of offsets partition `partition`."""
        if not 0 <= partition < self.num_partitions:
            raise ValueError(f"partition {partition} is outside 0..{self.num_partitions - 1}")
        return self.path / f"{PARTITION_DIR_PREFIX}{partition}"

    def open_partition(self, partition: int, **options: Any) -> PartitionLog:
        """Open (recovering, creating if needed) the log of `partition`; options go to PartitionLog."""
        return PartitionLog(self.partition_dir(partition), **options)

    def partitions_on_disk(self) -> list[int]:
        """The partition numbers that have a directory under the root."""
        found = []
        for name in os.listdir(self.path):
            suffix = name.removeprefix(PARTITION_DIR_PREFIX)
            if suffix != name and suffix.isdigit() and (self.path / name).is_dir():
                found.append(int(suffix))
        return sorted(found)

    def __repr__(self) -> str:
        return f"StorageRoot({str(self.path)!r}, num_partitions={self.num_partitions})"
