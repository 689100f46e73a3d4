"""One writer per partition log: the write lock, the writer epoch that fences what the lock missed, free readers."""

from __future__ import annotations

import pytest
from powerloss import PowerLossFiles
from storage_helpers import commit, files_in

from groupcoord.storage import LogClosedError, LogLockedError, PartitionLog, StaleWriterError, read_partition
from groupcoord.storage.writer import read_epoch


def test_a_second_writer_is_refused_while_the_first_holds_the_log(tmp_path):
    first = PartitionLog(tmp_path / "p")
    with pytest.raises(LogLockedError, match=str(tmp_path / "p")):
        PartitionLog(tmp_path / "p")
    first.append([commit("g", "t", 0, 1)])
    first.close()
    with PartitionLog(tmp_path / "p") as second:  # the lock goes with the writer
        assert list(second.replay()) == [commit("g", "t", 0, 1)]
    assert read_epoch(tmp_path / "p") == 2  # bumped durably at every open for writing


def test_a_writer_whose_epoch_is_stale_writes_nothing(tmp_path):
    files = PowerLossFiles(tmp_path, locks_work=False)  # a network file system whose locks do not work
    zombie = PartitionLog(tmp_path / "p", files=files)
    zombie.append([commit("g", "t", 0, 1)])
    zombie.flush()
    successor = PartitionLog(tmp_path / "p", files=files)
    assert (zombie._fence.epoch, successor._fence.epoch) == (1, 2)
    before = {n: (tmp_path / "p" / n).read_bytes() for n in files_in(tmp_path / "p")}
    zombie.append([commit("g", "t", 0, 666)])
    with pytest.raises(StaleWriterError, match="epoch 2"):
        zombie.flush()
    assert {n: (tmp_path / "p" / n).read_bytes() for n in files_in(tmp_path / "p")} == before
    with pytest.raises(LogClosedError):
        zombie.append([commit("g", "t", 0, 667)])
    successor.append([commit("g", "t", 0, 2)])
    assert successor.flush() == 2
    assert [r.record for r in read_partition(tmp_path / "p")] == [commit("g", "t", 0, 1), commit("g", "t", 0, 2)]
    successor.close()


def test_a_stale_writer_cannot_compact(tmp_path):
    files = PowerLossFiles(tmp_path, locks_work=False)
    zombie = PartitionLog(tmp_path / "p", files=files, segment_bytes=100, sync="never")
    for i in range(12):
        zombie.append([commit("g", "t", 0, i)])
        zombie.flush()
    PartitionLog(tmp_path / "p", files=files, sync="never")
    names = files_in(tmp_path / "p")
    with pytest.raises(StaleWriterError):
        zombie.compact()
    assert files_in(tmp_path / "p") == names  # not even a .cleaned file


def test_readers_take_no_lock(tmp_path):
    writer = PartitionLog(tmp_path / "p")
    writer.append([commit("g", "t", 0, 1)])
    writer.flush()
    reading = read_partition(tmp_path / "p")
    assert next(reading).record == commit("g", "t", 0, 1)  # beside an open writer
    writer.close()
    with PartitionLog(tmp_path / "p") as again:  # and a writer opens beside a reader
        assert again.end_offset == 1
    assert read_epoch(tmp_path / "p") == 2  # readers never bumped it
