"""`python -m benchmarks sim-mutations`: does the simulator have teeth? Each deliberate break must be caught.

Every mutation below breaks one rule replication rests on, by monkeypatching the product code in this
process only (never in the code itself); the simulator then runs seeds from 0 until one violates a
property, up to `--max-seeds` (and `--budget-s` per mutation). The table says which seed caught each
break and with what violation; a break not caught is a hole in the simulator or its checker.
"""

from __future__ import annotations

import argparse
import json
import sys
import time

from benchmarks import long_runs

sys.path.insert(0, str(long_runs.ROOT / "tests" / "replication"))

from sim_mutants import MUTATIONS
from sim_run import FAULT_PHASE_S, run_schedule


def hunt(
    name: str, max_seeds: int, budget_s: float, first_seed: int = 0, fault_phase_s: float = FAULT_PHASE_S
) -> dict:
    """Run seeds under mutation `name` until one violates; what caught it (or how far it got)."""
    what, apply = MUTATIONS[name]
    started = time.perf_counter()
    with apply():
        for i, seed in enumerate(range(first_seed, first_seed + max_seeds), 1):
            result = run_schedule(seed, fault_phase_s=fault_phase_s)
            if not result.ok:
                return {"mutation": name, "breaks": what, "caught": True, "seed": seed, "schedules": i,
                        "fault_phase_s": fault_phase_s,
                        "seconds": round(time.perf_counter() - started, 1), "violation": result.violations[0]}
            if time.perf_counter() - started > budget_s:
                break
    return {"mutation": name, "breaks": what, "caught": False, "schedules": i, "fault_phase_s": fault_phase_s,
            "seconds": round(time.perf_counter() - started, 1)}


def main(argv: list[str] | None = None) -> None:
    """Hunt every mutation (or those named) and print the table."""
    parser = argparse.ArgumentParser(prog="python -m benchmarks sim-mutations", description=__doc__)
    parser.add_argument("names", nargs="*", default=list(MUTATIONS))
    parser.add_argument("--max-seeds", type=int, default=10_000)
    parser.add_argument("--budget-s", type=float, default=600.0)
    parser.add_argument("--first-seed", type=int, default=0, help="the seed to start the hunt from")
    parser.add_argument("--fault-phase-s", type=float, default=FAULT_PHASE_S,
                        help="simulated seconds of faults per schedule (longer: deeper histories of leaders)")
    parser.add_argument("--out", default="sim_mutations.json", help="file name under benchmarks/results")
    args = parser.parse_args(argv)
    rows = []
    for name in args.names:
        row = hunt(name, args.max_seeds, args.budget_s, args.first_seed, fault_phase_s=args.fault_phase_s)
        rows.append(row)
        verdict = f"caught by seed {row['seed']} ({row['schedules']} schedules, {row['seconds']} s): " \
                  f"{row['violation'][:160]}" if row["caught"] else \
                  f"NOT caught in {row['schedules']} schedules ({row['seconds']} s)"
        print(f"{name:32} {verdict}", flush=True)
    results = long_runs.ROOT / "benchmarks" / "results"
    results.mkdir(exist_ok=True)
    (results / args.out).write_text(json.dumps({"benchmark": "sim-mutations", "rows": rows}, indent=2) + "\n")
