"""docs/benchmarks.md's figures are generated from benchmarks/results/*.json, never edited by hand."""

from __future__ import annotations

from benchmarks import docs_tables


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
