"""append on one thread while flush (and compaction) run on others: nothing is lost or reordered."""

from __future__ import annotations

import asyncio
import threading

from storage_helpers import ManualMs, commit, flat, state_of

from groupcoord.storage import PartitionLog


def test_append_while_another_thread_flushes_loses_nothing(tmp_path):
    log = PartitionLog(tmp_path, sync="always", segment_bytes=20_000)
    batches = [[commit("g", f"t{i % 7}", j, i) for j in range(i % 5 + 1)] for i in range(3000)]
    done = threading.Event()
    flushed = threading.Event()
    durable_seen = []
    errors = []

    def flusher():
        try:
            while not done.is_set():
                durable_seen.append(log.flush())
                flushed.set()
            durable_seen.append(log.flush())
        except BaseException as e:  # pragma: no cover - reported below
            errors.append(e)
            flushed.set()

    t = threading.Thread(target=flusher)
    t.start()
    ends = []
    for i, b in enumerate(batches):
        ends.append(log.append(b))
        if i % 500 == 499:  # make sure flushes interleave with appends, whatever the scheduler does
            flushed.clear()
            assert flushed.wait(timeout=30)
    done.set()
    t.join()
    assert not errors
    total = len(flat(batches))
    assert ends == [sum(len(b) for b in batches[: i + 1]) for i in range(len(batches))]
    assert durable_seen == sorted(durable_seen) and durable_seen[-1] == total
    assert log.durable_offset == log.end_offset == total
    assert len(log.segments()) >= 3
    log.close()
    assert len(set(durable_seen)) < len(batches)  # group commit: one flush made many appends durable
    reopened = PartitionLog(tmp_path)
    assert list(reopened.replay()) == flat(batches)
    reopened.close()


def test_event_loop_appends_while_flush_runs_in_an_executor(tmp_path):
    """The shape of the partition actor: the loop appends, a worker thread writes and fsyncs."""
    log = PartitionLog(tmp_path, sync="always")
    batches = [[commit("g", "t", i % 10, i)] for i in range(500)]

    async def main():
        loop = asyncio.get_running_loop()
        acked = []
        flushing = None

        async def flush():
            while log.durable_offset < log.end_offset:
                acked.append(await loop.run_in_executor(None, log.flush))

        for i, b in enumerate(batches):
            log.append(b)
            if flushing is None or flushing.done():
                flushing = asyncio.ensure_future(flush())
            if i % 7 == 0:
                await asyncio.sleep(0)
        await flushing
        await flush()
        return acked

    acked = asyncio.run(main())
    assert acked == sorted(acked) and acked[-1] == len(batches)
    assert len(acked) < len(batches)
    log.close()
    assert list(PartitionLog(tmp_path).replay()) == flat(batches)


def test_compaction_runs_beside_append_and_flush(tmp_path):
    clock = ManualMs()
    log = PartitionLog(tmp_path, sync="never", segment_bytes=500, clock=clock, min_compaction_bytes=0)
    batches = [[commit("g", "t", i % 13, i), commit("h", "u", i % 5, i)] for i in range(2000)]
    stop = threading.Event()
    compacted = threading.Event()
    errors = []
    compactions = []

    def compactor():
        try:
            while not stop.is_set():
                compactions.append(log.compact())
                compacted.set()
        except BaseException as e:  # pragma: no cover - reported below
            errors.append(e)
            compacted.set()

    t = threading.Thread(target=compactor)
    t.start()
    ends = []
    for i, b in enumerate(batches):
        ends.append(log.append(b))
        if i % 3 == 0:
            log.flush()
        if i % 400 == 399:  # make sure compactions interleave with appends, whatever the scheduler does
            compacted.clear()
            assert compacted.wait(timeout=30)
    log.flush()
    stop.set()
    t.join()
    assert not errors
    assert any(c.groups_rewritten for c in compactions)
    assert ends == list(range(2, 2 * len(batches) + 1, 2))
    got = list(log.read())
    assert [r.offset for r in got] == sorted({r.offset for r in got})
    assert state_of(r.record for r in got) == state_of(flat(batches))
    log.close()
    reopened = PartitionLog(tmp_path, sync="never")
    assert reopened.end_offset == 2 * len(batches)
    assert state_of(reopened.replay()) == state_of(flat(batches))
    reopened.close()


def test_a_reader_keeps_its_snapshot_while_compaction_swaps_segments(tmp_path):
    log = PartitionLog(tmp_path, sync="never", segment_bytes=200)
    batches = [[commit("g", "t", 0, i)] for i in range(40)]
    for b in batches:
        log.append(b)
        log.flush()
    reading = log.read()
    first = next(reading)
    log.compact()
    rest = list(reading)
    assert [first.record, *(r.record for r in rest)] == flat(batches)
    assert len(list(log.read())) < len(batches)
    log.close()
