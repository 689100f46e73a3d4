"""The topic registry: persisted atomically and durably, and every file operation of storage/ goes through the seam."""

from __future__ import annotations

import re
from pathlib import Path

from powerloss import PowerLossFiles

from groupcoord.storage.topics import END_OFFSET_HISTORY_FILE, TopicRegistry, read_end_offset_history

STORAGE = Path(__file__).resolve().parents[2] / "storage"


def test_registry_changes_are_durable_when_they_return(tmp_path):
    files = PowerLossFiles(tmp_path)
    registry = TopicRegistry(tmp_path / "root", clock_ms=lambda: 1234, files=files)
    registry.create("events", 4)
    registry.report_end_offsets("events", {0: 10, 3: 7})
    files.pull_plug()
    again = TopicRegistry(tmp_path / "root")
    assert again.topics["events"].partitions == 4 and again.topics["events"].end_offsets == {0: 10, 3: 7}
    assert [(r["partition"], r["offset"], r["timestamp"]) for r in read_end_offset_history(tmp_path / "root")] == [
        (0, 10, 1234), (3, 7, 1234)]
    assert not list((tmp_path / "root").glob("*.tmp"))


def test_a_torn_history_line_is_cut_so_the_next_report_reads_back(tmp_path):
    registry = TopicRegistry(tmp_path, clock_ms=lambda: 5)
    registry.create("events", 1)
    registry.report_end_offsets("events", {0: 1})
    with open(tmp_path / END_OFFSET_HISTORY_FILE, "a") as f:
        f.write('{"topic": "events", "parti')  # a power loss in the middle of an append
    again = TopicRegistry(tmp_path, clock_ms=lambda: 6)
    again.report_end_offsets("events", {0: 2})
    assert [r["offset"] for r in read_end_offset_history(tmp_path)] == [1, 2]


# Calls that change files or directories; only fileops.py (the seam) may make them.
_MUTATING = re.compile(
    r"os\.(fsync|open|write|replace|rename|unlink|remove|link|truncate|mkdir|makedirs)\("
    r"|O_DIRECTORY|flock|tempfile|(?<!files)\.(mkdir|write_text|write_bytes|unlink|rename|touch)\("
    r"|open\([^)]*[\"'][wax+]"
)


def test_only_the_seam_changes_files():
    users = sorted(p.name for p in STORAGE.glob("*.py") if _MUTATING.search(p.read_text()))
    assert users == ["fileops.py"]
