"""`python -m benchmarks NAME [options]` runs one load benchmark; `python -m benchmarks all` runs them all.

Each prints its tables (with the machine) and writes benchmarks/results/NAME.json. `--quick`
shrinks every size; `python -m benchmarks NAME --help` lists a benchmark's options.
"""

from __future__ import annotations

import argparse
import importlib
import sys
import time

from benchmarks import common

# name -> module; `all` runs them in this order.
BENCHMARKS = {
    "commits": "benchmarks.bench_commits",
    "heartbeats": "benchmarks.bench_heartbeats",
    "rebalance": "benchmarks.bench_rebalance",
    "recovery": "benchmarks.bench_recovery",
    "memory": "benchmarks.bench_memory",
    "scale": "benchmarks.bench_scale",
    "retention": "benchmarks.bench_retention",
    "metrics": "benchmarks.bench_metrics",
    "kip848": "benchmarks.bench_kip848",
}
# Runnable by name too, but not part of `all` (their own options and sizes).
OTHERS = {
    "storage": "benchmarks.bench_storage",
    "spark": "benchmarks.bench_spark",
    "replication": "benchmarks.bench_replication",  # a ray.cluster_utils.Cluster of its own
    "replication-chaos": "benchmarks.replication_chaos",  # the long run: >= 30 node losses
    "conformance": "benchmarks.kafka.conformance",  # differential: Kafka 4.4 against another target
    "vs-kafka": "benchmarks.kafka.vs_kafka",  # the same load against Kafka 4.4 and groupcoord
}


def main(argv: list[str] | None = None) -> int:
    """Dispatch to a benchmark module, or run every load benchmark with the shared options."""
    argv = list(sys.argv[1:] if argv is None else argv)
    names = ", ".join([*BENCHMARKS, *OTHERS])
    if not argv or argv[0] in ("-h", "--help"):
        print(__doc__)
        print(f"benchmarks: {names}, all")
        print("shared options of `all`: --quick, --tiny, --trials N, --dir PATH")
        return 0
    name, rest = argv[0], argv[1:]
    if name in OTHERS:
        importlib.import_module(OTHERS[name]).main(rest)
        return 0
    if name == "all":
        parser = argparse.ArgumentParser(prog="python -m benchmarks all")
        common.add_common_arguments(parser)
        parser.parse_args(rest)  # only the shared options are accepted
        started = time.perf_counter()
        with common.ray_session():
            for bench in BENCHMARKS:
                common.step(f"=== {bench} ===")
                common.run_benchmark(bench, importlib.import_module(BENCHMARKS[bench]), rest)
        print(f"\nall benchmarks: {time.perf_counter() - started:.0f} s")
        return 0
    if name not in BENCHMARKS:
        print(f"unknown benchmark {name!r}; choose one of: {names}, all", file=sys.stderr)
        return 2
    common.run_benchmark(name, importlib.import_module(BENCHMARKS[name]), rest)
    return 0


if __name__ == "__main__":
    sys.exit(main())
