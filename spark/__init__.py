"""groupcoord.spark: analytics of the committed-offset and group-metadata histories, with Spark on Ray or pandas.

`export_history` appends the partition logs' new records to a columnar history (Parquet, by
date and offsets partition, on any fsspec file system), checkpointed with the data; Spark reads
it with its own Parquet reader (`history_frames`) and pandas through pyarrow (`history_tables`),
for a time range. Without a history, Ray tasks decode the partition logs (through
groupcoord.storage, read-only, column by column) into Arrow blocks that Spark reads from the
object store. It never calls the coordinator actors. Entry points: `run_analysis` (start Spark,
analyse, render, plot, stop) and `analyze` (with a running SparkSession). Without Spark,
`load_local` or `history_tables` and the `*_local` functions of pandas_reports compute the same
reports with pandas. Importing this package starts neither Spark nor Ray.
"""

from .analyze import REPORT_TITLES, Analysis, analyze, run_analysis, wall_clock_ms
from .blocks import arrow_to_spark
from .burrow import group_status, partition_status
from .burrow_rules import evaluate as burrow_evaluate
from .end_offsets import end_offset_samples, end_offsets_frame, registered_topics
from .history import Checkpoint, ExportResult, export_history, latest_checkpoint
from .history_read import HistoryFrames, history_frames, history_tables
from .history_store import HistoryStore
from .loader import LoadedLog, LoadProgress, load_history, load_local, log_progress, print_progress
from .pandas_reports import commit_summary_local, group_status_local, lag_report_local, partition_status_local
from .plot import activity_timeseries, plot_report
from .render import Rendered, format_table, render_rows
from .reports import commit_summary, lag_report, rebalance_history, rebalance_summary
from .schema import COMMITS_SCHEMA, DEFAULT_WINDOW, END_OFFSETS_SCHEMA, GROUPS_SCHEMA
from .session import SparkOptions, spark_session, start_spark, stop_spark

__all__ = [
    "COMMITS_SCHEMA",
    "DEFAULT_WINDOW",
    "END_OFFSETS_SCHEMA",
    "GROUPS_SCHEMA",
    "Checkpoint",
    "ExportResult",
    "HistoryFrames",
    "HistoryStore",
    "REPORT_TITLES",
    "Analysis",
    "LoadProgress",
    "LoadedLog",
    "Rendered",
    "SparkOptions",
    "activity_timeseries",
    "analyze",
    "arrow_to_spark",
    "burrow_evaluate",
    "commit_summary",
    "commit_summary_local",
    "end_offset_samples",
    "end_offsets_frame",
    "export_history",
    "format_table",
    "group_status",
    "group_status_local",
    "history_frames",
    "history_tables",
    "lag_report",
    "lag_report_local",
    "latest_checkpoint",
    "load_history",
    "load_local",
    "log_progress",
    "partition_status",
    "partition_status_local",
    "plot_report",
    "print_progress",
    "rebalance_history",
    "rebalance_summary",
    "registered_topics",
    "render_rows",
    "run_analysis",
    "spark_session",
    "start_spark",
    "stop_spark",
    "wall_clock_ms",
]
