"""What a follower needs of its log: cutting a divergent suffix, copying gaps, and a durable epoch checkpoint."""

from __future__ import annotations

import pytest
from powerloss import PowerLossFiles
from storage_helpers import commit

from groupcoord.storage import LogLockedError, PartitionLog, StaleWriterError, read_partition
from groupcoord.storage.epoch_checkpoint import EpochState, LeaderEpochCheckpoint
from groupcoord.storage.truncation import TruncationError, truncate_partition_dir
from groupcoord.storage.writer import read_epoch


def _log_with_entries(directory, sizes, **options) -> list[list]:
    batches = []
    with PartitionLog(directory, sync="always", **options) as plog:
        for i, n in enumerate(sizes):
            batch = [commit("g", "t", i, j) for j in range(n)]
            plog.append(batch)
            plog.flush()
            batches.append(batch)
    return batches


def test_truncation_at_an_entry_boundary_keeps_exactly_the_prefix(tmp_path):
    batches = _log_with_entries(tmp_path, [3, 2, 4])
    truncate_partition_dir(tmp_path, 5)
    with PartitionLog(tmp_path) as plog:
        assert plog.end_offset == 5
        assert list(plog.replay()) == batches[0] + batches[1]
        plog.append([commit("g", "t", 9, 9)])  # the log goes on from the cut
        plog.flush()
        assert plog.end_offset == 6


def test_truncation_across_segments_removes_later_segments(tmp_path):
    batches = _log_with_entries(tmp_path, [2] * 6, segment_bytes=200)
    with PartitionLog(tmp_path) as plog:
        assert len(plog.segments()) > 2
    truncate_partition_dir(tmp_path, 4)
    with PartitionLog(tmp_path) as plog:
        assert list(plog.replay()) == batches[0] + batches[1]
    truncate_partition_dir(tmp_path, 0)
    with PartitionLog(tmp_path) as plog:
        assert plog.end_offset == 0 and list(plog.replay()) == []


def test_truncation_inside_an_entry_is_refused_and_changes_nothing(tmp_path):
    batches = _log_with_entries(tmp_path, [3, 3])
    with pytest.raises(TruncationError, match="inside the entry"):
        truncate_partition_dir(tmp_path, 4)
    with PartitionLog(tmp_path) as plog:
        assert list(plog.replay()) == batches[0] + batches[1]


def test_append_at_keeps_a_leaders_gaps_and_refuses_to_go_back(tmp_path):
    with PartitionLog(tmp_path) as plog:
        plog.append([commit("g", "t", 0, 1)])
        assert plog.append_at(5, [commit("g", "t", 0, 2)]) == 6
        plog.flush()
        with pytest.raises(ValueError, match="below the end offset"):
            plog.append_at(3, [commit("g", "t", 0, 3)])
    with PartitionLog(tmp_path) as plog:
        assert [r.offset for r in plog.read(0)] == [0, 5] and plog.end_offset == 6


def test_epoch_checkpoint_round_trips_durably_and_answers_offset_for_epoch(tmp_path):
    cp = LeaderEpochCheckpoint(tmp_path)
    assert cp.read() == EpochState()
    state = EpochState(4).with_epoch_start(1, 0).with_epoch_start(2, 10).with_epoch_start(4, 25)
    cp.write(state)
    assert LeaderEpochCheckpoint(tmp_path).read() == state
    assert state.last_epoch(30) == 4 and state.last_epoch(25) == 2 and state.last_epoch(0) == 0
    # Kafka's OffsetForLeaderEpoch: epoch 3 never led here, so its records would end where epoch 4 began.
    assert state.end_of_epoch(3, 30) == 25 and state.end_of_epoch(1, 30) == 10 and state.end_of_epoch(4, 30) == 30
    assert state.truncated(10).history == ((1, 0),)
    assert state.with_epoch_start(3, 12).history == ((1, 0), (2, 10), (3, 12))


def test_a_follower_truncating_is_the_logs_writer_refused_while_another_holds_it(tmp_path):
    batches = _log_with_entries(tmp_path, [3, 2])
    epoch = read_epoch(tmp_path)
    with PartitionLog(tmp_path) as holder:
        with pytest.raises(LogLockedError, match=str(tmp_path)):
            truncate_partition_dir(tmp_path, 3)
        assert list(holder.replay()) == batches[0] + batches[1]  # nothing was cut under the open writer
    truncate_partition_dir(tmp_path, 3)
    assert read_epoch(tmp_path) == epoch + 2  # the holder's open, then the cut's own
    assert [r.record for r in read_partition(tmp_path)] == batches[0]


def test_a_cut_made_durable_survives_a_power_loss_and_a_stale_checkpoint_writer_is_fenced(tmp_path):
    batches = _log_with_entries(tmp_path, [2, 2])
    files = PowerLossFiles(tmp_path, locks_work=False)
    truncate_partition_dir(tmp_path, 2, files)
    files.pull_plug()  # the cut was fsynced: it is what the disk holds
    assert [r.record for r in read_partition(tmp_path)] == batches[0]
    zombie = PartitionLog(tmp_path, files=files)
    cp = LeaderEpochCheckpoint(tmp_path, files, fence=zombie.check_writer)
    cp.write(EpochState(3))
    successor = PartitionLog(tmp_path, files=files)  # a newer writer of the same log (the lock did not hold)
    with pytest.raises(StaleWriterError):
        cp.write(EpochState(4))
    assert LeaderEpochCheckpoint(tmp_path).read() == EpochState(3)
    successor.close()
    zombie.close()
