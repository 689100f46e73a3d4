"""`python -m benchmarks sim --schedules N`: the deterministic replication simulator over many seeds.

Each schedule runs the real replica, replicated-log, election, repair, truncation, compaction and storage
code under overlapping random faults (tests/replication/sim_run.py) and checks it; a failing seed prints
its violations and the command that replays it. Progress, schedules/s and violations are reported as it
goes, and the totals are written to benchmarks/results/sim.json.
"""

from __future__ import annotations

import argparse
import json
import sys
import time

from benchmarks import long_runs

sys.path.insert(0, str(long_runs.ROOT / "tests" / "replication"))

from sim_run import run_schedule


def run_seeds(first: int, count: int, progress_every: int = 100, out=print) -> dict:
    """Run `count` schedules from seed `first`; the totals (and the failing seeds)."""
    started = time.perf_counter()
    failing: list[int] = []
    acks = reads = faults = 0
    cpu = 0.0
    for i, seed in enumerate(range(first, first + count), 1):
        result = run_schedule(seed)
        acks, reads, faults = acks + result.acks, reads + result.reads, faults + result.faults
        cpu += result.cpu_seconds
        if not result.ok:
            failing.append(seed)
            out(result.report())
        if i % progress_every == 0 or i == count:
            elapsed = time.perf_counter() - started
            out(f"{i} schedules (seeds {first}..{seed}) in {elapsed:.0f} s: {i / elapsed:.1f} schedules/s "
                f"({i / cpu:.1f} per CPU second), {len(failing)} violating, {acks} acks, {reads} reads, "
                f"{faults} faults")
    elapsed = time.perf_counter() - started
    return {"first_seed": first, "schedules": count, "violating_seeds": failing, "seconds": round(elapsed, 1),
            "schedules_per_s": round(count / elapsed, 2),
            "schedules_per_cpu_s": round(count / cpu, 2), "acks": acks, "reads": reads, "faults": faults}


def main(argv: list[str] | None = None) -> None:
    """Run the simulator over many seeds and report."""
    parser = argparse.ArgumentParser(prog="python -m benchmarks sim", description=__doc__)
    parser.add_argument("--schedules", type=int, default=1000)
    parser.add_argument("--first-seed", type=int, default=0)
    parser.add_argument("--progress-every", type=int, default=100)
    args = parser.parse_args(argv)
    totals = run_seeds(args.first_seed, args.schedules, args.progress_every, out=lambda s: print(s, flush=True))
    print(json.dumps(totals))
    results = long_runs.ROOT / "benchmarks" / "results"
    results.mkdir(exist_ok=True)
    (results / "sim.json").write_text(json.dumps(totals, indent=2) + "\n")
