"""The topic registry kept in the storage root: partition counts and reported log-end offsets.

Group members' assignors read partition counts from it and lag reports read end offsets.
The current state is one JSON file rewritten atomically; every end-offset report is also
appended to a JSON-lines history with its timestamp, for time-lag estimates. Opening the
registry cuts a torn last line (a power loss in the middle of an append) off the history, so
that the next append starts on a line of its own.
"""

from __future__ import annotations

import json
import logging
import os
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import Callable, Iterator

from .fileops import OS_FILES, FileOps, makedirs_durably, replace_file_durably, write_all

log = logging.getLogger(__name__)

REGISTRY_FILE = "topics.json"
END_OFFSET_HISTORY_FILE = "end_offsets.jsonl"


@dataclass
class TopicInfo:
    """A topic's partition count and the latest log-end offset reported per partition."""

    partitions: int
    end_offsets: dict[int, int] = field(default_factory=dict)
    end_offsets_updated_ms: dict[int, int] = field(default_factory=dict)


class TopicRegistry:
    """Topics known to a service, persisted in its storage root; `files` is the file-operation seam."""

    def __init__(
        self,
        root: str | os.PathLike,
        clock_ms: Callable[[], int] | None = None,
        *,
        files: FileOps | None = None,
    ) -> None:
        self.root = Path(root)
        self.files = files if files is not None else OS_FILES
        makedirs_durably(self.files, self.root)
        self._now = clock_ms or (lambda: time.time_ns() // 1_000_000)
        self.topics: dict[str, TopicInfo] = self._read()
        self._cut_torn_history()

    def _cut_torn_history(self) -> None:
        path = self.root / END_OFFSET_HISTORY_FILE
        try:
            data = path.read_bytes()
        except FileNotFoundError:
            return
        keep = data.rfind(b"\n") + 1
        if keep < len(data):
            log.warning("%s: cutting a torn last line of %d bytes", path, len(data) - keep)
            self.files.truncate(path, keep)
            fd = self.files.open_append(path)
            try:
                self.files.fsync(fd)
            finally:
                self.files.close(fd)

    def _read(self) -> dict[str, TopicInfo]:
        path = self.root / REGISTRY_FILE
        if not path.exists():
            return {}
        data = json.loads(path.read_text())
        return {
            name: TopicInfo(
                t["partitions"],
                {int(p): o for p, o in t.get("end_offsets", {}).items()},
                {int(p): ts for p, ts in t.get("end_offsets_updated_ms", {}).items()},
            )
            for name, t in data.items()
        }

    def _write(self) -> None:
        data = {
            name: {
                "partitions": t.partitions,
                "end_offsets": {str(p): o for p, o in sorted(t.end_offsets.items())},
                "end_offsets_updated_ms": {str(p): ts for p, ts in sorted(t.end_offsets_updated_ms.items())},
            }
            for name, t in sorted(self.topics.items())
        }
        replace_file_durably(self.files, self.root / REGISTRY_FILE, json.dumps(data, indent=1).encode())

    def create(self, name: str, partitions: int) -> None:
        """Register a topic; raises ValueError for a bad name/count or an existing topic."""
        if not isinstance(name, str) or not name or len(name) > 249:
            raise ValueError(f"topic name must be 1 to 249 characters, got {name!r}")
        if not isinstance(partitions, int) or isinstance(partitions, bool) or partitions < 1:
            raise ValueError(f"a topic needs at least 1 partition, got {partitions!r}")
        if name in self.topics:
            raise FileExistsError(
                f"topic {name!r} already exists with {self.topics[name].partitions} partitions"
            )
        self.topics[name] = TopicInfo(partitions)
        self._write()

    def set_partitions(self, name: str, partitions: int) -> None:
        """Grow a topic to `partitions` partitions (Kafka never shrinks a topic)."""
        info = self.topics.get(name)
        if info is None:
            raise KeyError(f"unknown topic {name!r}")
        if not isinstance(partitions, int) or partitions <= info.partitions:
            raise ValueError(f"topic {name!r} has {info.partitions} partitions; the new count must be larger")
        info.partitions = partitions
        self._write()

    def report_end_offsets(self, name: str, offsets: dict[int, int]) -> None:
        """Record log-end offsets for some partitions of a topic, now."""
        info = self.topics.get(name)
        if info is None:
            raise KeyError(f"unknown topic {name!r}")
        for p, o in offsets.items():
            if not isinstance(p, int) or not 0 <= p < info.partitions:
                raise ValueError(f"topic {name!r} has no partition {p!r}")
            if not isinstance(o, int) or isinstance(o, bool) or o < 0:
                raise ValueError(f"end offset of {name}-{p} must be a non-negative int, got {o!r}")
        now = self._now()
        lines = []
        for p, o in sorted(offsets.items()):
            info.end_offsets[p] = o
            info.end_offsets_updated_ms[p] = now
            lines.append(json.dumps({"topic": name, "partition": p, "offset": o, "timestamp": now}) + "\n")
        fd = self.files.open_append(self.root / END_OFFSET_HISTORY_FILE)
        try:
            write_all(self.files, fd, "".join(lines).encode())
            self.files.fsync(fd)
        finally:
            self.files.close(fd)
        self._write()  # its directory fsync also makes a newly created history file's entry durable


def read_end_offset_history(root: str | os.PathLike) -> Iterator[dict]:
    """Every end-offset report ever made to the registry in `root`, oldest first."""
    path = Path(root) / END_OFFSET_HISTORY_FILE
    if not path.exists():
        return
    with open(path) as f:
        for line in f:
            line = line.strip()
            if line:
                try:
                    yield json.loads(line)
                except json.JSONDecodeError:
                    log.warning("skipping a torn line at the end of %s", path)
