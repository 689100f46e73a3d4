"""Exhaustive power-loss run of the storage layer: every crash point of every scenario, many seeds, crashes in recovery.

Run from the repository root: `python -m benchmarks.powerloss` (about ten minutes on 2 cores).
The scenarios of tests/storage/crash_workloads (appends with group commit and segment rolls,
interval sync, compaction with its .cleaned/.swap steps, root metadata, topic registry) run at a
larger scale and with more record seeds than `make test`; each is cut before every one of its
file operations, the root reset to exactly what was durable and, for each of `--subsets` seeds,
to a random subset of the unsynced operations; then, for every crash point, the reopening itself
is cut before each of its operations and the plug pulled again. Every crash point checks the
invariant (every acknowledged record returned with its value or a later one, no CorruptLogError,
the log still appends). Prints a table of crash points and violations per scenario (and writes it
as JSON to --json PATH); exits non-zero if any crash point violated the invariant.
"""

from __future__ import annotations

import argparse
import json
import logging
import random
import sys
import tempfile
import time
from pathlib import Path

from benchmarks import long_runs

long_runs.use_test_helpers()
sys.path.insert(0, str(long_runs.ROOT / "tests" / "storage"))

from crash_workloads import all_workloads, count_operations, crash_at, crash_in_recovery  # noqa: E402


def run_scenario(workload, root: Path, subsets: int, recovery: bool, findings: list[str]) -> dict:
    """Every crash point of one scenario; returns its figures and appends violations to `findings`."""
    started = time.perf_counter()
    operations = count_operations(workload, root)
    figures = {"operations": operations, "crash_points": 0, "recovery_crash_points": 0, "violations": 0}
    for point in range(1, operations + 2):
        for seed in [None, *range(1, subsets + 1)]:
            rng = None if seed is None else random.Random(seed * 7919 + point)
            figures["crash_points"] += 1
            try:
                crash_at(workload, root, point, rng)
            except AssertionError as e:
                figures["violations"] += 1
                findings.append(str(e))
        recovery_point = 1
        while recovery:
            figures["recovery_crash_points"] += 1
            try:
                if not crash_in_recovery(workload, root, point, recovery_point, random.Random(point + recovery_point)):
                    figures["recovery_crash_points"] -= 1  # reopening made fewer operations: all covered
                    break
            except AssertionError as e:
                figures["violations"] += 1
                findings.append(str(e))
            recovery_point += 1
    figures["seconds"] = round(time.perf_counter() - started, 1)
    return figures


def main(argv: list[str] | None = None) -> int:
    """Run every scenario at every crash point; print and save the figures."""
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--json", default=None, help="write the figures to this file as JSON")
    p.add_argument("--seeds", type=int, default=4, help="record seeds per partition-log scenario")
    p.add_argument("--scale", type=int, default=2, help="batches per log scenario, in units of 12")
    p.add_argument("--subsets", type=int, default=3, help="random-subset seeds per crash point")
    p.add_argument("--no-recovery", action="store_true", help="skip the crashes during recovery")
    args = p.parse_args(argv)
    logging.disable(logging.CRITICAL)  # every crash point logs its recovery; the table says what matters
    findings: list[str] = []
    results = {}
    print(f"{'scenario':<34}{'ops':>6}{'crash points':>14}{'in recovery':>13}{'violations':>12}{'seconds':>9}")
    with tempfile.TemporaryDirectory(prefix="gc-powerloss-") as d:
        for workload in all_workloads(seeds=range(1, args.seeds + 1), scale=args.scale):
            f = run_scenario(workload, Path(d) / "w", args.subsets, not args.no_recovery, findings)
            results[workload.name] = f
            print(f"{workload.name:<34}{f['operations']:>6}{f['crash_points']:>14}{f['recovery_crash_points']:>13}"
                  f"{f['violations']:>12}{f['seconds']:>9}", flush=True)
    total = {k: sum(f[k] for f in results.values()) for k in ("crash_points", "recovery_crash_points", "violations")}
    print(f"total: {total['crash_points']} crash points, {total['recovery_crash_points']} more during recovery, "
          f"{total['violations']} violations")
    for finding in findings[:20]:
        print("VIOLATION:", finding)
    long_runs.write_json(args.json, {"args": vars(args), "scenarios": results, "total": total, "findings": findings})
    print(json.dumps(total))
    return 1 if findings else 0


if __name__ == "__main__":
    sys.exit(main())
