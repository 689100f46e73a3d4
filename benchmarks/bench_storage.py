"""Storage benchmark: write, replay, compaction, and group-commit throughput of a PartitionLog.

It also measures what a background compaction takes from the thread that appends (the request
path's shape in a partition actor): the cleaner's CPU-bound Python runs in a child process, which
keeps it off the GIL of the appending thread (in a thread of the same process it took two thirds
of the append rate).

Run from the repository root: `python -m benchmarks.bench_storage` (add `--records N` for a
smaller run). Prints a table and writes benchmarks/results/storage.json.
"""

from __future__ import annotations

import argparse
import json
import logging
import os
import platform
import shutil
import sys
import tempfile
import threading
import time
from pathlib import Path
from typing import Callable

from benchmarks import log_files
from benchmarks.common import Progress
from groupcoord.protocol.records import OffsetCommitKey, OffsetCommitValue, Record
from groupcoord.storage import FileOps, PartitionLog

log = logging.getLogger(__name__)

RESULTS = Path(__file__).resolve().parent / "results" / "storage.json"


def make_batch(start: int, size: int) -> list[Record]:
    """`size` small offset-commit records: 10 groups x 10 topics x 100 partitions of keys."""
    out = []
    for i in range(start, start + size):
        key = OffsetCommitKey(f"group-{i % 10}", f"topic-{i // 10 % 10}", i // 100 % 100)
        out.append(Record(key, OffsetCommitValue(i, 7, "", 1_700_000_000_000 + i, -1)))
    return out


def best_of(runs: int, fn: Callable[[], int]) -> tuple[float, int]:
    """The shortest time of `runs` calls of fn (which returns a count), and that count."""
    best, count = float("inf"), 0
    for _ in range(runs):
        t = time.perf_counter()
        count = fn()
        best = min(best, time.perf_counter() - t)
    return best, count


def write_log(directory: Path, records: int, batch: int, segment_bytes: int) -> dict:
    """Write `records` in appends of `batch` records with sync "never", one flush per append."""
    batches = [make_batch(i, batch) for i in range(0, records, batch)]
    progress = Progress("write", len(batches))
    t = time.perf_counter()
    plog = PartitionLog(directory, sync="never", segment_bytes=segment_bytes)
    for n, b in enumerate(batches, 1):
        plog.append(b)
        plog.flush()
        progress.update(n)
    plog.close()
    seconds = time.perf_counter() - t
    return {"seconds": seconds, "records_per_s": records / seconds, **log_files.on_disk(directory)}


def replay(directory: Path) -> int:
    """Open the log and iterate over every record (what a restarted partition does)."""
    plog = PartitionLog(directory, sync="never")
    n = 0
    for _ in plog.replay():
        n += 1
    plog.close()
    return n


def timed_appends(directory: Path, sync: str, appends: int, batch: int, flush_every: int | str,
                  drive: Callable[[PartitionLog, list[list[Record]]], None]) -> dict:
    """Time `drive(plog, batches)` over a fresh log with `sync`: `appends` batches of `batch` records, all durable.

    The fsyncs the log makes while `drive` runs are counted; `flush_every` only labels the result.
    """
    fsyncs = [0]

    class CountingFiles(FileOps):
        def fsync(self, fd: int) -> None:
            fsyncs[0] += 1
            super().fsync(fd)

    shutil.rmtree(directory, ignore_errors=True)
    batches = [make_batch(i * batch, batch) for i in range(appends)]
    plog = PartitionLog(directory, sync=sync, files=CountingFiles())
    fsyncs[0] = 0
    t = time.perf_counter()
    drive(plog, batches)
    seconds = time.perf_counter() - t
    assert plog.durable_offset == appends * batch
    plog.close()
    return {"sync": sync, "flush_every": flush_every, "seconds": seconds, "fsyncs": fsyncs[0],
            "appends_per_s": appends / seconds, "records_per_s": appends * batch / seconds}


def group_commit(directory: Path, sync: str, appends: int, batch: int, flush_every: int) -> dict:
    """`appends` appends of `batch` records, a flush every `flush_every` appends."""

    def drive(plog: PartitionLog, batches: list[list[Record]]) -> None:
        for i, b in enumerate(batches, 1):
            plog.append(b)
            if i % flush_every == 0:
                plog.flush()
        plog.flush()

    return timed_appends(directory, sync, appends, batch, flush_every, drive)


def threaded_group_commit(directory: Path, appends: int, batch: int) -> dict:
    """One thread appends while another flushes in a loop with sync "always" (the actor's shape)."""

    def drive(plog: PartitionLog, batches: list[list[Record]]) -> None:
        done = threading.Event()

        def flusher() -> None:
            while not done.is_set():
                plog.flush()
            plog.flush()

        worker = threading.Thread(target=flusher)
        worker.start()
        for b in batches:
            plog.append(b)
        done.set()
        worker.join()

    return timed_appends(directory, "always", appends, batch, "thread", drive)


def compaction(directory: Path, segment_bytes: int) -> dict:
    """Compact the written log (all but the active segment), then time a replay of the result."""
    result = log_files.compact(directory, segment_bytes)
    seconds, n = best_of(1, lambda: replay(directory))
    return {"seconds": result.seconds, "segments_before": result.segments_before,
            "segments_after": result.segments_after, "records_before": result.records_before,
            "records_after": result.records_after, "bytes_before": result.bytes_before,
            "bytes_after": result.bytes_after, "replay_after_seconds": seconds, "records_after_total": n}


def appends_during_compaction(directory: Path, records: int, batch: int, segment_bytes: int,
                              seconds: float) -> dict:
    """Append + fsync rate on a log whose closed segments are due for compaction: `seconds` with no
    compaction, then while a background compaction runs (at most `seconds`), then after it ended."""
    write_log(directory, records, batch, segment_bytes)
    plog = PartitionLog(directory, sync="always", segment_bytes=segment_bytes, min_compaction_bytes=1)
    batches = [make_batch(i * batch, batch) for i in range(64)]

    def rate(until: Callable[[], bool]) -> float:
        n, t = 0, time.perf_counter()
        while not until() and time.perf_counter() - t < seconds:
            plog.append(batches[n % len(batches)])
            plog.flush()
            n += 1
        return n * batch / (time.perf_counter() - t)

    try:
        before = rate(lambda: False)
        t = time.perf_counter()
        if not plog.maybe_compact():
            raise RuntimeError("no compaction was due on a log of repeated keys")
        during = rate(lambda: not plog.compacting)
        plog.join_compaction()
        compaction_s = time.perf_counter() - t
        after = rate(lambda: False)
    finally:
        plog.close()
    return {"before_per_s": before, "during_per_s": during, "after_per_s": after,
            "during_vs_before": during / before, "compaction_s": compaction_s}


def main(argv: list[str] | None = None) -> None:
    """Run the benchmark, print a table, write benchmarks/results/storage.json."""
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--records", type=int, default=1_000_000)
    parser.add_argument("--batch", type=int, default=100)
    parser.add_argument("--segment-mib", type=int, default=8)
    parser.add_argument("--runs", type=int, default=3, help="replay runs (the best counts)")
    parser.add_argument("--dir", type=Path, default=None, help="where to write (default: a temp dir)")
    parser.add_argument("--stall-seconds", type=float, default=2.0,
                        help="how long each append rate of the during-compaction step is measured")
    args = parser.parse_args(argv)
    base = Path(tempfile.mkdtemp(prefix="bench-storage-", dir=args.dir))
    segment_bytes = args.segment_mib * 1024 * 1024
    results: dict = {"records": args.records, "batch": args.batch, "segment_bytes": segment_bytes,
                     "python": platform.python_version(), "cpus": os.cpu_count(), "dir": str(base)}
    try:
        part = base / "partition"
        print(f"writing {args.records:,} records, {args.batch} per append (sync never)", file=sys.stderr)
        results["write"] = write_log(part, args.records, args.batch, segment_bytes)
        print(f"replay, best of {args.runs} ...", file=sys.stderr)
        seconds, n = best_of(args.runs, lambda: replay(part))
        assert n == args.records, n
        results["replay"] = {"seconds": seconds, "records_per_s": n / seconds}
        seconds, n = best_of(args.runs, lambda: log_files.raw_decode(part, build_records=False))
        results["raw_unpack"] = {"seconds": seconds, "records_per_s": n / seconds}
        seconds, n = best_of(args.runs, lambda: log_files.raw_decode(part, build_records=True))
        results["raw_unpack_records"] = {"seconds": seconds, "records_per_s": n / seconds}
        results["replay_vs_raw_unpack"] = results["replay"]["seconds"] / results["raw_unpack"]["seconds"]
        results["replay_vs_raw_unpack_records"] = (
            results["replay"]["seconds"] / results["raw_unpack_records"]["seconds"]
        )
        print("compaction ...", file=sys.stderr)
        results["compaction"] = compaction(part, segment_bytes)
        print("append + flush (1000 appends of 100 records) ...", file=sys.stderr)
        gc = base / "group-commit"
        runs = []
        for sync in ("never", "always"):
            for every in (1, 10, 100):
                runs.append(min((group_commit(gc, sync, 1000, 100, every) for _ in range(3)),
                                key=lambda g: g["seconds"]))
        runs.append(min((threaded_group_commit(gc, 1000, 100) for _ in range(3)), key=lambda g: g["seconds"]))
        results["append_flush"] = runs
        print("append + fsync while a background compaction runs ...", file=sys.stderr)
        results["during_compaction"] = appends_during_compaction(base / "stall", args.records, args.batch,
                                                                 segment_bytes, args.stall_seconds)
    finally:
        shutil.rmtree(base, ignore_errors=True)
    report(results)
    RESULTS.parent.mkdir(parents=True, exist_ok=True)
    RESULTS.write_text(json.dumps(results, indent=2) + "\n")
    print(f"\nwrote {RESULTS}")


def report(r: dict) -> None:
    """Print the results as small tables."""
    w = r["write"]
    print(f"\nlog: {r['records']:,} records, {w['bytes'] / 1e6:.1f} MB in {w['segments']} segments "
          f"(python {r['python']}, {r['cpus']} cpus)")
    print(f"{'step':<44}{'seconds':>9}{'records/s':>14}")
    rows = [
        ("write (append+flush, sync never)", w["seconds"], w["records_per_s"]),
        ("replay (open + iterate Records)", r["replay"]["seconds"], r["replay"]["records_per_s"]),
        ("baseline: read + msgpack unpack", r["raw_unpack"]["seconds"], r["raw_unpack"]["records_per_s"]),
        ("baseline: read + unpack + record_from_obj", r["raw_unpack_records"]["seconds"],
         r["raw_unpack_records"]["records_per_s"]),
    ]
    for name, seconds, rate in rows:
        print(f"{name:<44}{seconds:>9.3f}{rate:>14,.0f}")
    print(f"replay / raw unpack: {r['replay_vs_raw_unpack']:.2f}x slower; "
          f"replay / unpack+records: {r['replay_vs_raw_unpack_records']:.2f}x")
    c = r["compaction"]
    print(f"compaction: {c['segments_before']} closed segments, {c['records_before']:,} records, "
          f"{c['bytes_before'] / 1e6:.1f} MB -> {c['segments_after']} segments, "
          f"{c['records_after']:,} records, "
          f"{c['bytes_after'] / 1e6:.2f} MB in {c['seconds']:.2f} s; replay after: "
          f"{c['records_after_total']:,} records in {c['replay_after_seconds']:.2f} s")
    print("\nappend + flush, 1000 appends of 100 records, best of 3")
    print(f"{'policy':<36}{'flush every':>12}{'fsyncs':>8}{'seconds':>9}{'appends/s':>11}{'records/s':>12}")
    for g in r["append_flush"]:
        print(f"{'sync ' + g['sync']:<36}{g['flush_every']!s:>12}{g['fsyncs']:>8}{g['seconds']:>9.3f}"
              f"{g['appends_per_s']:>11,.0f}{g['records_per_s']:>12,.0f}")
    d = r["during_compaction"]
    print(f"\nappend + fsync (sync always) beside a background compaction of {d['compaction_s']:.2f} s: "
          f"{d['before_per_s']:,.0f} records/s before, {d['during_per_s']:,.0f} during "
          f"({d['during_vs_before']:.0%} of before), {d['after_per_s']:,.0f} after")


if __name__ == "__main__":
    main()
