"""The regression guard: the hot paths' CPU instructions (valgrind's callgrind) within 15% of the committed baseline.

Instruction counts do not move with the machine's load, so this is a timing check that belongs in
the suite. A count that moved on purpose is re-baselined with `python -m benchmarks instructions
--update` and committed with a message that says why.
"""

from __future__ import annotations

import platform
import sys
from pathlib import Path

import pytest

REPO_ROOT = Path(__file__).resolve().parents[2]
if str(REPO_ROOT) not in sys.path:
    sys.path.insert(0, str(REPO_ROOT))

from benchmarks import instruction_workloads, instructions  # noqa: E402

pytestmark = pytest.mark.timeout(900)  # ~17 s of CPU in two processes; a loaded machine stretches the wall time


def test_hot_paths_stay_within_their_instruction_baseline():
    baseline = instructions.load_baseline()
    assert set(baseline["instructions"]) == set(instruction_workloads.WORKLOADS)
    rows = instructions.compare(instructions.measure(), baseline)
    out = [f"{r['workload']}: {r['instructions']:,} vs {r['baseline']:,} ({r['change']:+.1%})" for r in rows
           if not r["ok"]]
    assert not out, ("instruction counts moved by more than 15% (slower: a regression; faster: re-baseline with "
                     "`python -m benchmarks instructions --update` and commit why): " + "; ".join(out))


def test_compare_flags_a_change_past_the_tolerance():
    baseline = {"instructions": {"a": 1000, "b": 1000, "c": 1000}}
    rows = {r["workload"]: r for r in instructions.compare({"a": 1149, "b": 1151, "c": 849}, baseline)}
    assert rows["a"]["ok"] and not rows["b"]["ok"] and not rows["c"]["ok"]
    assert not instructions.compare({"new": 5}, baseline)[0]["ok"]  # a workload without a baseline fails


def test_client_requests_do_nothing_outside_valgrind():
    # The stub that turns callgrind's instrumentation on and off must be a no-op natively (result 0). Elsewhere than
    # x86-64 there is no stub, and the guard instruments from the start.
    works = instruction_workloads.client_requests_work()
    assert works == (platform.machine() in ("x86_64", "AMD64"))
    if not works:
        return
    assert instruction_workloads.client_request(instruction_workloads._START_INSTRUMENTATION) == 0
    assert instruction_workloads.client_request(instruction_workloads._STOP_INSTRUMENTATION) == 0


def test_a_dump_counts_its_totals_not_its_summary(tmp_path):
    # After instrumentation was stopped and started again, callgrind's summary line of a dump is wrong.
    dump = tmp_path / "callgrind.out.2"
    dump.write_text("events: Ir\nsummary: 18446744073662214197\nfn=(1) x\n0 91244115\ntotals: 91244115\n")
    assert instructions._total(str(dump)) == 91244115
