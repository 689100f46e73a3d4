"""Power loss at every operation of every storage scenario: no acknowledged record lost, no crash read as corruption.

Each scenario (crash_workloads) runs under the power-loss harness with the power cut before each
of its file operations in turn; the root is then reset to exactly what was durable, and again
keeping a random subset of the unsynced operations, and the invariant is checked after reopening.
benchmarks/powerloss.py runs the same scenarios longer, with more seeds and crashes during recovery.
"""

from __future__ import annotations

import pytest
from crash_workloads import Progress, all_workloads, check_log, count_operations, crash_points
from powerloss import PowerLossFiles
from storage_helpers import ManualMs, commit

from groupcoord.storage import PartitionLog

WORKLOADS = all_workloads(seeds=(1, 2))
VARIANTS = (None, 1)  # exactly the durable state, and a random subset of the unsynced operations


@pytest.mark.parametrize("workload", WORKLOADS, ids=[w.name for w in WORKLOADS])
def test_every_crash_point_keeps_every_acknowledged_record(tmp_path, workload):
    operations = count_operations(workload, tmp_path / "w")
    checked = crash_points(workload, tmp_path / "w", range(1, operations + 2), VARIANTS)
    assert checked == 2 * (operations + 1)


def test_the_short_variant_covers_at_least_a_thousand_crash_points(tmp_path):
    total = sum(2 * (count_operations(w, tmp_path / "w") + 1) for w in WORKLOADS)
    assert total >= 1000, total


def test_compaction_after_an_unsynced_newer_value_keeps_the_acknowledged_one(tmp_path):
    """The reproduction of issue 16: compaction bounded by bytes written but not fsynced lost an offset."""
    clock = ManualMs()
    files = PowerLossFiles(tmp_path)
    plog = PartitionLog(tmp_path / "p", sync="interval", sync_interval_ms=60_000, segment_bytes=150,
                        tombstone_retention_ms=0, clock=clock, files=files)
    progress = Progress()
    for i in range(4):
        batch = [commit("g", "t", 0, 100 + i)]
        plog.append(batch)
        progress.appended.extend(batch)
        plog.flush()
    progress.acked = plog.sync()  # every value of g/t/0 so far is acknowledged and fsynced
    assert len(plog.segments()) >= 2
    newer = [commit("g", "t", 0, 999)]
    plog.append(newer)
    progress.appended.extend(newer)
    plog.flush()  # written, not yet fsynced (the interval has not passed)
    assert files.durable_bytes(plog.segments()[-1].path) != plog.segments()[-1].path.read_bytes()
    plog.compact()
    files.pull_plug()
    check_log(tmp_path / "p", progress)  # the acknowledged value (or a later one) is still there


def test_the_harness_drops_what_no_fsync_made_durable(tmp_path):
    files = PowerLossFiles(tmp_path)
    files.mkdir(tmp_path / "d")
    files.fsync_directory(tmp_path)
    fd = files.create(tmp_path / "synced-data-only")
    files.write(fd, b"abc")
    files.fsync(fd)
    files.close(fd)
    fd = files.create(tmp_path / "d" / "whole")
    files.write(fd, b"xyz")
    files.fsync(fd)
    files.write(fd, b"!")  # not synced
    files.close(fd)
    files.fsync_directory(tmp_path / "d")
    files.rename(tmp_path / "d" / "whole", tmp_path / "d" / "renamed")  # not synced
    files.pull_plug()
    assert not (tmp_path / "synced-data-only").exists()  # its directory entry was never fsynced
    assert (tmp_path / "d" / "whole").read_bytes() == b"xyz"
    assert not (tmp_path / "d" / "renamed").exists()
