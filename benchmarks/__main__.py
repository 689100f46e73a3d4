"""`python -m benchmarks NAME [options]` runs one load benchmark; `python -m benchmarks all` runs them all.

Each prints its tables (with the machine) and writes benchmarks/results/NAME.json. `--quick`
shrinks every size; `python -m benchmarks NAME --help` lists a benchmark's options.
"""

from __future__ import annotations

import argparse
import importlib
import logging
import os
import sys
import time

from benchmarks import common

log = logging.getLogger(__name__)

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
    "listing": "benchmarks.bench_listing",
}
# Runnable by name too, but not part of `all` (their own options and sizes).
OTHERS = {
    "storage": "benchmarks.bench_storage",
    "spark": "benchmarks.bench_spark",
    "replication": "benchmarks.bench_replication",  # a ray.cluster_utils.Cluster of its own
    "replication-chaos": "benchmarks.replication_chaos",  # the long run: >= 30 node losses
    "sim": "benchmarks.bench_sim",  # the deterministic replication simulator over many seeds
    "sim-mutations": "benchmarks.sim_mutations",  # each deliberate break must be caught by the simulator
    "instructions": "benchmarks.instructions",  # the regression guard's counts; --update writes the baseline
    "docs": "benchmarks.docs_tables",  # docs/benchmarks.md's figures from benchmarks/results/*.json
    "test-mutations": "benchmarks.mutations",  # deliberate breaks of the product, each caught by a test
    "security": "benchmarks.bench_security",  # commits/s with authorization on vs off
    "kafka-wire": "benchmarks.bench_kafka_wire",  # confluent-kafka (a test dependency) through the Kafka listener
    "conformance": "benchmarks.kafka.conformance",  # differential: Kafka 4.4 against another target
    "vs-kafka": "benchmarks.kafka.vs_kafka",  # the same load against Kafka 4.4 and groupcoord
}


def run_one(bench: str, argv: list[str]) -> dict:
    """Run one benchmark of `all`; one that fails is a row marked failed with its reason, and the run goes on."""
    started = time.perf_counter()
    try:
        common.run_benchmark(bench, importlib.import_module(BENCHMARKS[bench]), argv)
    except (Exception, SystemExit) as e:  # SystemExit: a bad option, or Ray ending a call at shutdown
        reason = f"{type(e).__name__}: {str(e).strip().splitlines()[-1] if str(e).strip() else ''}"[:300]
        log.error("benchmark %s failed: %s", bench, reason, exc_info=e)
        common.write_failure(bench, argv, reason, time.perf_counter() - started)
        return {"benchmark": bench, "seconds": time.perf_counter() - started, "result": f"FAILED: {reason}",
                "failed": True}
    return {"benchmark": bench, "seconds": time.perf_counter() - started, "result": "ok", "failed": False}


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
        status = importlib.import_module(OTHERS[name]).main(rest)
        return status if isinstance(status, int) else 0
    if name == "all":
        parser = argparse.ArgumentParser(prog="python -m benchmarks all")
        common.add_common_arguments(parser)
        shared = parser.parse_args(rest)  # only the shared options are accepted
        started = time.perf_counter()
        started_at, load_at_start = time.strftime("%Y-%m-%d %H:%M UTC", time.gmtime()), list(os.getloadavg())
        rows = []
        # Each benchmark in a Ray of its own (unless one runs already, as in the tests): a failure that
        # took Ray down with it does not fail the benchmarks after it.
        for bench in BENCHMARKS:
            common.step(f"=== {bench} ===")
            if not shared.tiny:  # each starts on a quiet machine, not in the last one's processes ending
                quiet = common.wait_quiet()
                common.step(f"  the machine quiet after {quiet['waited_s']} s (busy {quiet['busy']:.0%})")
            rows.append(run_one(bench, rest))
        common.print_table(f"all benchmarks: {time.perf_counter() - started:.0f} s", ["benchmark", "seconds", "result"],
                           [[r["benchmark"], f"{r['seconds']:.0f}", r["result"]] for r in rows])
        common.write_summary(rows, time.perf_counter() - started, started_at, load_at_start)
        return 0
    if name not in BENCHMARKS:
        print(f"unknown benchmark {name!r}; choose one of: {names}, all", file=sys.stderr)
        return 2
    common.run_benchmark(name, importlib.import_module(BENCHMARKS[name]), rest)
    return 0


if __name__ == "__main__":
    sys.exit(main())
