"""groupcoord.spark: analytics of the committed-offset and group-metadata histories with Spark on Ray.

RayDP runs Spark inside the Ray cluster; Ray tasks decode the partition logs (through
groupcoord.storage's reader, read-only) into Arrow blocks that Spark reads from the object store.
It never calls the coordinator actors. Entry points: `run_analysis` (start Spark, analyse,
render, plot, stop) and `analyze` (with a running SparkSession).
"""

from .analyze import REPORT_TITLES, Analysis, analyze, run_analysis, wall_clock_ms
from .burrow import group_status, partition_status
from .end_offsets import end_offset_samples, end_offsets_frame
from .loader import LoadedLog, LoadProgress, load_history, load_local, log_progress, print_progress
from .plot import activity_timeseries, plot_report
from .render import Rendered, format_table, render_rows
from .reports import commit_summary, lag_report, rebalance_history, rebalance_summary
from .schema import DEFAULT_WINDOW
from .session import SparkOptions, spark_session, start_spark, stop_spark

__all__ = [
    "DEFAULT_WINDOW",
    "REPORT_TITLES",
    "Analysis",
    "LoadProgress",
    "LoadedLog",
    "Rendered",
    "SparkOptions",
    "activity_timeseries",
    "analyze",
    "commit_summary",
    "end_offset_samples",
    "end_offsets_frame",
    "format_table",
    "group_status",
    "lag_report",
    "load_history",
    "load_local",
    "log_progress",
    "partition_status",
    "plot_report",
    "print_progress",
    "rebalance_history",
    "rebalance_summary",
    "render_rows",
    "run_analysis",
    "spark_session",
    "start_spark",
    "stop_spark",
    "wall_clock_ms",
]
