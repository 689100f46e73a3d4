"""A compaction that fails at any of its file operations (ENOSPC, EIO, EACCES) leaves the log consistent and serving."""

from __future__ import annotations

import pytest
from powerloss import ERRNOS, NoSyncFiles, PowerLossFiles
from storage_helpers import ManualMs, copy_dir, files_in, random_batches, state_of

from groupcoord.storage import PartitionLog, StorageError

OPTIONS = dict(segment_bytes=250, sync="always", tombstone_retention_ms=0)


@pytest.fixture(scope="module")
def pristine(tmp_path_factory):
    """A log with several closed segments to compact, its state, and how many operations compaction makes."""
    d = tmp_path_factory.mktemp("pristine") / "p"
    clock = ManualMs()
    with PartitionLog(d, clock=clock, **OPTIONS) as plog:
        for batch in random_batches(3, 30, max_batch=4, keys=12):
            plog.append(batch)
            plog.flush()
            clock.advance(10)
        state = state_of(plog.replay())
    dry = copy_dir(d, d.parent / "dry")
    files = PowerLossFiles(dry)
    plog = PartitionLog(dry, clock=clock, files=files, **OPTIONS)
    opened = files.ops
    assert plog.compact().groups_rewritten >= 2
    plog.close()
    return d, state, opened, files.ops - opened


def test_a_failing_compaction_step_keeps_the_log_consistent_and_appendable(tmp_path, pristine):
    source, state, opened, operations = pristine
    outcomes = {"raised": 0, "finished": 0}
    for step in range(1, operations + 1):
        for code in ERRNOS:
            d = copy_dir(source, tmp_path / f"{step}-{code}")
            files = PowerLossFiles(d)
            plog = PartitionLog(d, clock=ManualMs(), files=files, **OPTIONS)
            files.fail_at[opened + step] = code
            try:
                plog.compact()
                outcomes["finished"] += 1  # a failed step after the commit point was finished again
            except StorageError as e:
                assert str(d) in str(e), e
                outcomes["raised"] += 1
            where = f"{files.log[opened + step - 1]} (operation {step}), errno {code}"
            # The failure was raised at that operation, inside this compaction.
            assert files.fired == [(opened + step, files.log[opened + step - 1], code)], (where, files.fired)
            assert not plog.failed, where
            assert state_of(plog.replay()) == state, where
            plog.append(random_batches(9, 1)[0])
            plog.flush()
            after = state_of(plog.replay())
            plog.compact()  # a later compaction succeeds
            assert state_of(plog.replay()) == after, where
            plog.close()
            assert not any(n.endswith((".swap", ".cleaned")) for n in files_in(d)), where
            with PartitionLog(d, files=NoSyncFiles(), **OPTIONS) as reopened:
                assert state_of(reopened.replay()) == after, where
    assert outcomes["raised"] > 0 and outcomes["finished"] > 0, outcomes
