"""Sync policies, group commit, and what happens when a write or fsync fails."""

from __future__ import annotations

import errno

import pytest
from storage_helpers import FsyncCounter, ManualMs, commit

from groupcoord.storage import LogClosedError, LogWriteError, PartitionLog
from groupcoord.storage.segment import Segment, segment_file_name


def batch(i: int) -> list:
    return [commit("g", "t", i % 3, i)]


def test_always_acknowledges_only_after_fsync(tmp_path):
    fsync = FsyncCounter()
    log = PartitionLog(tmp_path, sync="always", fsync=fsync)
    opened = fsync.calls
    assert log.append(batch(0)) == 1
    assert log.append(batch(1)) == 2
    assert log.durable_offset == 0
    assert fsync.calls == opened
    assert log.flush() == 2
    assert log.durable_offset == log.written_offset == 2
    assert fsync.calls == opened + 1
    assert log.flush() == 2  # nothing staged: no fsync
    assert fsync.calls == opened + 1
    log.close()


def test_always_does_not_advance_when_the_fsync_fails(tmp_path):
    calls = []

    def failing_fsync(fd: int) -> None:
        calls.append(fd)
        if len(calls) > 2:  # the two syncs made while opening succeed
            raise OSError(errno.EIO, "Input/output error")

    log = PartitionLog(tmp_path, sync="always", fsync=failing_fsync)
    log.append(batch(0))
    with pytest.raises(LogWriteError) as info:
        log.flush()
    assert str(tmp_path / segment_file_name(0)) in str(info.value)
    assert "fsync" in str(info.value)
    assert log.durable_offset == 0
    assert log.failed
    with pytest.raises(LogClosedError, match="refuses appends"):
        log.append(batch(1))
    with pytest.raises(LogClosedError):
        log.flush()
    log.close()
    reopened = PartitionLog(tmp_path)  # the write itself made it into the file
    assert list(reopened.replay()) == batch(0)
    reopened.close()


def test_interval_acknowledges_on_write_and_fsyncs_at_most_every_interval(tmp_path):
    clock = ManualMs()
    fsync = FsyncCounter()
    log = PartitionLog(tmp_path, sync="interval", sync_interval_ms=100, clock=clock, fsync=fsync)
    opened = fsync.calls
    log.append(batch(0))
    assert log.durable_offset == 0
    assert log.flush() == 1  # durable when written
    assert fsync.calls == opened  # but no fsync before the interval passed
    clock.advance(99)
    log.append(batch(1))
    assert log.flush() == 2
    assert fsync.calls == opened
    clock.advance(1)
    assert log.flush() == 2  # nothing new staged, but unsynced data and the interval passed
    assert fsync.calls == opened + 1
    clock.advance(500)
    assert log.flush() == 2  # everything synced: nothing to do
    assert fsync.calls == opened + 1
    log.append(batch(2))
    log.flush()
    assert fsync.calls == opened + 2
    log.append(batch(3))
    assert log.sync() == 4  # sync() forces it
    assert fsync.calls == opened + 3
    log.close()


def test_never_acknowledges_on_write_and_never_fsyncs(tmp_path):
    fsync = FsyncCounter()
    log = PartitionLog(tmp_path, sync="never", fsync=fsync, segment_bytes=100)
    for i in range(20):
        log.append(batch(i))
        assert log.durable_offset == i
        assert log.flush() == i + 1
    assert len(log.segments()) > 3
    log.close()
    assert fsync.calls == 0
    assert len(list(PartitionLog(tmp_path, sync="never").replay())) == 20


def test_group_commit_writes_everything_staged_in_one_write_and_one_fsync(tmp_path, monkeypatch):
    writes = []
    real_write = Segment.write

    def counting_write(self, data):
        writes.append(len(data))
        real_write(self, data)

    monkeypatch.setattr(Segment, "write", counting_write)
    fsync = FsyncCounter()
    log = PartitionLog(tmp_path, fsync=fsync)
    opened = fsync.calls
    for i in range(100):
        log.append(batch(i))
    assert log.flush() == 100
    assert len(writes) == 1
    assert fsync.calls == opened + 1
    log.close()
    assert len(list(PartitionLog(tmp_path).replay())) == 100


def test_roll_fsyncs_the_closed_segment_and_the_directory(tmp_path):
    fsync = FsyncCounter()
    log = PartitionLog(tmp_path, fsync=fsync, segment_bytes=100)
    log.append([commit("g", "t", i, i) for i in range(3)])
    log.flush()
    before = fsync.calls
    log.append(batch(9))
    log.flush()  # rolls: fsync old segment + directory, then fsync the new one
    assert len(log.segments()) == 2
    assert fsync.calls == before + 3
    assert log.durable_offset == 4
    log.close()


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
    import os

    real = os.write

    def short_write(fd, data):
        return real(fd, bytes(data)[: max(1, len(data) // 2)])

    log = PartitionLog(tmp_path)
    monkeypatch.setattr("groupcoord.storage.segment.os.write", short_write)
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
