"""Spark-on-Ray analytics benchmark: the same reports by Spark (RayDP) and by pandas on the driver.

Run from the repository root: `python -m benchmarks.bench_spark` (default sizes 1M and 10M
commit records; `--records 1000000` for one size). For each size it writes a history through
PartitionLog, then times: loading it into Spark (Ray tasks decode segments into the object
store) plus the reports, against decoding it on the driver plus the same reports in pandas.
Prints a table and writes benchmarks/results/spark.json.
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
import time
from pathlib import Path
from typing import Any, Callable

from benchmarks.bench_spark_data import generate
from groupcoord.spark import SparkOptions, burrow, load_history, load_local, reports, start_spark, stop_spark
from groupcoord.spark.end_offsets import end_offset_samples, end_offsets_frame
from groupcoord.spark.pandas_reports import commit_summary_local, lag_report_local, partition_status_local

log = logging.getLogger(__name__)

RESULTS = Path(__file__).resolve().parent / "results" / "spark.json"
REPORTS = ("commit_summary", "partition_status", "lag")


def timed(fn: Callable[[], Any]) -> tuple[float, Any]:
    """Seconds taken by fn() and its result."""
    start = time.perf_counter()
    result = fn()
    return time.perf_counter() - start, result


def progress_line(event) -> None:
    """Print a loading progress line about every tenth of the ranges."""
    if event.done == event.total or event.done % max(1, event.total // 10) == 0:
        print(f"  {event.line()}", file=sys.stderr, flush=True)


def run_spark(spark: Any, root: Path, now_ms: int, task_cpus: float, cache: bool) -> dict:
    """Load into Spark (and cache, as analyze does) and collect each report; returns timings and reports."""
    t_load, loaded = timed(lambda: load_history(spark, root, progress=progress_line, task_cpus=task_cpus,
                                                cache=cache))
    samples = end_offsets_frame(spark, end_offset_samples(root))
    frames = {
        "commit_summary": reports.commit_summary(loaded.commits, now_ms),
        "partition_status": burrow.partition_status(loaded.commits, samples, now_ms),
        "lag": reports.lag_report(loaded.commits, samples, now_ms),
    }
    out: dict = {"load_s": t_load, "reports_s": {}, "rows": {}}
    results = {}
    for name, df in frames.items():
        seconds, rows = timed(df.collect)
        out["reports_s"][name] = seconds
        out["rows"][name] = len(rows)
        results[name] = rows
        print(f"  spark {name}: {len(rows)} rows in {seconds:.1f}s", file=sys.stderr, flush=True)
    loaded.release()
    return out | {"results": results}


def run_pandas(root: Path, now_ms: int) -> dict:
    """Decode on the driver and compute each report with pandas; returns timings and results."""
    t_load, (commits, _groups) = timed(lambda: load_local(root, progress=progress_line))
    samples = end_offset_samples(root)
    fns = {
        "commit_summary": lambda: commit_summary_local(commits, now_ms),
        "partition_status": lambda: partition_status_local(commits, samples, now_ms),
        "lag": lambda: lag_report_local(commits, samples, now_ms),
    }
    out: dict = {"load_s": t_load, "reports_s": {}, "rows": {}}
    results = {}
    for name, fn in fns.items():
        seconds, frame = timed(fn)
        out["reports_s"][name] = seconds
        out["rows"][name] = len(frame)
        results[name] = frame
        print(f"  pandas {name}: {len(frame)} rows in {seconds:.1f}s", file=sys.stderr, flush=True)
    return out | {"results": results}


def same_results(spark_rows: dict, frames: dict) -> bool:
    """Whether Spark and pandas agree on commit counts, committed offsets, statuses and lags."""
    checks = {"commit_summary": ["committed_offset", "commits"], "partition_status": ["status", "current_lag"],
              "lag": ["lag", "time_lag_ms"]}
    for name, cols in checks.items():
        key = ["group", "topic", "partition"]
        a = {tuple(r[k] for k in key): tuple(r[c] for c in cols) for r in spark_rows[name]}
        df = frames[name].astype(object).where(frames[name].notna(), None)
        b = {tuple(r[k] for k in key): tuple(r[c] for c in cols) for r in df.to_dict("records")}
        if a != b:
            log.warning("%s differs between Spark and pandas", name)
            return False
    return True


def main(argv: list[str] | None = None) -> int:
    """Run the benchmark and write its JSON results."""
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--records", default="1000000,10000000", help="comma-separated sizes (commit records)")
    ap.add_argument("--log-partitions", type=int, default=4, help="offsets partitions to spread them over")
    ap.add_argument("--groups", type=int, default=100)
    ap.add_argument("--topic-partitions", type=int, default=20)
    ap.add_argument("--segment-mb", type=int, default=32, help="segment size (one decoding task per segment)")
    ap.add_argument("--executors", type=int, default=1)
    ap.add_argument("--executor-cores", type=int, default=1)
    ap.add_argument("--executor-memory", default="4G")
    ap.add_argument("--task-cpus", type=float, default=1.0, help="CPUs each decoding Ray task reserves")
    ap.add_argument("--cache", action="store_true",
                    help="cache the loaded history in Spark first (as analyze() does; pays off over many reports)")
    ap.add_argument("--num-cpus", type=int, default=None, help="CPUs of the local Ray instance")
    ap.add_argument("--warmup", type=int, default=20000,
                    help="records of an untimed first run that warms up the JVM (0: none)")
    ap.add_argument("--workdir", default=None, help="where to write the histories (default: a temp dir)")
    ap.add_argument("--out", default=str(RESULTS))
    args = ap.parse_args(argv)
    logging.basicConfig(level=logging.WARNING, format="%(levelname)s %(name)s: %(message)s")
    sizes = [int(s) for s in args.records.split(",") if s]

    import ray

    ray.init(num_cpus=args.num_cpus, include_dashboard=False, log_to_driver=False)
    workdir = Path(args.workdir or tempfile.mkdtemp(prefix="bench-spark-"))
    t_start, spark = timed(lambda: start_spark(SparkOptions(
        app_name="groupcoord-bench", num_executors=args.executors, executor_cores=args.executor_cores,
        executor_memory=args.executor_memory)))
    print(f"Spark started in {t_start:.1f}s", file=sys.stderr)
    runs = []
    try:
        if args.warmup:
            root = workdir / "warmup"
            print(f"[warm-up: {args.warmup:,} records, not timed]", file=sys.stderr, flush=True)
            data = generate(root, args.warmup, log_partitions=args.log_partitions, groups=args.groups,
                            topic_partitions=args.topic_partitions, segment_bytes=args.segment_mb << 20)
            run_spark(spark, root, data["now_ms"], args.task_cpus, args.cache)
            shutil.rmtree(root, ignore_errors=True)
        for n in sizes:
            root = workdir / f"history-{n}"
            shutil.rmtree(root, ignore_errors=True)
            print(f"[{n:,} records] generating", file=sys.stderr, flush=True)
            data = generate(root, n, log_partitions=args.log_partitions, groups=args.groups,
                            topic_partitions=args.topic_partitions, segment_bytes=args.segment_mb << 20)
            print(f"[{n:,} records] Spark", file=sys.stderr, flush=True)
            s = run_spark(spark, root, data["now_ms"], args.task_cpus, args.cache)
            print(f"[{n:,} records] pandas", file=sys.stderr, flush=True)
            p = run_pandas(root, data["now_ms"])
            agree = same_results(s.pop("results"), p.pop("results"))
            runs.append({"records": n, "data": data, "spark": s, "pandas": p, "results_agree": agree})
            shutil.rmtree(root, ignore_errors=True)
    finally:
        stop_spark()
        if args.workdir is None:
            shutil.rmtree(workdir, ignore_errors=True)
    print_table(runs, t_start)
    out = {
        "benchmark": "spark",
        "machine": {"cpus": os.cpu_count(), "python": platform.python_version(), "platform": platform.platform()},
        "settings": vars(args) | {"spark_start_s": t_start},
        "runs": runs,
    }
    Path(args.out).parent.mkdir(parents=True, exist_ok=True)
    Path(args.out).write_text(json.dumps(out, indent=2) + "\n")
    print(f"wrote {args.out}")
    return 0


def print_table(runs: list[dict], t_start: float) -> None:
    """The timings of every run as a plain table (seconds; ratio = Spark / pandas)."""
    print(f"\nSpark start-up (once): {t_start:.1f}s")
    print("load: Spark = Ray tasks decode segments into the object store (+ cache in Spark with --cache); "
          "pandas = decode on the driver")
    header = f"{'records':>11} {'step':<18} {'spark s':>9} {'pandas s':>9} {'spark/pandas':>13}"
    print(header)
    print("-" * len(header))
    for run in runs:
        s, p = run["spark"], run["pandas"]
        steps = [("load", s["load_s"], p["load_s"])]
        steps += [(name, s["reports_s"][name], p["reports_s"][name]) for name in REPORTS]
        total_s = s["load_s"] + sum(s["reports_s"].values())
        total_p = p["load_s"] + sum(p["reports_s"].values())
        steps.append(("total", total_s, total_p))
        for name, a, b in steps:
            print(f"{run['records']:>11,} {name:<18} {a:>9.2f} {b:>9.2f} {a / b if b else float('nan'):>13.2f}")
        print(f"{'':>11} results agree: {run['results_agree']}")


if __name__ == "__main__":
    sys.exit(main())
