"""The read-only reader for analytics: complete entries only, never a write."""

from __future__ import annotations

import os

import pytest
from storage_helpers import ManualMs, SimulatedCrash, commit, copy_dir, die, flat, group_metadata

from groupcoord.storage import (
    CorruptLogError,
    LogRecord,
    PartitionLog,
    list_segments,
    read_log,
    read_partition,
    read_segment,
)
from groupcoord.storage.framing import HEADER_SIZE
from groupcoord.storage.segment import segment_file_name

BATCHES = [[commit("g", "t", i % 4, i), group_metadata("g", i)] for i in range(30)]


def write(directory, **options):
    clock = ManualMs(1000)
    log = PartitionLog(directory, clock=clock, **options)
    for b in BATCHES:
        log.append(b)
        log.flush()
        clock.advance(10)
    return log


def snapshot(directory):
    stats = {n: os.stat(directory / n) for n in os.listdir(directory)}
    return {n: (st.st_size, st.st_mtime_ns) for n, st in stats.items()}


def test_reads_a_partition_directory_and_single_segments(tmp_path):
    log = write(tmp_path, segment_bytes=400, sync="never")
    log.close()
    got = list(read_partition(tmp_path))
    assert [r.record for r in got] == flat(BATCHES)
    assert got[0] == LogRecord(0, 1000, BATCHES[0][0])
    assert got[-1].timestamp_ms == 1000 + 10 * (len(BATCHES) - 1)
    segments = list_segments(tmp_path)
    assert len(segments) > 2
    pieces = [list(read_segment(p)) for p in segments]
    assert [r for piece in pieces for r in piece] == got
    assert list(read_log(tmp_path)) == got
    assert list(read_log(segments[1])) == pieces[1]
    assert [r.offset for r in read_partition(tmp_path, start_offset=25)] == list(range(25, 60))
    assert list(read_partition(tmp_path / "missing")) == []


def test_stops_quietly_at_an_entry_still_being_written_and_writes_nothing(tmp_path):
    log = write(tmp_path)
    path = tmp_path / segment_file_name(0)
    entry = commit("g", "t", 0, 999)
    log.append([entry])
    staged = b"".join(log._staged)
    for cut in (1, HEADER_SIZE - 1, HEADER_SIZE + 3, len(staged) - 1):
        with open(path, "ab") as f:  # the writer is half-way through its write
            f.write(staged[:cut])
        before = snapshot(tmp_path)
        assert [r.record for r in read_partition(tmp_path)] == flat(BATCHES)
        assert [r.record for r in read_segment(path)] == flat(BATCHES)
        assert snapshot(tmp_path) == before
        os.truncate(path, os.path.getsize(path) - cut)
    log.flush()
    assert [r.record for r in read_partition(tmp_path)] == [*flat(BATCHES), entry]
    log.close()


def test_raises_on_corruption_before_the_tail(tmp_path):
    write(tmp_path).close()
    path = tmp_path / segment_file_name(0)
    data = bytearray(path.read_bytes())
    data[HEADER_SIZE + 1] ^= 0x10
    path.write_bytes(bytes(data))
    with pytest.raises(CorruptLogError, match=r"00000000000000000000\.log at byte 0\b"):
        list(read_partition(tmp_path))


def test_reads_the_committed_state_of_an_interrupted_compaction(tmp_path):
    log = write(tmp_path / "p", segment_bytes=300, sync="never")
    full = list(log.read())
    log.close()
    for crash_after, expect_compacted in (("cleaned", False), ("swap", True), ("deleted", True)):
        d = copy_dir(tmp_path / "p", tmp_path / crash_after)
        writer = PartitionLog(d, sync="never", segment_bytes=100_000)

        def hook(step, crash_after=crash_after):
            if step == crash_after:
                raise SimulatedCrash(step)

        with pytest.raises(SimulatedCrash):
            writer.compact(on_step=hook)
        die(writer)
        got = list(read_partition(d))
        if expect_compacted:
            assert len(got) < len(full) and set(got) <= set(full)
            with PartitionLog(d, sync="never") as recovered:
                assert got == list(recovered.read())
        else:
            assert got == full
