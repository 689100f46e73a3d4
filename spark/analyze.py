"""The whole analysis in one call: read the history (or load the logs) into Spark, every report, render, plot.

`analyze` works with a running SparkSession; `run_analysis` starts Spark on Ray, analyses,
renders the reports as rows, optionally writes the plot, and stops Spark: it is what the
`groupcoord analyze` command calls.
"""

from __future__ import annotations

import logging
import time
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Iterable, Sequence

import pyarrow as pa

from . import burrow
from . import reports as report_frames
from .commit_buckets import shared_commit_buckets
from .end_offsets import EndOffsets, end_offset_samples, end_offsets_frame, registered_topics
from .history_read import HistoryFrames, history_frames
from .loader import LoadedLog, ProgressFn, load_history, log_progress, print_progress
from .plot import plot_report
from .render import Rendered, render_rows
from .schema import DEFAULT_WINDOW
from .session import SparkOptions, start_spark, stop_spark

log = logging.getLogger(__name__)

REPORT_TITLES = {
    "commits": "Committed offsets per group/topic/partition",
    "partition_status": "Consumer status per partition (Burrow rules)",
    "group_status": "Consumer status per group",
    "lag": "Lag per group/topic/partition",
    "rebalances": "Rebalances per group",
    "generations": "Generations per group",
}


@dataclass
class Analysis:
    """The loaded history and every report as a Spark DataFrame, for one `now_ms`."""

    loaded: LoadedLog | HistoryFrames
    samples: pa.Table
    now_ms: int
    window: int
    commit_summary: Any
    partition_status: Any
    group_status: Any
    lag: Any
    rebalance_summary: Any
    rebalance_history: Any

    def reports(self) -> dict[str, Any]:
        """The report DataFrames by name (the keys of REPORT_TITLES)."""
        return {
            "commits": self.commit_summary,
            "partition_status": self.partition_status,
            "group_status": self.group_status,
            "lag": self.lag,
            "rebalances": self.rebalance_summary,
            "generations": self.rebalance_history,
        }

    def render(self, names: Iterable[str] | None = None, *, limit: int | None = None) -> dict[str, Rendered]:
        """The chosen reports (all by default) as printable rows, at most `limit` rows each."""
        frames = self.reports()
        chosen = list(frames) if names is None else list(names)
        return {name: render_rows(frames[name], title=REPORT_TITLES[name], limit=limit) for name in chosen}

    def plot(self, path: str | Path, *, events: Sequence[tuple[int, str]] = (), **options: Any) -> Path:
        """Commit rate and lag over time per group as a PNG (see plot.plot_report), with every rebalance (the
        start of a generation) of the plotted groups marked, and `events` (time in ms, kind) too."""
        return plot_report(self.loaded.commits, self.samples, path, now_ms=self.now_ms, events=events,
                           rebalances=self.rebalance_history, **options)


def wall_clock_ms() -> int:
    """The wall clock in ms since the epoch (the default `now_ms` of an analysis)."""
    return time.time_ns() // 1_000_000


def analyze(
    spark: Any,
    root: str | Path | None,
    *,
    history: str | None = None,
    since_ms: int | None = None,
    until_ms: int | None = None,
    now_ms: int | None = None,
    window: int = DEFAULT_WINDOW,
    end_offsets: EndOffsets | None = None,
    num_partitions: int | None = None,
    partitions: Iterable[int] | None = None,
    min_complete: float = 0.0,
    allowed_lag: int = 0,
    groups: Sequence[str] | None = None,
    progress: ProgressFn | None = log_progress,
    cache: bool = True,
    task_cpus: float = 1.0,
) -> Analysis:
    """Define every report over the commit history (evaluated when collected, after a first pass here).

    With `history` (a path or fsspec URL written by export_history), Spark reads the exported
    Parquet history for the time range [since_ms, until_ms]; without it, the logs under `root`
    are loaded whole. The reports are as of `until_ms` (else `now_ms`, else the wall clock).
    `root` also gives the end offsets and the topics that exist (partitions of other topics are
    left out); `end_offsets` replaces the reported end offsets (see end_offsets.py). `window` is
    the number of commits per partition Burrow's rules look at, `min_complete` and `allowed_lag`
    are Burrow's minimum-complete and allowed-lag settings, `groups` the groups asked for
    (NOTFOUND if they have no commits). With `cache`, the commits are aggregated per key and log
    bucket once, here, and kept for all reports (see commit_buckets.py), as are logs loaded
    whole and the partition status (for group_status); an exported history is not cached but
    read from its files. `task_cpus` is reserved per decoding task.
    """
    now = until_ms if until_ms is not None else (wall_clock_ms() if now_ms is None else now_ms)
    if history is not None:
        # Not cached: the reports read the files once in full (commit_buckets) and once pruned to
        # the newest commits, faster than building Spark's cache of the range (bench_spark.py).
        loaded = history_frames(spark, history, since_ms=since_ms, until_ms=now)
    elif root is None:
        raise ValueError("analyze needs a storage root or a history")
    else:
        loaded = load_history(spark, root, num_partitions=num_partitions, partitions=partitions,
                              progress=progress, cache=cache, task_cpus=task_cpus)
    samples = end_offset_samples(root, end_offsets, now_ms=now)
    samples_df = end_offsets_frame(spark, samples)
    # One full scan of the commits for commit_summary, lag and partition_status (see commit_buckets.py).
    buckets = shared_commit_buckets(loaded.commits) if cache else None
    status = burrow.partition_status(loaded.commits, samples_df, now, window=window, min_complete=min_complete,
                                     allowed_lag=allowed_lag, topics=registered_topics(root), buckets=buckets)
    if cache:
        status = status.cache()  # small; group_status is computed from it
    return Analysis(
        loaded=loaded,
        samples=samples,
        now_ms=now,
        window=window,
        commit_summary=report_frames.commit_summary(loaded.commits, now, buckets=buckets),
        partition_status=status,
        group_status=burrow.group_status(status, groups),
        lag=report_frames.lag_report(loaded.commits, samples_df, now, buckets=buckets),
        rebalance_summary=report_frames.rebalance_summary(loaded.groups, now),
        rebalance_history=report_frames.rebalance_history(loaded.groups),
    )


def run_analysis(
    root: str | Path | None,
    *,
    spark_options: SparkOptions | None = None,
    ray_address: str | None = None,
    reports: Iterable[str] | None = None,
    limit: int | None = None,
    plot_path: str | Path | None = None,
    progress: ProgressFn | None = print_progress,
    spark: Any = None,
    **options: Any,
) -> dict[str, Rendered]:
    """Start Spark on Ray, analyse `root` (or a history), render the reports (and write the plot), stop Spark.

    `options` are analyze()'s (history, since_ms, until_ms, now_ms, window, allowed_lag, groups,
    end_offsets, ...). Connects to the Ray cluster at `ray_address` (or starts a local Ray) unless
    this process is already connected. With `spark` given, uses that session and leaves it
    running. Returns the rendered reports by name (see REPORT_TITLES).
    """
    own = spark is None
    if own:
        spark = start_spark(spark_options, ray_address=ray_address)
    try:
        analysis = analyze(spark, root, progress=progress, **options)
        rendered = analysis.render(reports, limit=limit)
        if plot_path is not None:
            analysis.plot(plot_path)
        analysis.loaded.release()
        return rendered
    finally:
        if own:
            stop_spark()
