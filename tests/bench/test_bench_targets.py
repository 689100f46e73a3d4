"""The benchmarks judge issue 30's goals from their measurements: more partition actors than cores that
commit less are a miss, coalesced calls are held against the in-process shard, and a big log's restart
is held against the same run's empty-log restart (Ray's floor)."""

from __future__ import annotations

import sys
from pathlib import Path

import pytest

REPO_ROOT = Path(__file__).resolve().parents[2]
if str(REPO_ROOT) not in sys.path:
    sys.path.insert(0, str(REPO_ROOT))

from benchmarks import bench_commits, bench_recovery, common  # noqa: E402


@pytest.fixture
def verdicts(capsys):
    """The targets a report printed, as {goal: met}."""
    common.REPORT.clear()

    def read() -> dict[str, bool]:
        capsys.readouterr()
        return {t["target"]: t["met"] for t in common.REPORT if "target" in t}

    yield read
    common.REPORT.clear()


def _rate(v: float) -> dict:
    return {"commits_per_s": {"median": v}}


def _commit_results(by_partitions: dict[int, float], coalesced_one: float, in_process: float) -> dict:
    cells = [{"partitions": p, "clients": 64, "per_commit": 100, "coalesced": False, "actor": _rate(v),
              "local": _rate(in_process) if p == 1 else None} for p, v in by_partitions.items()]
    cells.append({"partitions": 1, "clients": 64, "per_commit": 100, "coalesced": True, "actor": _rate(coalesced_one),
                  "local": _rate(in_process / 3)})  # a low baseline in one cell does not lower the bar
    return {"sizes": {"per_commit": [100], "clients": [64]}, "cells": cells, "machine": {"cores": 2}}


def test_sixteen_actors_committing_less_than_four_is_a_miss(verdicts):
    bench_commits._print_targets(_commit_results({1: 70_000, 4: 95_000, 16: 52_000}, 200_000, 250_000))
    got = verdicts()
    more = [met for goal, met in got.items() if goal.startswith("more partition actors than cores (2)")]
    assert more == [False]
    assert got["in-process shard >= 242,000 offsets/s with 100-partition commits (2x issue 30's 121,000)"]
    assert got["coalesced through Ray >= 80% of the in-process shard"]  # 200k of the best in-process 250k


def test_more_actors_that_commit_more_meet_the_goal_and_a_slow_coalesced_path_misses(verdicts):
    bench_commits._print_targets(_commit_results({1: 70_000, 4: 95_000, 16: 96_000}, 150_000, 200_000))
    got = verdicts()
    assert [met for goal, met in got.items() if goal.startswith("more partition actors")] == [True]
    assert not got["in-process shard >= 242,000 offsets/s with 100-partition commits (2x issue 30's 121,000)"]
    assert not got["coalesced through Ray >= 80% of the in-process shard"]  # 150k of 200k is 75%


def _summary(v: float) -> dict:
    return {"n": 1, "median": v, "min": v, "max": v}


def _recovery_row(restart_s: float, replay: float, raw_unpack: float) -> dict:
    return {"history_records": 1_000_000, "live": 1_000_000, "compacted": False, "log": {},
            "restart_s": _summary(restart_s), "load_s": _summary(0.3), "records_per_s": _summary(replay),
            "records_per_cpu_s": _summary(replay),
            "trials": [{"records": 1_000_000}], "vs_raw_records": 1.0, "vs_raw_records_cpu": 1.0,
            "baselines": {"raw_unpack": {"records_per_s": raw_unpack},
                          "raw_records": {"records_per_s": 1e6, "records_per_cpu_s": 1e6}}}


@pytest.mark.parametrize(("floor", "met"), [(1.6, True), (1.4, False), (None, False)])
def test_a_restart_is_judged_against_the_same_runs_floor(verdicts, floor, met):
    results = {"rows": [_recovery_row(2.0, 4e6, 3.9e6)]}
    if floor is not None:
        results["floor_s"] = _summary(floor)
    bench_recovery.report(results)
    got = verdicts()
    (restart,) = [m for goal, m in got.items() if goal.startswith("restart with 1,000,000 live offsets")]
    assert restart is met
    assert got["replay >= 3,000,000 records/s (logs of >= 50k records)"]
    assert got["replay >= the raw msgpack unpack of the same log"]


def test_replay_slower_than_the_raw_unpack_of_its_log_is_a_miss(verdicts):
    bench_recovery.report({"rows": [_recovery_row(2.0, 3.5e6, 4e6)], "floor_s": _summary(1.9)})
    got = verdicts()
    assert got["replay >= 3,000,000 records/s (logs of >= 50k records)"]
    assert not got["replay >= the raw msgpack unpack of the same log"]
