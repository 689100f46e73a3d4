"""`python -m benchmarks sim`: a few schedules, in this process and in two workers, count every seed once, in order,
report progress, and write the results file that a stopped run leaves too."""

from __future__ import annotations

import json
import sys
from pathlib import Path

REPO_ROOT = Path(__file__).resolve().parents[2]
if str(REPO_ROOT) not in sys.path:
    sys.path.insert(0, str(REPO_ROOT))

from benchmarks import bench_sim  # noqa: E402


def test_a_run_counts_its_seeds_in_order_and_writes_them(tmp_path, monkeypatch):
    monkeypatch.setattr(bench_sim, "CHUNK", 1)  # progress is reported as chunks complete
    lines: list[str] = []
    totals = bench_sim.run_seeds(5, 3, workers=1, progress_every=2, out=lines.append, results=tmp_path / "sim.json")
    written = json.loads((tmp_path / "sim.json").read_text())
    assert written["schedules"] == totals["schedules"] == 3 and written["complete"]
    assert (written["first_seed"], written["last_seed"]) == (5, 7)
    assert written["violations"] == 0 and written["acks"] > 0
    assert {"machine", "load", "seconds", "schedules_per_s"} <= written.keys()
    progress = [line for line in lines if "schedules (seeds" in line]
    assert len(progress) == 2 and "ETA" in progress[0] and "2/3" in progress[0] and "3/3" in progress[1]


def test_workers_count_the_same_schedules_as_one_process(tmp_path, monkeypatch):
    monkeypatch.setattr(bench_sim, "CHUNK", 2)  # three chunks over two workers, taken back in seed order
    one = bench_sim.run_seeds(0, 5, workers=1, out=lambda s: None, results=tmp_path / "one.json")
    two = bench_sim.run_seeds(0, 5, workers=2, out=lambda s: None, results=tmp_path / "two.json")
    keys = ("schedules", "last_seed", "violations", "acks", "reads", "faults", "simulated_seconds")
    assert [one[k] for k in keys] == [two[k] for k in keys]
