"""`groupcoord analyze` end to end, in its own process: its own local Ray and Spark, tables and a plot."""

from __future__ import annotations

import re
import subprocess
import sys
from pathlib import Path

from spark_history import NOW, write_history


def test_analyze_prints_every_report_and_draws_the_plot(tmp_path):
    root = write_history(tmp_path / "storage")
    plot = tmp_path / "activity.png"
    cli = Path(sys.executable).with_name("groupcoord")
    result = subprocess.run(
        [str(cli), "analyze", "--storage", str(root), "--now-ms", str(NOW), "--plot", str(plot)],
        capture_output=True,
        text=True,
        timeout=600,
    )
    assert result.returncode == 0, result.stderr[-3000:]
    out = result.stdout
    for title in (
        "Committed offsets",
        "Consumer status per partition",
        "Consumer status per group",
        "Lag",
        "Rebalances",
        "Generations",
    ):
        assert title in out, out
    for status in ("STALL", "STOP", "REWIND", "WARN", "ERR"):
        assert status in out
    assert plot.stat().st_size > 10_000 and plot.read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"
    # Quiet by default: none of Ray's, Spark's or the JVM's own log lines reach the terminal.
    noise = [
        line
        for line in (result.stdout + result.stderr).splitlines()
        if re.search(r"ERROR|\bINFO\b|\bWARN(ING)?\b|gcs_client|log4j", line)
    ]
    assert not noise, noise


def test_analyze_of_a_missing_storage_root_is_a_one_line_error(tmp_path):
    cli = Path(sys.executable).with_name("groupcoord")
    result = subprocess.run(
        [str(cli), "analyze", "--storage", str(tmp_path / "nope")], capture_output=True, text=True, timeout=120
    )
    assert result.returncode == 2 and "does not exist" in result.stderr and "Traceback" not in result.stderr
