"""The deterministic replication simulator in the suite: 2,000 schedules under overlapping faults hold every property
(see sim_checker), a seed replays exactly, and the checker catches a deliberate break. The long run over many more
seeds is `python -m benchmarks sim`.

A failing schedule's report carries its violations, its trace and the command that replays it.
"""

from __future__ import annotations

import itertools
import multiprocessing
import os
import time

import pytest
from sim_run import run_schedule

SCHEDULES = int(os.environ.get("GROUPCOORD_SIM_SCHEDULES", "2000"))
CHUNK = 50


def _chunk(first: int) -> tuple[int, list[str]]:
    failures = []
    ran = 0
    for seed in range(first, min(first + CHUNK, SCHEDULES)):
        result = run_schedule(seed)
        ran += 1
        if not result.ok:
            failures.append(result.report())
    return ran, failures


@pytest.mark.timeout(900)  # about 35 s on two free cores; a loaded machine needs more
def test_every_schedule_keeps_acknowledged_commits_and_agrees_below_the_watermark():
    workers = max(1, min(2, os.cpu_count() or 1))
    # Spawned workers: this process may hold a Ray client, which must not be forked.
    with multiprocessing.get_context("spawn").Pool(workers) as pool:
        # One chunk per task: a worker slowed by the machine's load leaves at most one chunk for the other to wait on.
        results = pool.map(_chunk, range(0, SCHEDULES, CHUNK), chunksize=1)
    ran = sum(r for r, _ in results)
    failures = [f for _, fs in results for f in fs]
    assert ran == SCHEDULES
    assert not failures, "\n\n".join(failures[:3])


def _history(result) -> tuple:
    return result.trace, result.acks, result.reads, result.faults, result.sim_seconds, result.stats["committed"]


def test_a_seed_replays_exactly():
    first, second = run_schedule(7), run_schedule(7)
    assert first.trace and first.stats["committed_records"] > 0
    assert _history(first) == _history(second)


def test_a_seed_replays_exactly_however_slow_the_machine(monkeypatch):
    # The machine's monotonic clock jumps a second at every read, as on a machine so busy that the simulator is
    # descheduled between any two steps: a run must not depend on it. (The leader's loop-lag probe read it, which
    # moved coordinator time and throttle_time_ms with the machine's load; nothing the clients do here depended on
    # those, so this guards against the next such read more than it shows that one.)
    first = run_schedule(7)
    ticks = itertools.count()
    monkeypatch.setattr(time, "monotonic", lambda: float(next(ticks)))
    assert _history(run_schedule(7)) == _history(first)
