"""`python -m benchmarks sim --schedules N [--workers W]`: the deterministic replication simulator over many seeds.

Each schedule runs the real replica, replicated-log, election, repair, truncation, compaction and storage
code under overlapping random faults (tests/replication/sim_run.py) and checks it; a failing seed prints
its violations and the command that replays it, at once. Seeds run in chunks in W worker processes, handed
out in order and counted in order, so the schedules counted are always seeds first..last with none missing.
A progress line (rate, ETA) comes every --progress-every schedules, and benchmarks/results/sim.json is
rewritten with it: a run that is stopped (SIGTERM, Ctrl-C) leaves its true partial counts, marked so.
"""

from __future__ import annotations

import argparse
import json
import multiprocessing
import os
import platform
import signal
import sys
import time
from pathlib import Path
from typing import Callable, Iterator

from benchmarks import long_runs

SIM_DIR = long_runs.ROOT / "tests" / "replication"
RESULTS = long_runs.ROOT / "benchmarks" / "results" / "sim.json"
CHUNK = 50  # seeds per task handed to a worker


_stopping = False  # set by SIGTERM/SIGINT: the schedule running finishes, then the run stops and writes its counts


def _run_chunk(first: int, count: int) -> dict:
    """Run seeds first..first+count-1 in this process (fewer if the run is stopped: `count` says how many); their
    totals and the reports of the failing ones."""
    if str(SIM_DIR) not in sys.path:
        sys.path.insert(0, str(SIM_DIR))
    from sim_run import run_schedule

    totals: dict = {"first": first, "count": 0, "failing": [], "reports": [], "acks": 0, "reads": 0,
                    "faults": 0, "cpu": 0.0, "sim_seconds": 0.0}
    for seed in range(first, first + count):
        if _stopping:
            break
        result = run_schedule(seed)
        totals["count"] += 1
        totals["acks"] += result.acks
        totals["reads"] += result.reads
        totals["faults"] += result.faults
        totals["cpu"] += result.cpu_seconds
        totals["sim_seconds"] += result.sim_seconds
        if not result.ok:
            totals["failing"].append(seed)
            totals["reports"].append(result.report())
    return totals


def _chunk_args(first: int, count: int) -> list[tuple[int, int]]:
    return [(s, min(CHUNK, first + count - s)) for s in range(first, first + count, CHUNK)]


def _star_chunk(args: tuple[int, int]) -> dict:
    return _run_chunk(*args)


def machine() -> dict:
    """Where the run ran: cores, CPU, Python, the platform and this process's niceness."""
    from benchmarks.common import cpu_model

    return {"cores": os.cpu_count(), "cpu": cpu_model(), "python": platform.python_version(),
            "platform": platform.platform(), "nice": os.nice(0)}


class Run:
    """The totals of a run so far, in seed order, and the results file they are written to."""

    def __init__(self, first: int, target: int, workers: int, results: Path, out: Callable[[str], None]) -> None:
        self.first, self.target, self.workers, self.results, self.out = first, target, workers, results, out
        self.done = 0
        self.failing: list[int] = []
        self.acks = self.reads = self.faults = 0
        self.cpu = self.sim_seconds = 0.0
        self.started = time.perf_counter()
        self.started_at = time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime())
        self.load_start = list(os.getloadavg())
        self.machine = machine()

    def add(self, chunk: dict) -> None:
        for report in chunk["reports"]:
            self.out(report)
        self.done += chunk["count"]
        self.failing += chunk["failing"]
        self.acks += chunk["acks"]
        self.reads += chunk["reads"]
        self.faults += chunk["faults"]
        self.cpu += chunk["cpu"]
        self.sim_seconds += chunk["sim_seconds"]

    def progress(self) -> None:
        elapsed = time.perf_counter() - self.started
        rate = self.done / elapsed if elapsed > 0 else 0.0
        eta = (self.target - self.done) / rate if rate > 0 else float("inf")
        load = ", ".join(f"{x:.1f}" for x in os.getloadavg())
        self.out(f"{time.strftime('%H:%M:%S')} {self.done:,}/{self.target:,} schedules (seeds {self.first}.."
                 f"{self.first + self.done - 1}) in {elapsed:,.0f} s: {rate:.1f} schedules/s "
                 f"({self.done / self.cpu if self.cpu else 0:.1f} per CPU second), ETA {eta / 60:,.0f} min; "
                 f"{len(self.failing)} violating; {self.acks:,} acks, {self.reads:,} reads, {self.faults:,} faults; "
                 f"load {load}")
        self.write()

    def totals(self) -> dict:
        elapsed = time.perf_counter() - self.started
        return {
            "schedules": self.done,
            "target_schedules": self.target,
            "complete": self.done >= self.target,
            "violations": len(self.failing),
            "violating_seeds": self.failing,
            "first_seed": self.first,
            "last_seed": self.first + self.done - 1,
            "seconds": round(elapsed, 1),
            "schedules_per_s": round(self.done / elapsed, 2) if elapsed else 0.0,
            "schedules_per_cpu_s": round(self.done / self.cpu, 2) if self.cpu else 0.0,
            "workers": self.workers,
            "acks": self.acks, "reads": self.reads, "faults": self.faults,
            "simulated_seconds": round(self.sim_seconds, 1),
            "started_at": self.started_at,
            "ended_at": time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime()),
            "machine": self.machine,
            "load": {"start": self.load_start, "end": list(os.getloadavg())},
        }

    def write(self) -> None:
        self.results.parent.mkdir(parents=True, exist_ok=True)
        tmp = self.results.with_name(self.results.name + ".tmp")
        tmp.write_text(json.dumps(self.totals(), indent=2) + "\n")
        tmp.replace(self.results)


def _stop(signum: int, frame: object) -> None:
    # A flag, not an exception: raised in the middle of a schedule, an exception can land in a callback whose
    # errors are ignored (a weakref's), and the run would go on.
    global _stopping
    _stopping = True


def _ignore_interrupts() -> None:
    signal.signal(signal.SIGINT, signal.SIG_IGN)  # Ctrl-C reaches the whole group: the parent handles it


def _until_stopped(results: Iterator[dict]) -> Iterator[dict]:
    """The workers' chunk results in order, until a signal stops the run."""
    while not _stopping:
        try:
            yield results.next(timeout=1.0)  # type: ignore[attr-defined]
        except multiprocessing.TimeoutError:
            continue
        except StopIteration:
            return


def run_seeds(first: int, count: int, workers: int = 1, progress_every: int = 10_000,
              out: Callable[[str], None] = print, results: Path = RESULTS) -> dict:
    """Run `count` schedules from seed `first` in `workers` processes; the totals (written to `results` as it goes).

    Stopped early (SIGTERM or Ctrl-C), it writes and returns the schedules finished so far (`complete` false).
    """
    run = Run(first, count, workers, results, out)
    chunks = _chunk_args(first, count)
    next_progress = min(progress_every, count)
    global _stopping
    _stopping = False
    previous = {sig: signal.signal(sig, _stop) for sig in (signal.SIGTERM, signal.SIGINT)}
    pool = None
    try:
        if workers <= 1:
            results_iter = map(_star_chunk, chunks)
        else:
            # The parent stops taking chunks on a signal and ends the workers (pool.terminate).
            pool = multiprocessing.get_context("spawn").Pool(workers, initializer=_ignore_interrupts)
            results_iter = _until_stopped(pool.imap(_star_chunk, chunks))  # in seed order: the count has no gaps
        for chunk in results_iter:
            run.add(chunk)
            if run.done >= next_progress:
                run.progress()
                next_progress = min(count, (run.done // progress_every + 1) * progress_every)
            if _stopping:
                break
        if _stopping:
            out("stopped by a signal; the counts are of the schedules that finished")
    finally:
        for sig, handler in previous.items():
            signal.signal(sig, handler)
        if pool is not None:
            pool.terminate()
            pool.join()
        run.write()
    return run.totals()


def main(argv: list[str] | None = None) -> int:
    """Run the simulator over many seeds and report; 1 if any schedule violated a property."""
    parser = argparse.ArgumentParser(prog="python -m benchmarks sim", description=__doc__,
                                     formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--schedules", type=int, default=1000)
    parser.add_argument("--first-seed", type=int, default=0)
    parser.add_argument("--workers", type=int, default=1, help="worker processes (default 1)")
    parser.add_argument("--progress-every", type=int, default=10_000, help="schedules between progress lines")
    parser.add_argument("--json", type=Path, default=RESULTS, help=f"results file (default {RESULTS})")
    args = parser.parse_args(argv)
    out = lambda s: print(s, flush=True)  # noqa: E731
    out(f"{args.schedules:,} schedules from seed {args.first_seed} in {args.workers} worker(s); "
        f"load {', '.join(f'{x:.1f}' for x in os.getloadavg())}")
    totals = run_seeds(args.first_seed, args.schedules, args.workers, args.progress_every, out, args.json)
    out(json.dumps({k: v for k, v in totals.items() if k not in ("machine",)}))
    return 1 if totals["violations"] else 0
