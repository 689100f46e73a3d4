"""Compaction on real files reads and rewrites in a child process: the same files as the in-thread cleaner,
at a lower priority, and a child that fails or dies fails only that compaction."""

from __future__ import annotations

import contextlib
import os
import signal
import subprocess
import sys

import pytest
from storage_helpers import ManualMs, copy_dir, files_in, random_batches, state_of
from waiting import wait_for_exit

from groupcoord.storage import CompactionError, PartitionLog
from groupcoord.storage import cleaner_process as cp
from groupcoord.storage.compaction import CompactionResult

DAY = 24 * 3600 * 1000


def _log_with_history(directory, seed: int) -> ManualMs:
    clock = ManualMs()
    log = PartitionLog(directory, clock=clock, segment_bytes=400, sync="never")
    for i, batch in enumerate(random_batches(seed, 120)):
        log.append(batch)
        log.flush()
        clock.advance(DAY // 20 if i % 10 else DAY)  # tombstones of every age
    log.close()
    return clock


def _compact(directory, clock, *, in_thread: bool) -> tuple[CompactionResult, list]:
    log = PartitionLog(directory, clock=clock, segment_bytes=400, sync="never", cleaner="thread" if in_thread else None)
    result = log.compact()
    records = list(log.read())
    log.close()
    return result, records


def _same_result(a: CompactionResult, b: CompactionResult) -> bool:
    return {**vars(a), "seconds": 0} == {**vars(b), "seconds": 0}


@pytest.mark.parametrize("seed", [1, 2, 3])
def test_the_child_writes_the_same_files_as_the_thread(tmp_path, seed, monkeypatch):
    spawned = []
    real_init = cp.ChildCleaner.__init__
    monkeypatch.setattr(cp.ChildCleaner, "__init__", lambda self, c: spawned.append(1) or real_init(self, c))
    clock = _log_with_history(tmp_path / "a", seed)
    copy_dir(tmp_path / "a", tmp_path / "b")
    here, here_records = _compact(tmp_path / "a", clock, in_thread=True)
    assert not spawned
    child, child_records = _compact(tmp_path / "b", clock, in_thread=False)
    assert spawned == [1]
    assert here.groups_rewritten > 0 and here.tombstones_dropped > 0 and here.records_after < here.records_before
    assert _same_result(here, child)
    assert child_records == here_records
    assert files_in(tmp_path / "a") == files_in(tmp_path / "b")
    for name in files_in(tmp_path / "a"):
        assert (tmp_path / "a" / name).read_bytes() == (tmp_path / "b" / name).read_bytes(), name


def test_the_child_runs_below_the_partitions_priority(tmp_path, monkeypatch):
    clock = _log_with_history(tmp_path, 4)
    seen = []
    real = cp.ChildCleaner.survivors

    def survivors(self):
        answer = real(self)  # the child has lowered its priority before it answers
        seen.append(os.getpriority(os.PRIO_PROCESS, self.proc.pid))
        return answer

    monkeypatch.setattr(cp.ChildCleaner, "survivors", survivors)
    monkeypatch.setattr(cp.ChildCleaner, "nice_increment", cp.NICE_INCREMENT)  # the suite runs children at 0
    assert cp.ChildCleaner.nice_increment == cp.NICE_INCREMENT > 0
    _compact(tmp_path, clock, in_thread=False)
    assert seen == [min(19, os.getpriority(os.PRIO_PROCESS, 0) + cp.NICE_INCREMENT)]


def test_a_child_that_dies_fails_only_that_compaction(tmp_path, monkeypatch):
    clock = _log_with_history(tmp_path, 5)
    log = PartitionLog(tmp_path, clock=clock, segment_bytes=400, sync="never")
    before = [r.record for r in log.read()]
    real = cp.ChildCleaner.write

    def killed(self, first, last, end, cleaned):
        self.proc.kill()
        self.proc.wait()
        return real(self, first, last, end, cleaned)

    monkeypatch.setattr(cp.ChildCleaner, "write", killed)
    with pytest.raises(CompactionError, match="cleaner process") as raised:
        log.compact()
    assert not raised.value.committed and not log.failed
    assert not [n for n in os.listdir(tmp_path) if n.endswith((".cleaned", ".swap"))]
    monkeypatch.undo()
    more = random_batches(6, 1)[0]
    log.append(more)  # the log carries on
    log.flush()
    assert log.compact().groups_rewritten > 0  # and the next compaction succeeds
    assert state_of(r.record for r in log.read()) == state_of([*before, *more])
    log.close()


def test_damage_the_child_meets_fails_the_compaction_not_the_log(tmp_path):
    clock = _log_with_history(tmp_path, 7)
    log = PartitionLog(tmp_path, clock=clock, segment_bytes=400, sync="never")
    first = log.segments()[0].path
    with open(first, "r+b") as f:  # a flipped byte in a closed segment's first entry
        f.seek(20)
        byte = f.read(1)
        f.seek(20)
        f.write(bytes([byte[0] ^ 0xFF]))
    with pytest.raises(CompactionError, match="in the cleaner process"):
        log.compact()
    assert not log.failed
    log.close()


# A partition process that starts a compaction, says its cleaner's pid once the cleaner has answered (so
# has set itself up), and waits there to be killed.
_DYING_PARENT = """
import signal, sys
from groupcoord.storage import PartitionLog, cleaner_process as cp
real = cp.ChildCleaner.survivors
def survivors(self):
    real(self)
    print(self.proc.pid, flush=True)
    signal.pause()
cp.ChildCleaner.survivors = survivors
PartitionLog(sys.argv[1], segment_bytes=400, sync="never").compact()
"""


def test_the_child_dies_with_its_partition_process_even_when_stopped(tmp_path):
    """An orphaned cleaner could still write `.cleaned` files after a new writer recovered the directory;
    the kernel kills it with its parent. Stopped, it would never read the EOF that ends it otherwise."""
    _log_with_history(tmp_path, 8)
    env = dict(os.environ, PYTHONPATH=os.pathsep.join(p for p in sys.path if p))
    parent = subprocess.Popen([sys.executable, "-c", _DYING_PARENT, str(tmp_path)], stdout=subprocess.PIPE,
                              text=True, env=env)
    child = int(parent.stdout.readline())
    try:
        os.kill(child, signal.SIGSTOP)
        parent.kill()
        parent.wait()
        assert wait_for_exit(child, 10), "the cleaner process outlived its partition process"
    finally:
        with contextlib.suppress(ProcessLookupError):  # an orphan left by a failed check
            os.kill(child, signal.SIGKILL)
        parent.stdout.close()


def test_the_cleaner_is_chosen_by_name_and_a_wrong_name_says_which_exist(tmp_path):
    with PartitionLog(tmp_path / "a", sync="never") as real_files:
        assert real_files.cleaner == "process"
    with PartitionLog(tmp_path / "b", sync="never", cleaner="thread") as chosen:
        assert chosen.cleaner == "thread"
    with pytest.raises(ValueError, match="'process', 'thread'"):
        PartitionLog(tmp_path / "c", sync="never", cleaner="fork")


def test_the_cleaner_process_imports_the_records_not_the_coordinator():
    # The child starts before every compaction, at a low priority: importing the whole protocol tripled its start.
    code = ("import sys, groupcoord.storage.cleaner_process; "
            "print(sorted(m for m in sys.modules if m.startswith('groupcoord.protocol.')))")
    loaded = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True).stdout
    assert "groupcoord.protocol.records" in loaded
    assert "groupcoord.protocol.shard.coordinator" not in loaded and "groupcoord.protocol.messages" not in loaded
