"""The topic registry: persisted atomically, and made durable through storage's one fsync seam."""

from __future__ import annotations

import re
from pathlib import Path

from storage_helpers import FsyncCounter

from groupcoord.storage.topics import TopicRegistry, read_end_offset_history

STORAGE = Path(__file__).resolve().parents[2] / "storage"


def test_registry_fsyncs_files_and_the_root_through_the_seam(tmp_path):
    fsync = FsyncCounter()
    registry = TopicRegistry(tmp_path, clock_ms=lambda: 1234, fsync=fsync)
    registry.create("events", 4)
    assert fsync.calls == 2  # topics.json and the directory entry of its rename
    registry.report_end_offsets("events", {0: 10, 3: 7})
    assert fsync.calls == 5  # the history file, then topics.json and the directory again
    again = TopicRegistry(tmp_path)
    assert again.topics["events"].partitions == 4 and again.topics["events"].end_offsets == {0: 10, 3: 7}
    assert [(r["partition"], r["offset"], r["timestamp"]) for r in read_end_offset_history(tmp_path)] == [
        (0, 10, 1234), (3, 7, 1234)]
    assert not list(tmp_path.glob("*.tmp"))


def test_only_the_fsync_module_opens_directories_or_calls_os_fsync():
    pattern = re.compile(r"os\.fsync\(|O_DIRECTORY|os\.open\([^)]*O_RDONLY")
    users = sorted(p.name for p in STORAGE.glob("*.py") if pattern.search(p.read_text()))
    assert users == ["fsync.py"]
