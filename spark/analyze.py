"""The whole analysis in one call: load a storage root into Spark, compute every report, render, plot.

`analyze` works with a running SparkSession; `run_analysis` starts Spark on Ray, analyses,
renders the reports as rows, optionally writes the plot, and stops Spark: it is what the
`groupcoord analyze` command calls.
"""

from __future__ import annotations

import logging
import time
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Iterable

import pyarrow as pa

from . import burrow
from . import reports as report_frames
from .end_offsets import EndOffsets, end_offset_samples, end_offsets_frame
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

    loaded: LoadedLog
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

    def plot(self, path: str | Path, **options: Any) -> Path:
        """Commit rate and lag over time per group as a PNG (see plot.plot_report)."""
        return plot_report(self.loaded.commits, self.samples, path, now_ms=self.now_ms, **options)


def wall_clock_ms() -> int:
    """The wall clock in ms since the epoch (the default `now_ms` of an analysis)."""
    return time.time_ns() // 1_000_000


def analyze(
    spark: Any,
    root: str | Path,
    *,
    now_ms: int | None = None,
    window: int = DEFAULT_WINDOW,
    end_offsets: EndOffsets | None = None,
    num_partitions: int | None = None,
    partitions: Iterable[int] | None = None,
    min_complete: float = 0.0,
    allowed_lag: int = 0,
    progress: ProgressFn | None = log_progress,
    cache: bool = True,
    task_cpus: float = 1.0,
) -> Analysis:
    """Load the logs under `root` into `spark` and define every report (evaluated when collected).

    `end_offsets` replaces the topic registry's reported end offsets (see end_offsets.py);
    `window` is the number of commits per partition Burrow's rules look at, `min_complete` and
    `allowed_lag` are Burrow's minimum-complete and allowed-lag settings; `cache` keeps the
    loaded history in Spark's cache for the reports; `task_cpus` is reserved per decoding task.
    """
    now = wall_clock_ms() if now_ms is None else now_ms
    loaded = load_history(spark, root, num_partitions=num_partitions, partitions=partitions, progress=progress,
                          cache=cache, task_cpus=task_cpus)
    samples = end_offset_samples(root, end_offsets, now_ms=now)
    samples_df = end_offsets_frame(spark, samples)
    status = burrow.partition_status(loaded.commits, samples_df, now, window=window, min_complete=min_complete,
                                     allowed_lag=allowed_lag)
    if cache:
        status = status.cache()  # small; group_status is computed from it
    return Analysis(
        loaded=loaded,
        samples=samples,
        now_ms=now,
        window=window,
        commit_summary=report_frames.commit_summary(loaded.commits, now),
        partition_status=status,
        group_status=burrow.group_status(status),
        lag=report_frames.lag_report(loaded.commits, samples_df, now),
        rebalance_summary=report_frames.rebalance_summary(loaded.groups, now),
        rebalance_history=report_frames.rebalance_history(loaded.groups),
    )


def run_analysis(
    root: str | Path,
    *,
    spark_options: SparkOptions | None = None,
    ray_address: str | None = None,
    now_ms: int | None = None,
    window: int = DEFAULT_WINDOW,
    end_offsets: EndOffsets | None = None,
    num_partitions: int | None = None,
    reports: Iterable[str] | None = None,
    limit: int | None = None,
    plot_path: str | Path | None = None,
    progress: ProgressFn | None = print_progress,
    spark: Any = None,
) -> dict[str, Rendered]:
    """Start Spark on Ray, analyse `root`, render the reports (and write the plot), stop Spark.

    Connects to the Ray cluster at `ray_address` (or starts a local Ray) unless this process
    is already connected. With `spark` given, uses that session and leaves it running. Returns
    the rendered reports by name (see REPORT_TITLES).
    """
    own = spark is None
    if own:
        spark = start_spark(spark_options, ray_address=ray_address)
    try:
        analysis = analyze(spark, root, now_ms=now_ms, window=window, end_offsets=end_offsets,
                           num_partitions=num_partitions, progress=progress)
        rendered = analysis.render(reports, limit=limit)
        if plot_path is not None:
            analysis.plot(plot_path)
        analysis.loaded.release()
        return rendered
    finally:
        if own:
            stop_spark()
