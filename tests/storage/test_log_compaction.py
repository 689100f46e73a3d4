"""Compaction keeps the latest record per key, drops only old tombstones, and survives crashes."""

from __future__ import annotations

import errno
import os
import threading

import pytest
from storage_helpers import (
    ManualMs,
    SimulatedCrash,
    commit,
    copy_dir,
    die,
    files_in,
    group_metadata,
    group_tombstone,
    offset_tombstone,
    random_batches,
    state_of,
)

from groupcoord.storage import CompactionError, FileOps, LogClosedError, PartitionLog, cleaner_process
from groupcoord.storage.compaction import Compactor
from groupcoord.storage.segment import segment_file_name

HOUR = 3600 * 1000
DAY = 24 * HOUR


def expected_after_compaction(log_records, active_base, now, retention=DAY):
    """The reference model: which (offset, ts, record) survive compaction of [0, active_base)."""
    latest = {}
    for r in log_records:
        latest[(type(r.record.key), r.record.key)] = r.offset
    out = []
    for r in log_records:
        if r.offset >= active_base:
            out.append(r)
            continue
        if latest[(type(r.record.key), r.record.key)] != r.offset:
            continue
        if r.record.value is None and r.timestamp_ms < now - retention:
            continue
        out.append(r)
    return out


def write(log, clock, batches, step_ms=60_000):
    for b in batches:
        log.append(b)
        log.flush()
        clock.advance(step_ms)


def test_keeps_exactly_the_latest_value_per_key_and_drops_only_old_tombstones(tmp_path):
    clock = ManualMs()
    log = PartitionLog(tmp_path, clock=clock, segment_bytes=250, sync="never")
    a = lambda o: commit("g", "a", 0, o)  # noqa: E731
    write(log, clock, [[a(1), commit("g", "b", 0, 1)], [a(2), commit("g", "c", 0, 1)]])
    write(log, clock, [[offset_tombstone("g", "b", 0)], [commit("g", "d", 0, 1)]])  # b: old tombstone
    write(log, clock, [[offset_tombstone("g", "d", 0)], [commit("g", "d", 0, 2)]])  # d: value after tombstone
    write(log, clock, [[group_metadata("g", 1)], [group_metadata("g", 2)], [group_tombstone("old-group")]])
    write(log, clock, [[commit("h", "x", 0, 1)] for _ in range(6)])
    clock.advance(2 * DAY)
    write(log, clock, [[offset_tombstone("g", "c", 0)]])  # c: recent tombstone, kept
    write(log, clock, [[commit("h", "y", i, i)] for i in range(6)])
    write(log, clock, [[a(3)]])  # a: latest record in the segment that will stay active
    log.append([commit("pad", "p", 0, 0)] * 8)  # big enough to roll, so a(3) sits in a closed segment...
    log.flush()
    log.append([a(4)])  # ...and a(4) in the active one
    log.flush()
    before = list(log.read())
    active_base = log.segments()[-1].base_offset
    assert len(log.segments()) > 4
    result = log.compact()
    after = list(log.read())
    assert after == expected_after_compaction(before, active_base, clock())
    keys = {(type(r.record.key), r.record.key) for r in after}
    kept = [r.record for r in after]
    assert commit("g", "b", 0, 1).key not in {r.key for r in kept}  # old tombstone and its value gone
    assert offset_tombstone("g", "c", 0) in kept  # recent tombstone stays
    assert commit("g", "c", 0, 1) not in kept  # but the value it deletes goes
    assert commit("g", "d", 0, 2) in kept and offset_tombstone("g", "d", 0) not in kept
    assert [r for r in kept if r.key == a(0).key] == [a(4)]  # latest wins over the whole log
    assert group_tombstone("old-group") not in kept
    assert [r for r in kept if r.key == group_metadata("g", 0).key] == [group_metadata("g", 2)]
    assert len(keys) == len(after)  # one record per key in closed segments, plus active ones
    assert state_of(r.record for r in after) == state_of(r.record for r in before)
    assert result.tombstones_dropped == 2  # b and old-group; d's tombstone was superseded
    assert result.records_after < result.records_before
    # offsets and timestamps of survivors are kept, offsets increase, the end does not move
    offsets = [r.offset for r in after]
    assert offsets == sorted(set(offsets))
    assert log.end_offset == before[-1].offset + 1
    log.close()
    reopened = PartitionLog(tmp_path, clock=clock)
    assert list(reopened.read()) == after
    assert reopened.end_offset == before[-1].offset + 1
    assert reopened.append([a(5)]) == before[-1].offset + 2
    reopened.close()


def test_random_workloads_match_the_model_and_keep_state(tmp_path):
    for seed in range(5):
        clock = ManualMs()
        d = tmp_path / f"s{seed}"
        log = PartitionLog(d, clock=clock, segment_bytes=400, sync="never", tombstone_retention_ms=HOUR)
        write(log, clock, random_batches(seed, 150), step_ms=60_000)
        before = list(log.read())
        active_base = log.segments()[-1].base_offset
        log.compact()
        after = list(log.read())
        assert after == expected_after_compaction(before, active_base, clock(), HOUR)
        assert state_of(r.record for r in after) == state_of(r.record for r in before)
        # compacting again changes nothing, and more data then compaction still matches the model
        log.compact()
        assert list(log.read()) == after
        write(log, clock, random_batches(seed + 100, 50), step_ms=60_000)
        before = list(log.read())
        active_base = log.segments()[-1].base_offset
        log.compact()
        assert list(log.read()) == expected_after_compaction(before, active_base, clock(), HOUR)
        end = log.end_offset
        log.close()
        reopened = PartitionLog(d, sync="never")
        assert reopened.end_offset == end
        assert state_of(reopened.replay()) == state_of(r.record for r in before)
        reopened.close()


def test_compaction_never_touches_the_active_segment(tmp_path):
    log = PartitionLog(tmp_path, sync="never")
    for i in range(10):
        log.append([commit("g", "t", 0, i)])
    log.flush()
    result = log.compact()
    assert result.segments_before == 0
    assert len(list(log.replay())) == 10
    log.close()


def test_everything_compacted_away_keeps_the_end_offset(tmp_path):
    clock = ManualMs()
    log = PartitionLog(tmp_path, clock=clock, segment_bytes=100, sync="never")
    write(log, clock, [[commit("g", "t", 0, i), offset_tombstone("g", "t", 0)] for i in range(10)])
    log.append([commit("x", "t", 0, 0)] * 5)  # roll once more so that every tombstone is in a closed segment
    log.flush()
    log.append([offset_tombstone("x", "t", 0)])
    log.flush()
    clock.advance(2 * DAY)
    end = log.end_offset
    log.compact()
    assert log.end_offset == end
    assert [r.record for r in log.read()] == [offset_tombstone("x", "t", 0)]
    log.close()
    reopened = PartitionLog(tmp_path, clock=clock)
    assert reopened.end_offset == end
    assert reopened.append([commit("g", "t", 0, 1)]) == end + 1
    assert [r.offset for r in reopened.read()] == [end - 1]
    reopened.close()


def test_an_already_clean_segment_is_not_rewritten(tmp_path):
    clock = ManualMs()
    log = PartitionLog(tmp_path, clock=clock, segment_bytes=200, sync="never")
    write(log, clock, [[commit("g", "t", i, i)] for i in range(12)])
    first = log.compact()
    assert first.groups_rewritten >= 1
    second = log.compact()
    assert second.groups_rewritten == 0
    assert second.records_after == second.records_before
    log.close()


def test_maybe_compact_runs_in_the_background_when_due(tmp_path):
    log = PartitionLog(tmp_path, segment_bytes=200, sync="never", min_compaction_bytes=300)
    assert not log.maybe_compact()  # no closed segment
    log.append([commit("g", "t", 0, 0)] * 8)
    log.flush()
    log.append([commit("g", "t", 0, 1)])
    log.flush()
    assert len(log.segments()) == 2
    assert not log.compaction_due()  # dirty bytes below min_compaction_bytes
    for i in range(10):
        log.append([commit("g", "t", 0, i)] * 5)
        log.flush()
    assert log.compaction_due()
    assert log.maybe_compact()
    log.join_compaction()
    assert all(s.clean for s in log.segments()[:-1])
    assert not log.compaction_due()
    assert not log.maybe_compact()
    assert state_of(log.replay()) == {(type(k), k): v for k, v in [commit("g", "t", 0, 9)]}
    log.close()


def test_a_second_background_compaction_does_not_start_beside_a_running_one(tmp_path, monkeypatch):
    log = PartitionLog(tmp_path, segment_bytes=100, sync="never", min_compaction_bytes=0)
    for i in range(5):
        log.append([commit("g", "t", 0, i)] * 3)
        log.flush()
    release, real_run = threading.Event(), Compactor.run

    def held(self):
        assert release.wait(30), "the test never released the compaction"
        return real_run(self)

    monkeypatch.setattr(Compactor, "run", held)
    assert not log.compacting
    assert log.maybe_compact()
    assert log.compacting and log.compaction_due()
    assert not log.maybe_compact()  # due, but one runs
    release.set()
    log.join_compaction()
    assert not log.compacting and not log.compaction_due()
    log.close()


def test_a_failed_background_compaction_is_reported_by_the_next_maybe_compact(tmp_path, monkeypatch):
    log = PartitionLog(tmp_path, segment_bytes=100, sync="never", min_compaction_bytes=0)
    for i in range(5):
        log.append([commit("g", "t", 0, i)] * 3)
        log.flush()

    def broken(self):
        raise OSError("disk on fire")

    monkeypatch.setattr(Compactor, "run", broken)
    assert log.maybe_compact()
    log.join_compaction()
    with pytest.raises(CompactionError, match="disk on fire"):
        log.maybe_compact()
    monkeypatch.undo()
    assert not log.failed  # it failed before committing anything, so the log carries on
    log.append([commit("g", "t", 0, 99)])
    log.flush()
    log.close()


def test_a_swap_that_keeps_failing_after_the_commit_point_fails_the_log_and_reopen_finishes_it(tmp_path):
    clock = ManualMs()
    log = PartitionLog(tmp_path, clock=clock, segment_bytes=150, sync="never")
    write(log, clock, [[commit("g", "t", i % 2, i)] for i in range(15)])
    before = list(log.read())
    active_base = log.segments()[-1].base_offset

    class SwapRenameFails(FileOps):
        """A directory where renaming the .swap file keeps failing (twice: the compactor tries again)."""

        def rename(self, src, dst):
            if str(src).endswith(".swap"):
                raise OSError(errno.EIO, "rename failed")
            super().rename(src, dst)

    log.files = SwapRenameFails()
    with pytest.raises(CompactionError, match="after its commit"):
        log.compact()
    assert log.failed
    with pytest.raises(LogClosedError):
        log.append([commit("g", "t", 0, 0)])
    log.close()
    reopened = PartitionLog(tmp_path, clock=clock)
    assert not any(n.endswith((".swap", ".cleaned")) for n in files_in(tmp_path))
    assert list(reopened.read()) == expected_after_compaction(before, active_base, clock())
    reopened.close()


def run_with_crash(directory, crash_at: int, clock, **options):
    """Compact the log in `directory`, crashing after the crash_at-th step; returns steps seen."""
    steps = []

    def hook(name):
        steps.append(name)
        if len(steps) == crash_at:
            raise SimulatedCrash(name)

    log = PartitionLog(directory, clock=clock, **options)
    try:
        log.compact(on_step=hook)
    except SimulatedCrash:
        pass
    die(log)  # the process died: nothing else runs
    return steps


@pytest.mark.parametrize(
    ("segment_bytes", "cleaner"),
    # the thread's other crash points are the power-loss workloads' (tests/storage/crash_workloads.py)
    [(250, "process"), (700, "process"), (700, "thread")],
    ids=["many-groups-process", "few-groups-process", "few-groups-thread"],
)
def test_a_crash_after_any_compaction_step_replays_to_the_same_state(tmp_path, segment_bytes, cleaner, monkeypatch):
    spawned = []
    real_init = cleaner_process.ChildCleaner.__init__
    monkeypatch.setattr(cleaner_process.ChildCleaner, "__init__", lambda s, c: spawned.append(1) or real_init(s, c))
    clock = ManualMs()
    options = dict(segment_bytes=segment_bytes, sync="always", tombstone_retention_ms=HOUR, cleaner=cleaner)
    pristine = tmp_path / "pristine"
    log = PartitionLog(pristine, clock=clock, **options)
    write(log, clock, random_batches(7, 36, max_batch=4, keys=20), step_ms=60_000)
    before = list(log.read())
    end = log.end_offset
    active_base = log.segments()[-1].base_offset
    closed = len(log.segments()) - 1
    log.close()
    compacted = expected_after_compaction(before, active_base, clock(), HOUR)
    state = state_of(r.record for r in before)
    assert state == state_of(r.record for r in compacted)

    all_steps = run_with_crash(copy_dir(pristine, tmp_path / "dry"), 0, clock, **options)
    groups = all_steps.count("installed")
    assert 2 <= groups < closed  # several groups, and some merge several segments
    for crash_at in range(1, len(all_steps) + 1):
        d = copy_dir(pristine, tmp_path / f"crash{crash_at}")
        run_with_crash(d, crash_at, clock, **options)
        reopened = PartitionLog(d, clock=clock, **options)
        got = list(reopened.read())
        assert not any(n.endswith((".swap", ".cleaned")) for n in files_in(d)), crash_at
        assert state_of(r.record for r in got) == state, crash_at
        assert set(compacted) <= set(got) <= set(before), crash_at  # between before and after
        assert reopened.end_offset == end
        if crash_at == len(all_steps):
            assert got == compacted
        reopened.compact()  # and compacting again finishes the job
        assert list(reopened.read()) == compacted, crash_at
        reopened.close()
    assert bool(spawned) == (cleaner == "process")  # the crashes hit the cleaner the test names


def test_recovery_finishes_a_swap_whose_old_segments_were_partly_deleted(tmp_path):
    clock = ManualMs()
    options = dict(segment_bytes=2000, sync="never")
    log = PartitionLog(tmp_path / "p", clock=clock, segment_bytes=100, sync="never")
    write(log, clock, [[commit("g", "t", i % 3, i)] for i in range(30)])
    before = list(log.read())
    active_base = log.segments()[-1].base_offset
    log.close()
    d = tmp_path / "p"
    steps = run_with_crash(d, 1 + 1, clock, **options)  # crash right after the commit point ("swap")
    assert steps == ["cleaned", "swap"]
    names = files_in(d)
    assert segment_file_name(0) + ".swap" in names
    os.unlink(d / [n for n in names if n.endswith(".log")][1])  # as if step 3 was half done
    reopened = PartitionLog(d, clock=clock, **options)
    assert list(reopened.read()) == expected_after_compaction(before, active_base, clock())
    reopened.close()


def test_leftover_cleaned_files_are_removed_on_open(tmp_path):
    log = PartitionLog(tmp_path)
    log.append([commit("g", "t", 0, 0)])
    log.close()
    (tmp_path / (segment_file_name(0) + ".cleaned")).write_bytes(b"half written garbage")
    reopened = PartitionLog(tmp_path)
    assert files_in(tmp_path) == [segment_file_name(0)]
    assert list(reopened.replay()) == [commit("g", "t", 0, 0)]
    reopened.close()
