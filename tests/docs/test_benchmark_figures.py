"""docs/benchmarks.md's figures are generated from benchmarks/results/*.json, never edited by hand."""

from __future__ import annotations

import json
import shutil

from benchmarks import bench_memory, docs_tables


def test_the_benchmark_page_shows_exactly_what_the_results_give():
    assert docs_tables.main(["--check"]) == 0, "run `python -m benchmarks docs` after a benchmark run"


def test_a_report_renders_its_tables_and_verdicts(tmp_path):
    doc = {"benchmark": "commits", "seconds": 12.0, "options": {"quick": True},
           "machine": {"cores": 2, "cpu": "cpu", "python": "3.11", "ray": "2.60", "loadavg": [1.0, 2.0, 3.0]},
           "report": [{"table": "commits/s", "headers": ["clients", "rate"], "rows": [["64", "59.1k"]]},
                      {"target": ">= 80% of in-process", "measured": "65%", "met": False}]}
    text = docs_tables.render_result(doc)
    assert "| clients | rate |" in text and "| 64 | 59.1k |" in text
    assert "quick size" in text and "load average 1.0, 2.0, 3.0" in text
    assert "(**MISSED**)" in text


def test_the_stored_verdicts_are_those_of_todays_targets(tmp_path):
    from benchmarks.__main__ import BENCHMARKS

    for name in BENCHMARKS:
        if (docs_tables.RESULTS_DIR / f"{name}.json").exists():
            shutil.copy(docs_tables.RESULTS_DIR / f"{name}.json", tmp_path / f"{name}.json")
    assert docs_tables.rejudge(BENCHMARKS, tmp_path) == [], "run `python -m benchmarks docs --rejudge`"


def test_rejudging_holds_the_stored_figures_against_the_targets_of_today(tmp_path, monkeypatch):
    shutil.copy(docs_tables.RESULTS_DIR / "memory.json", tmp_path / "memory.json")
    stored = json.loads((tmp_path / "memory.json").read_text())
    modules = {"memory": "benchmarks.bench_memory"}
    monkeypatch.setattr(bench_memory, "TARGET_MEMBER", 10 ** 6)
    assert docs_tables.rejudge(modules, tmp_path) == ["memory"]
    doc = json.loads((tmp_path / "memory.json").read_text())
    assert doc["results"] == stored["results"] and doc["finished"] == stored["finished"]  # the same run
    verdict = [t for t in doc["report"] if t.get("target", "").endswith("bytes per member")]
    assert [t["target"] for t in verdict] == ["<= 1,000,000 bytes per member"] and verdict[0]["met"]
    assert "judged again on" in docs_tables.render_result(doc)
