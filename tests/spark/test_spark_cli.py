"""`groupcoord export` and `groupcoord analyze` end to end, each in its own process (own Ray and Spark)."""

from __future__ import annotations

import os
import re
import subprocess
import sys
from pathlib import Path

from spark_history import NOW, write_history

# A Ray of the CLI's own: without an address it would join the newest cluster on this machine (Ray's default),
# which may be another test's (or another pytest worker's) cluster in the middle of losing nodes.
ENV = {**os.environ, "RAY_ADDRESS": "local"}

# What a line of Ray's, Spark's or the JVM's own logging looks like (a report's WARN status is not one).
LOG_LINE = (
    r"^\[?\d{4}-\d\d-\d\d[ T]\d|^\d\d/\d\d/\d\d \d|\((raylet|pid=\d+)|RayDP\w*|gcs_client"
    r"|log4j|StatusConsoleListener|^(ERROR|WARN|INFO)\b|\bINFO\b.*--|default log level"
)


def test_export_then_analyze_the_history_with_a_time_range_and_an_allowed_lag(tmp_path):
    root = write_history(tmp_path / "storage")
    history = tmp_path / "history"
    cli = Path(sys.executable).with_name("groupcoord")
    exported = subprocess.run([str(cli), "export", "--storage", str(root), "--history", str(history)],
                              capture_output=True, text=True, timeout=120, env=ENV)
    assert exported.returncode == 0, exported.stderr[-3000:]
    assert "184 rows in 4 files" in exported.stdout and (history / "_checkpoints").is_dir()
    plot = tmp_path / "activity.png"
    result = subprocess.run(
        [str(cli), "analyze", "--storage", str(root), "--history", str(history), "--since", "2023-11-14T22:13:20",
         "--until", str(NOW), "--allowed-lag", "100", "--group", "alpha", "--group", "nobody", "--plot", str(plot),
         "--spark-conf", "spark.sql.shuffle.partitions=1"],
        capture_output=True,
        text=True,
        timeout=600,
        env=ENV,
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
    for status in ("STALL", "STOP", "REWIND", "WARN", "ERR", "NOTFOUND"):
        assert status in out
    assert plot.stat().st_size > 10_000 and plot.read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"
    # Quiet by default: none of Ray's, Spark's or the JVM's own log lines reach the terminal. A Burrow
    # status standing as a table cell (two spaces either side, e.g. WARN) is the report, not a log line.
    noise = [
        line
        for line in (exported.stdout + exported.stderr + result.stdout + result.stderr).splitlines()
        if re.search(LOG_LINE, line)
    ]
    assert not noise, noise


def test_analyze_of_a_missing_storage_root_is_a_one_line_error(tmp_path):
    cli = Path(sys.executable).with_name("groupcoord")
    result = subprocess.run(
        [str(cli), "analyze", "--storage", str(tmp_path / "nope")], capture_output=True, text=True, timeout=120,
        env=ENV,
    )
    assert result.returncode == 2 and "does not exist" in result.stderr and "Traceback" not in result.stderr
