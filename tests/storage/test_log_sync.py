"""Sync policies, group commit, and what happens when a write or fsync fails."""

from __future__ import annotations

import errno
import io
import os

import pytest
from powerloss import PowerLossFiles
from storage_helpers import ManualMs, commit

from groupcoord.storage import LogClosedError, LogWriteError, PartitionLog
from groupcoord.storage.framing import EntryScanner
from groupcoord.storage.segment import Segment, segment_file_name


def batch(i: int) -> list:
    return [commit("g", "t", i % 3, i)]


def durable_records(files: PowerLossFiles, directory) -> int:
    """How many records a power loss now would leave in the segments of `directory`."""
    count = 0
    for name in sorted(n for n in os.listdir(directory) if n.endswith(".log")):
        data = files.durable_bytes(directory / name) or b""
        scanner = EntryScanner(io.BytesIO(data), name, len(data), allow_torn_tail=True)
        count += sum(entry.record_count for entry in scanner)
    return count


def test_always_acknowledges_only_what_an_fsync_made_durable(tmp_path):
    files = PowerLossFiles(tmp_path)
    log = PartitionLog(tmp_path / "p", sync="always", files=files)
    assert log.append(batch(0)) == 1
    assert log.append(batch(1)) == 2
    assert log.durable_offset == 0
    assert durable_records(files, tmp_path / "p") == 0
    assert log.flush() == 2
    assert log.durable_offset == log.written_offset == 2
    assert durable_records(files, tmp_path / "p") == 2
    files.pull_plug()
    with PartitionLog(tmp_path / "p") as reopened:
        assert list(reopened.replay()) == batch(0) + batch(1)


def test_always_does_not_advance_when_the_fsync_fails(tmp_path):
    files = PowerLossFiles(tmp_path)
    log = PartitionLog(tmp_path / "p", sync="always", files=files)
    log.append(batch(0))
    files.fail_next["fsync"] = errno.EIO
    with pytest.raises(LogWriteError) as info:
        log.flush()
    assert str(tmp_path / "p" / segment_file_name(0)) in str(info.value)
    assert "fsync" in str(info.value)
    assert log.durable_offset == 0
    assert log.failed
    with pytest.raises(LogClosedError, match="refuses appends"):
        log.append(batch(1))
    with pytest.raises(LogClosedError):
        log.flush()
    log.close()
    reopened = PartitionLog(tmp_path / "p")  # the write itself made it into the file
    assert list(reopened.replay()) == batch(0)
    reopened.close()


def test_interval_acknowledges_on_write_and_fsyncs_at_most_every_interval(tmp_path):
    clock = ManualMs()
    files = PowerLossFiles(tmp_path)
    d = tmp_path / "p"
    log = PartitionLog(d, sync="interval", sync_interval_ms=100, clock=clock, files=files)
    log.append(batch(0))
    assert log.durable_offset == 0
    assert log.flush() == 1  # acknowledged when written
    assert durable_records(files, d) == 0  # but not fsynced before the interval passed
    clock.advance(99)
    log.append(batch(1))
    assert log.flush() == 2
    assert durable_records(files, d) == 0
    clock.advance(1)
    assert log.flush() == 2  # nothing new staged, but unsynced data and the interval passed
    assert durable_records(files, d) == 2
    log.append(batch(2))
    log.flush()
    assert durable_records(files, d) == 2
    clock.advance(100)
    log.append(batch(3))
    log.flush()
    assert durable_records(files, d) == 4
    log.append(batch(4))
    assert log.sync() == 5  # sync() forces it
    assert durable_records(files, d) == 5
    log.close()


def test_never_acknowledges_on_write_and_never_fsyncs(tmp_path):
    files = PowerLossFiles(tmp_path)
    log = PartitionLog(tmp_path / "p", sync="never", files=files, segment_bytes=100)
    opened = len(files.log)  # opening records the writer epoch durably, whatever the policy
    for i in range(20):
        log.append(batch(i))
        assert log.durable_offset == i
        assert log.flush() == i + 1
    assert len(log.segments()) > 3
    log.close()
    assert "fsync" not in files.log[opened:] and durable_records(files, tmp_path / "p") == 0
    assert len(list(PartitionLog(tmp_path / "p", sync="never").replay())) == 20


def test_group_commit_writes_everything_staged_in_one_write_and_one_fsync(tmp_path):
    files = PowerLossFiles(tmp_path)
    log = PartitionLog(tmp_path / "p", files=files)
    opened = len(files.log)
    for i in range(100):
        log.append(batch(i))
    assert log.flush() == 100
    assert files.log[opened:] == ["write", "fsync"]
    files.pull_plug()
    assert len(list(PartitionLog(tmp_path / "p").replay())) == 100


def test_roll_makes_the_closed_segment_and_the_new_name_durable(tmp_path):
    files = PowerLossFiles(tmp_path)
    d = tmp_path / "p"
    log = PartitionLog(d, files=files, segment_bytes=100)
    log.append([commit("g", "t", i, i) for i in range(3)])
    log.flush()
    log.append(batch(9))
    assert log.flush() == 4  # rolls to a new segment
    assert len(log.segments()) == 2
    for seg in log.segments():
        assert files.durable_bytes(seg.path) == seg.path.read_bytes()
    files.pull_plug()
    with PartitionLog(d) as reopened:
        assert len(list(reopened.replay())) == 4


def test_write_failure_names_the_file_and_the_log_refuses_appends(tmp_path, monkeypatch):
    log = PartitionLog(tmp_path)
    log.append(batch(0))
    log.flush()

    def failing_write(self, data):
        raise LogWriteError(self.path, "write", OSError(errno.ENOSPC, "No space left on device"))

    monkeypatch.setattr(Segment, "write", failing_write)
    log.append(batch(1))
    with pytest.raises(LogWriteError, match=r"write of .*00000000000000000000\.log failed.*No space"):
        log.flush()
    assert log.durable_offset == 1
    with pytest.raises(LogClosedError):
        log.append(batch(2))
    monkeypatch.undo()
    log.close()
    reopened = PartitionLog(tmp_path)
    assert list(reopened.replay()) == batch(0)
    reopened.close()


def test_a_short_write_is_completed(tmp_path, monkeypatch):
    real = os.write

    def short_write(fd, data):
        return real(fd, bytes(data)[: max(1, len(data) // 2)])

    log = PartitionLog(tmp_path)
    monkeypatch.setattr("groupcoord.storage.fileops.os.write", short_write)
    log.append([commit("g", "t", i, i) for i in range(10)])
    log.flush()
    monkeypatch.undo()
    log.close()
    assert len(list(PartitionLog(tmp_path).replay())) == 10


def test_unknown_sync_policy_is_refused(tmp_path):
    with pytest.raises(ValueError, match="sync must be one of"):
        PartitionLog(tmp_path, sync="sometimes")


def test_close_flushes_and_closed_log_refuses_appends(tmp_path):
    log = PartitionLog(tmp_path)
    log.append(batch(0))
    log.close()
    log.close()
    with pytest.raises(LogClosedError, match="closed"):
        log.append(batch(1))
    with PartitionLog(tmp_path) as reopened:
        assert list(reopened.replay()) == batch(0)
