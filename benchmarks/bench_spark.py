"""Analytics benchmark: the same reports by Spark (RayDP) and by pandas, over the same exported history.

Run from the repository root: `python -m benchmarks.bench_spark` (default sizes 10M and 100M
commits; `--records 10000000` for one size). For each size it writes the history straight into
Parquet (the export's layout, through the columnar writer of bench_spark_data), then, with Spark
already started and the history already there, times reading it plus commit_summary,
partition_status and lag: by Spark with its own Parquet reader, as analyze() computes them (one
full scan into commit_buckets, shared by the three reports), and by pyarrow + pandas on the
driver in a child process with a memory limit (so that running out of memory is a result, not a
crash of the machine) and a time limit of `--pandas-limit` times Spark's time. Each side first
runs `--discard` untimed times on the data (the first Spark runs of a size are much slower while
the JVM compiles the code), then `--repeat` timed times; the medians are reported, with the load
average of the machine during the runs. It also measures
columnar decoding of a log (records/s on one core) against record-by-record decoding. Prints a
table and writes benchmarks/results/spark.json.
"""

from __future__ import annotations

import argparse
import json
import logging
import os
import platform
import resource
import shutil
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Any, Callable

from benchmarks.bench_spark_data import generate, generate_history

log = logging.getLogger(__name__)

RESULTS = Path(__file__).resolve().parent / "results" / "spark.json"
REPORTS = ("commit_summary", "partition_status", "lag")
SHARED = "commit_buckets"  # Spark's one full scan, shared by the three reports as analyze() shares it


def timed(fn: Callable[[], Any]) -> tuple[float, Any]:
    """Seconds taken by fn() and its result."""
    start = time.perf_counter()
    result = fn()
    return time.perf_counter() - start, result


def median_run(runs: list[dict]) -> dict:
    """The run with the median total time, with every report's median time over all runs."""
    ranked = sorted(runs, key=lambda r: r["total_s"])
    middle = ranked[len(ranked) // 2]
    return middle | {
        "reports_s": {name: statistics.median(r["reports_s"][name] for r in runs) for name in middle["reports_s"]},
        "totals_s": [r["total_s"] for r in runs],
    }


def run_spark(spark: Any, history: Path, root: Path, now_ms: int) -> dict:
    """Spark reads the history itself and computes each report (collected); returns timings and row counts.

    The reports are called as analyze() calls them over an exported history: the history is read by
    Spark, not cached; its per-key aggregate (commit_buckets) is computed once, timed on its own, and
    shared by the reports.
    """
    from groupcoord.spark import burrow, reports
    from groupcoord.spark.commit_buckets import shared_commit_buckets
    from groupcoord.spark.end_offsets import end_offset_samples, end_offsets_frame, registered_topics
    from groupcoord.spark.history_read import history_frames

    started = time.perf_counter()
    frames = history_frames(spark, str(history), until_ms=now_ms)
    samples = end_offsets_frame(spark, end_offset_samples(root))
    topics = registered_topics(root)
    out: dict = {"reports_s": {}, "rows": {}}
    out["reports_s"][SHARED], buckets = timed(lambda: shared_commit_buckets(frames.commits))
    for name, make in {
        "commit_summary": lambda: reports.commit_summary(frames.commits, now_ms, buckets=buckets),
        "partition_status": lambda: burrow.partition_status(frames.commits, samples, now_ms, topics=topics,
                                                            buckets=buckets),
        "lag": lambda: reports.lag_report(frames.commits, samples, now_ms, buckets=buckets),
    }.items():
        seconds, rows = timed(lambda make=make: make().collect())
        out["reports_s"][name] = seconds
        out["rows"][name] = len(rows)
        print(f"  spark {name}: {len(rows)} rows in {seconds:.1f}s", file=sys.stderr, flush=True)
    out["total_s"] = time.perf_counter() - started
    out["load_average"] = os.getloadavg()[0]
    return out


def run_pandas(history: str, root: str, now_ms: int) -> dict:
    """pyarrow reads the history, pandas computes each report; returns timings (run in the child process)."""
    from groupcoord.spark.end_offsets import end_offset_samples, registered_topics
    from groupcoord.spark.history_read import history_tables
    from groupcoord.spark.pandas_reports import commit_summary_local, lag_report_local, partition_status_local

    started = time.perf_counter()
    t_read, (commits, _groups) = timed(lambda: history_tables(history, until_ms=now_ms))
    samples = end_offset_samples(root)
    topics = registered_topics(root)
    out: dict = {"read_s": t_read, "reports_s": {}, "rows": {}}
    for name, fn in {
        "commit_summary": lambda: commit_summary_local(commits, now_ms),
        "partition_status": lambda: partition_status_local(commits, samples, now_ms, topics=topics),
        "lag": lambda: lag_report_local(commits, samples, now_ms),
    }.items():
        seconds, frame = timed(fn)
        out["reports_s"][name] = seconds
        out["rows"][name] = len(frame)
    out["total_s"] = time.perf_counter() - started
    out["load_average"] = os.getloadavg()[0]
    return out


def pandas_in_child(history: Path, root: Path, now_ms: int, memory_gib: float, timeout_s: float,
                    repeat: int = 1, discard: int = 0) -> dict:
    """run_pandas `discard` + `repeat` times in a child process limited to `memory_gib` of address space
    and `timeout_s` seconds in all; returns the median of the last `repeat` runs (see median_run)."""
    cmd = [sys.executable, "-m", "benchmarks.bench_spark", "--pandas-child", str(history), str(root), str(now_ms),
           str(memory_gib), str(repeat), str(discard)]
    try:
        done = subprocess.run(cmd, capture_output=True, text=True, timeout=timeout_s)
    except subprocess.TimeoutExpired:
        return {"outcome": "timeout", "total_s": None, "limit_s": timeout_s}
    if done.returncode != 0:
        oom = "MemoryError" in done.stderr or "bad_alloc" in done.stderr or done.returncode < 0
        log.warning("pandas child failed: %s", done.stderr[-2000:])
        return {"outcome": "out of memory" if oom else "failed", "total_s": None, "limit_gib": memory_gib}
    runs = json.loads(done.stdout.strip().splitlines()[-1])
    return median_run(runs) | {"read_s": statistics.median(r["read_s"] for r in runs), "outcome": "done"}


def _pandas_child(argv: list[str]) -> int:
    history, root, now_ms, memory_gib = argv[0], argv[1], int(argv[2]), float(argv[3])
    repeat, discard = int(argv[4]), int(argv[5])
    limit = int(memory_gib * (1 << 30))
    resource.setrlimit(resource.RLIMIT_AS, (limit, limit))
    runs = [run_pandas(history, root, now_ms) for _ in range(discard + repeat)]
    print(json.dumps(runs[discard:]))
    return 0


def bench_decode(workdir: Path, records: int) -> dict:
    """Columnar decoding of a log (read in bulk + compiled pass into Arrow) against record-by-record decoding."""
    from groupcoord.spark.columnar import decode_block
    from groupcoord.spark.rows import records_to_tables
    from groupcoord.storage import read_partition
    from groupcoord.storage.columnar import read_entries

    root = workdir / "decode"
    generate(root, records, log_partitions=1, groups=100, topic_partitions=20, segment_bytes=64 << 20)
    directory = next(p for p in root.iterdir() if p.is_dir())
    decode_block(read_entries(directory, max_records=1000), 0)  # compile once (numba caches it on disk)

    def cpu_and_wall(fn: Callable[[], Any]) -> tuple[float, float]:
        cpu, wall = time.process_time(), time.perf_counter()
        fn()
        return time.process_time() - cpu, time.perf_counter() - wall

    # CPU seconds of this one-threaded process: records/s per core, whatever else the machine runs.
    columnar = min(cpu_and_wall(lambda: decode_block(read_entries(directory), 0)) for _ in range(3))
    reference = cpu_and_wall(lambda: records_to_tables(read_partition(directory), 0))
    shutil.rmtree(root, ignore_errors=True)
    return {"records": records, "columnar_cpu_s": columnar[0], "columnar_wall_s": columnar[1],
            "record_by_record_cpu_s": reference[0], "record_by_record_wall_s": reference[1],
            "columnar_records_per_s": records / columnar[0],
            "record_by_record_records_per_s": records / reference[0]}


def main(argv: list[str] | None = None) -> int:
    """Run the benchmark and write its JSON results."""
    argv = sys.argv[1:] if argv is None else argv
    if argv and argv[0] == "--pandas-child":
        return _pandas_child(argv[1:])
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--records", default="10000000,100000000", help="comma-separated sizes (commits)")
    ap.add_argument("--log-partitions", type=int, default=4, help="offsets partitions to spread them over")
    ap.add_argument("--groups", type=int, default=100)
    ap.add_argument("--topic-partitions", type=int, default=20)
    ap.add_argument("--executors", type=int, default=1)
    ap.add_argument("--executor-cores", type=int, default=2)
    ap.add_argument("--executor-memory", default="6G")
    ap.add_argument("--pandas-memory-gib", type=float, default=12.0, help="address-space limit of the pandas run")
    ap.add_argument("--pandas-limit", type=float, default=5.0, help="stop pandas after this many times Spark's time")
    ap.add_argument("--decode-records", type=int, default=2_000_000, help="log size of the decoding figure (0: skip)")
    ap.add_argument("--warmup", type=int, default=200_000, help="commits of an untimed first Spark run (0: none)")
    ap.add_argument("--repeat", type=int, default=3,
                    help="timed runs per size, by Spark and by pandas alike; the medians are reported")
    ap.add_argument("--discard", type=int, default=3,
                    help="untimed runs per size before the timed ones, by Spark and by pandas alike")
    ap.add_argument("--workdir", default=None, help="where to write the data (default: a temp dir)")
    ap.add_argument("--out", default=str(RESULTS))
    args = ap.parse_args(argv)
    logging.basicConfig(level=logging.WARNING, format="%(levelname)s %(name)s: %(message)s")
    sizes = [int(s) for s in args.records.split(",") if s]
    workdir = Path(args.workdir or tempfile.mkdtemp(prefix="bench-spark-"))
    decode = bench_decode(workdir, args.decode_records) if args.decode_records else None
    if decode:
        print(f"decoding, per core (CPU time): columnar {decode['columnar_records_per_s'] / 1e6:.2f}M records/s, "
              f"record by record {decode['record_by_record_records_per_s'] / 1e6:.2f}M records/s",
              file=sys.stderr, flush=True)

    import ray

    from groupcoord.spark import SparkOptions, start_spark, stop_spark

    ray.init(address="local", include_dashboard=False, log_to_driver=False)
    t_start, spark = timed(lambda: start_spark(SparkOptions(
        app_name="groupcoord-bench", num_executors=args.executors, executor_cores=args.executor_cores,
        executor_memory=args.executor_memory)))
    print(f"Spark started in {t_start:.1f}s", file=sys.stderr)
    shape = {"log_partitions": args.log_partitions, "groups": args.groups, "topic_partitions": args.topic_partitions}
    runs = []
    try:
        for n in ([args.warmup] if args.warmup else []) + sizes:
            history, root = workdir / f"history-{n}", workdir / f"root-{n}"
            for path in (history, root):
                shutil.rmtree(path, ignore_errors=True)
            print(f"[{n:,} commits] writing the history", file=sys.stderr, flush=True)
            data = generate_history(history, root, n, **shape)
            print(f"[{n:,} commits] Spark", file=sys.stderr, flush=True)
            if n == args.warmup and args.warmup:
                run_spark(spark, history, root, data["now_ms"])
                shutil.rmtree(history, ignore_errors=True)
                continue
            spark_runs = [run_spark(spark, history, root, data["now_ms"]) for _ in range(args.discard + args.repeat)]
            s = median_run(spark_runs[args.discard:])
            limit = max(60.0, args.pandas_limit * s["total_s"])
            print(f"[{n:,} commits] pandas, {args.discard} + {args.repeat} run(s) (at most {limit:.0f}s each, "
                  f"{args.pandas_memory_gib:g} GiB)", file=sys.stderr, flush=True)
            p = pandas_in_child(history, root, data["now_ms"], args.pandas_memory_gib,
                                limit * (args.discard + args.repeat), args.repeat, args.discard)
            runs.append({"records": n, "data": data, "spark": s, "pandas": p})
            print_run(runs[-1])
            shutil.rmtree(history, ignore_errors=True)
    finally:
        stop_spark()
        if args.workdir is None:
            shutil.rmtree(workdir, ignore_errors=True)
    out = {
        "benchmark": "spark",
        "machine": {"cpus": os.cpu_count(), "python": platform.python_version(), "platform": platform.platform(),
                    "load_average": os.getloadavg()},
        "settings": vars(args) | {"spark_start_s": t_start},
        "decode": decode,
        "runs": runs,
    }
    Path(args.out).parent.mkdir(parents=True, exist_ok=True)
    Path(args.out).write_text(json.dumps(out, indent=2) + "\n")
    print(f"wrote {args.out}")
    return 0


def print_run(run: dict) -> None:
    """One size's timings as plain lines (seconds; speed-up = pandas / Spark)."""
    s, p = run["spark"], run["pandas"]
    size_mb = run["data"]["bytes"] / 1e6
    loads = [r["load_average"] for r in (s, p) if r.get("load_average") is not None]
    print(f"\n{run['records']:,} commits ({size_mb:.0f} MB of Parquet), medians of {len(s['totals_s'])} timed run(s), "
          f"load average {' / '.join(f'{x:.1f}' for x in loads)} (Spark / pandas)")
    print(f"  {SHARED + ' (shared)':<18} spark {s['reports_s'][SHARED]:7.2f}s")
    for name in REPORTS:
        pv = p.get("reports_s", {}).get(name)
        print(f"  {name:<18} spark {s['reports_s'][name]:7.2f}s   pandas {'-' if pv is None else f'{pv:7.2f}s'}")
    if p["outcome"] == "done":
        print(f"  total              spark {s['total_s']:7.2f}s   pandas {p['total_s']:7.2f}s "
              f"(read {p['read_s']:.2f}s)   speed-up {p['total_s'] / s['total_s']:.2f}x")
    else:
        print(f"  total              spark {s['total_s']:7.2f}s   pandas: {p['outcome']} {p}")
    sys.stdout.flush()


if __name__ == "__main__":
    sys.exit(main())
