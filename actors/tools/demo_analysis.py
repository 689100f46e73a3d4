"""The demo's last act: Spark, running inside the demo's Ray cluster through RayDP, analyses what the demo committed.

It exports the partition logs into the offsets history, runs the reports on it (Burrow status per
partition and per group, lag, commit rate, rebalance history), draws the plot, and checks the
reports against what the demo saw acknowledged.
"""

from __future__ import annotations

import tempfile
import time
from pathlib import Path
from typing import Callable, Sequence

from groupcoord.protocol import TopicPartition

from .cli_support import print_table
from .quiet import is_verbose

REPORTS = ("partition_status", "group_status", "commits", "lag", "rebalances")
# The demo's output fits this many columns; `groupcoord analyze` shows every column.
DEMO_WIDTH = 120
# What the demo leaves out, in this order, of a report wider than DEMO_WIDTH (the lists of Burrow's window first).
OPTIONAL_COLUMNS = (
    "window_offsets", "window_lags", "recent_end_offsets", "window_start_ms", "window_commits",  # partitions
    "max_lag_topic", "max_lag_partition", "worst_partition_status",  # groups
    "first_commit_ms", "last_commit_ms",  # commits (the age of the last one stays)
    "first_seen_ms", "current_generation_since_ms",  # rebalances
)


def analyse_demo_run(
    storage_path: str,
    history_path: str,
    plot_path: str,
    group: str,
    acked: dict[TopicPartition, int],
    say: Callable[[str], None],
    events: Sequence[tuple[int, str]] = (),
) -> list[str]:
    """Export, analyse with Spark on Ray and print the reports; the problems found (empty when all agree).

    `events` (time in ms, kind), such as the coordinator restart, are marked on the plot beside the rebalances.
    """
    from groupcoord.spark import SparkOptions, start_spark, stop_spark
    from groupcoord.spark.analyze import analyze
    from groupcoord.spark.history import export_history

    exported = export_history(storage_path, history_path)
    say(f"6. the offsets history: {exported.total_rows} rows exported to Parquet at {history_path}")
    say("   starting Spark inside this Ray cluster (RayDP: its executors are Ray actors)")
    started = time.monotonic()
    spark = start_spark(SparkOptions(quiet=not is_verbose()))
    try:
        say(f"   Spark {spark.version} is up after {time.monotonic() - started:.1f}s; analysing the history")
        analysis = analyze(spark, storage_path, history=history_path, groups=[group], progress=None)
        for report in analysis.render(REPORTS, limit=20).values():
            print_table(report.title, report.columns, report.rows, width=DEMO_WIDTH, optional=OPTIONAL_COLUMNS)
        analysis.plot(plot_path, events=events)
        say(f"   plot of commit rate and lag, rebalances and the coordinator restart marked: {plot_path}")
        committed = {
            TopicPartition(r["topic"], r["partition"]): r["committed_offset"]
            for r in analysis.commit_summary.where(f"`group` = '{group}'").collect()
        }
        statuses = {
            TopicPartition(r["topic"], r["partition"]): r["status"]
            for r in analysis.partition_status.where(f"`group` = '{group}'").collect()
        }
        group_status = [r["status"] for r in analysis.group_status.collect() if r["group"] == group]
        analysis.loaded.release()
    finally:
        stop_spark()
    return _check(acked, committed, statuses, group_status)


def _check(
    acked: dict[TopicPartition, int],
    committed: dict[TopicPartition, int],
    statuses: dict[TopicPartition, str],
    group_status: list[str],
) -> list[str]:
    """What the reports got wrong about the run: every acknowledged offset, every partition OK, the group OK."""
    problems = []
    wrong = {tp: (off, committed.get(tp)) for tp, off in acked.items() if committed.get(tp) != off}
    if wrong:
        problems.append(f"the reports' committed offsets differ from the last acknowledged ones: {wrong}")
    not_ok = {tp: s for tp, s in statuses.items() if s != "OK"}
    if not_ok or set(statuses) != set(acked):
        problems.append(f"Burrow status is not OK for every partition the demo consumed: {statuses}")
    if group_status != ["OK"]:
        problems.append(f"the group's status is {group_status}, not OK")
    return problems


def keep_paths(keep_dir: str | None, storage_path: str) -> tuple[str, str]:
    """Where the history and the plot go: in the kept directory, else beside the storage and in the temp dir."""
    if keep_dir is not None:
        return str(Path(keep_dir) / "history"), str(Path(keep_dir) / "groupcoord-demo.png")
    return str(Path(storage_path).parent / "history"), str(Path(tempfile.gettempdir()) / "groupcoord-demo.png")
