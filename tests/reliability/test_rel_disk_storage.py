"""Disk errors at the log: failing fsyncs, file-size and file-count limits, an unusable directory.

The log must fail loudly (a StorageError naming the file and the OS error), refuse further
appends, keep every acknowledged record, and work again once reopened after the condition
clears. Limits are set in a child process (RLIMIT_FSIZE makes a write fail as a full disk
does; RLIMIT_NOFILE makes opening the next segment fail), so they work without root.
"""

from __future__ import annotations

import errno
import subprocess
import sys
from pathlib import Path

import pytest
from rel_log_writer import record_at, verify

from groupcoord.storage import FileOps, LogClosedError, LogWriteError, PartitionLog, StorageError

CHILD = Path(__file__).with_name("rel_disk_writer.py")


class FailingFsync(FileOps):
    """The real file system, whose fsyncs work until armed, then raise EIO (as a failing disk does)."""

    def __init__(self) -> None:
        self.armed = False
        self.failures = 0

    def fsync(self, fd: int) -> None:
        if self.armed:
            self.failures += 1
            raise OSError(errno.EIO, "Input/output error (injected)")
        super().fsync(fd)


def append(plog: PartitionLog, n: int) -> int:
    """Append n records of the deterministic sequence, flush, return the durable offset."""
    start = plog.end_offset
    plog.append([record_at(o, "append") for o in range(start, start + n)])
    return plog.flush()


def test_rel_failing_fsync_fails_loudly_keeps_acked_records_and_recovers(tmp_path: Path) -> None:
    """EIO from fsync: flush raises LogWriteError, appends are refused, a reopen has every acked record."""
    fsync = FailingFsync()
    plog = PartitionLog(tmp_path / "p", sync="always", files=fsync)
    acked = append(plog, 30)
    fsync.armed = True
    with pytest.raises(LogWriteError) as failure:
        append(plog, 30)
    assert "fsync" in str(failure.value) and str(tmp_path) in str(failure.value)
    assert "Input/output error" in str(failure.value)
    assert plog.failed and plog.durable_offset == acked
    with pytest.raises(LogClosedError) as refused:
        plog.append([record_at(plog.end_offset, "append")])
    assert isinstance(refused.value.__cause__, LogWriteError)
    with pytest.raises(StorageError):
        plog.flush()
    plog.close()  # closing a failed log does not try to write
    end, _ = verify(tmp_path / "p", "append", acked)
    assert end >= acked
    with PartitionLog(tmp_path / "p", sync="always") as again:
        assert append(again, 10) == end + 10


def test_rel_fsync_failure_while_opening_is_a_storage_error(tmp_path: Path) -> None:
    """Recovery fsyncs what it keeps; if that fails, opening raises a StorageError naming the path."""
    with PartitionLog(tmp_path / "p", sync="always") as plog:
        append(plog, 10)
    fsync = FailingFsync()
    fsync.armed = True
    with pytest.raises(StorageError) as failure:
        PartitionLog(tmp_path / "p", sync="always", files=fsync)
    assert str(tmp_path) in str(failure.value)


@pytest.mark.parametrize(("limit", "os_error"), [("fsize", "File too large"), ("nofile", "Too many open files")])
def test_rel_resource_limit_fails_the_log_and_lifting_it_recovers(tmp_path: Path, limit: str, os_error: str) -> None:
    """A write (EFBIG, as a full disk) or a segment open (EMFILE) fails: loud error, refusal, full recovery."""
    directory = tmp_path / "p"
    proc = subprocess.run(
        [sys.executable, str(CHILD), str(directory), limit],
        capture_output=True,
        text=True,
        timeout=120,
        cwd=CHILD.parent,
    )
    assert proc.returncode == 0, proc.stderr[-3000:]
    facts = dict(line.split(" ", 1) for line in proc.stdout.splitlines() if " " in line)
    assert "error none" not in proc.stdout, "the limit never failed a write"
    assert facts["error_type"] == "LogWriteError", facts
    assert os_error in facts["error"] and str(directory) in facts["error"], facts["error"]
    assert facts["failed"] == "True"
    assert facts["after_failure"] == "LogClosedError"
    acked = int(facts["acked_at_failure"])
    assert int(facts["reopened_end"]) >= acked
    end, count = verify(directory, "append", int(facts["acked_after"]))
    assert end == int(facts["acked_after"]) and count == end


def test_rel_log_directory_that_is_a_file_is_a_clear_error(tmp_path: Path) -> None:
    """A path that cannot be a log directory (a file is in the way) gives an error naming it."""
    blocker = tmp_path / "p"
    blocker.write_text("not a directory")
    with pytest.raises((StorageError, OSError)) as failure:
        PartitionLog(blocker, sync="always")
    assert str(blocker) in str(failure.value)
