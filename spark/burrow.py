"""Consumer status per partition and per group with Spark, following Burrow's lag evaluation rules.

The rules, and how they are read here, are described in burrow_rules.py; pandas_reports.py
computes the same statuses without Spark.
"""

from __future__ import annotations

import functools
import logging
from typing import Any, Mapping, Sequence

import pyarrow as pa
from pyspark.sql import DataFrame, Window
from pyspark.sql import functions as F

from .blocks import arrow_to_spark
from .burrow_rules import SEVERITY, check_status_options
from .commit_buckets import bucket_of_log_offset, bucket_start, commit_buckets
from .reports import non_negative, samples_until
from .schema import COMMIT_KEY, DEFAULT_WINDOW

log = logging.getLogger(__name__)


def _newest_rows(commits: DataFrame, window: int, buckets: DataFrame | None) -> DataFrame:
    """The rows of every key in its newest log buckets that together hold at least `window` of its rows.

    From the rows per key and bucket (commit_buckets), the buckets each key needs are those whose
    newer buckets hold fewer than `window` of its rows (a few rows per key, computed once: a local
    checkpoint); the oldest needed bucket of each offsets partition becomes a bound on
    log_offset that the Parquet scan pushes down (skipping older row groups), and a join on the
    needed buckets keeps exactly their rows. Only these rows reach the sort of commit_windows.
    Exact: every row among a key's newest `window` is kept.
    """
    per_bucket = commit_buckets(commits) if buckets is None else buckets
    newest_first = Window.partitionBy(*COMMIT_KEY).orderBy(F.col("log_partition").desc(), F.col("_bucket").desc())
    running = per_bucket.select(
        *COMMIT_KEY, "log_partition", "_bucket", "_rows",
        F.sum("_rows").over(newest_first.rowsBetween(Window.unboundedPreceding, Window.currentRow)).alias("_n"),
    )
    # Computed once and broadcast once: the join with it is pushed into every offsets partition's scan.
    needed = running.where(F.col("_n") - F.col("_rows") < window).select(
        *COMMIT_KEY, "log_partition", "_bucket", _slot(F.col("_bucket")).alias("_slot")).localCheckpoint()
    oldest = needed.groupBy("log_partition").agg(F.min("_bucket").alias("_bucket")).collect()
    if not oldest:
        return commits.where(F.lit(False))
    scans = [commits.where((F.col("log_partition") == row.log_partition)
                           & (F.col("log_offset") >= bucket_start(row._bucket))) for row in oldest]
    rows = functools.reduce(DataFrame.unionByName, scans).select("*", _slot(bucket_of_log_offset()).alias("_slot"))
    needed = F.broadcast(needed.select(*COMMIT_KEY, "_slot"))
    return rows.join(needed, [*COMMIT_KEY, "_slot"], "left_semi").drop("_slot")


def _slot(bucket: Any) -> Any:
    # Offsets partition and bucket as one long: joined on, it lets Spark infer no per-partition filter
    # for the broadcast side, so every scan of the union shares one broadcast.
    return F.col("log_partition").cast("long") * F.lit(1 << 40) + bucket


def commit_windows(commits: DataFrame, window: int = DEFAULT_WINDOW, *, buckets: DataFrame | None = None) -> DataFrame:
    """The last `window` commits of every key after its last tombstone (one row per commit).

    `buckets` is commit_buckets(commits) if already computed.
    """
    newest_first = Window.partitionBy(*COMMIT_KEY).orderBy(
        F.col("log_partition").desc(), F.col("log_offset").desc()
    )
    ranked = _newest_rows(commits, window, buckets).select(
        *COMMIT_KEY, "offset", "commit_timestamp", "tombstone", "log_partition", "log_offset"
    ).select(
        "*",
        F.row_number().over(newest_first).alias("_rank"),
        F.sum(F.col("tombstone").cast("int"))
        .over(newest_first.rowsBetween(Window.unboundedPreceding, Window.currentRow))
        .alias("_tombs"),
    )
    return ranked.where((F.col("_tombs") == 0) & (F.col("_rank") <= window)).drop("_rank", "_tombs", "tombstone")


def with_commit_lag(windows: DataFrame, samples: DataFrame, now_ms: int) -> DataFrame:
    """Add `lag`: the end offset last reported at or before each commit, minus its offset (>= 0)."""
    s = samples_until(samples, now_ms).select(
        "topic", "partition", F.col("timestamp").alias("_t"), F.lit(0).alias("_kind"), F.col("offset").alias("_end")
    )
    c = windows.select("*", F.col("commit_timestamp").alias("_t"), F.lit(1).alias("_kind"))
    as_of = Window.partitionBy("topic", "partition").orderBy("_t", "_kind").rowsBetween(
        Window.unboundedPreceding, Window.currentRow
    )
    joined = c.unionByName(s, allowMissingColumns=True).select(
        "*", F.last("_end", ignorenulls=True).over(as_of).alias("_end_then")
    )
    return joined.where(F.col("_kind") == 1).select(
        *windows.columns, non_negative(F.col("_end_then") - F.col("offset")).alias("lag")
    )


def _end_offsets(samples: DataFrame, now_ms: int, window: int) -> DataFrame:
    """Per topic/partition: the latest end offset (by time, then offset) and the last `window` ones."""
    newest_first = Window.partitionBy("topic", "partition").orderBy(F.col("timestamp").desc(), F.col("offset").desc())
    recent = samples_until(samples, now_ms).select(
        "topic", "partition", "offset", F.row_number().over(newest_first).alias("_rank")
    )
    return recent.where(F.col("_rank") <= window).groupBy("topic", "partition").agg(
        F.max(F.when(F.col("_rank") == 1, F.col("offset"))).alias("end_offset"),
        F.collect_list("offset").alias("recent_end_offsets"),
    )


_STATUS_SQL = """
CASE
  WHEN complete < {min_complete} THEN 'OK'
  WHEN current_lag <= {allowed_lag} THEN 'OK'
  WHEN _stopped AND NOT _recent_lag_zero THEN 'STOP'
  WHEN _rewind_at > 0 AND NOT _rewind_recovered THEN 'REWIND'
  WHEN _lag_always_nonzero AND _stalled THEN 'STALL'
  WHEN _lag_always_nonzero AND _lag_not_decreasing THEN 'WARN'
  ELSE 'OK'
END
"""


def window_status(df: DataFrame, now_ms: int, *, min_complete: float = 0.0, allowed_lag: int = 0) -> DataFrame:
    """Burrow's status (burrow_rules.py) of rows holding a window: window_offsets, window_lags (oldest
    first), window_start_ms, window_end_ms, window_commits, committed_offset, current_lag,
    recent_end_offsets and complete. Returns `df` with a `status` column added.
    """
    allowed_lag = int(allowed_lag)
    # 1-based position of the first offset below the one before it (0: none), as in Burrow's rewind index.
    rewind_at = ("cast(array_position(transform(slice(window_offsets, 2, window_commits), "
                 "(x, i) -> x < window_offsets[i]), true) as int)")
    df = df.select(
        "*",
        (F.lit(now_ms) - F.col("window_end_ms") > F.col("window_end_ms") - F.col("window_start_ms")).alias("_stopped"),
        F.expr("coalesce(exists(recent_end_offsets, b -> b <= committed_offset), false)").alias("_recent_lag_zero"),
        F.expr(f"NOT exists(window_lags, l -> coalesce(l <= {allowed_lag}, false))").alias("_lag_always_nonzero"),
        F.expr(rewind_at).alias("_rewind_at"),
        (F.size(F.array_distinct("window_offsets")) == 1).alias("_stalled"),
        F.expr("filter(window_lags, l -> l IS NOT NULL)").alias("_lags"),
    )
    df = df.select(
        "*",
        F.expr("exists(slice(window_offsets, _rewind_at + 1, window_commits), "
               "y -> y >= element_at(window_offsets, greatest(_rewind_at, 1)))").alias("_rewind_recovered"),
        F.expr(
            "size(_lags) >= 2 AND NOT exists(transform(slice(_lags, 2, size(_lags)), (x, i) -> x < _lags[i]), b -> b)"
        ).alias("_lag_not_decreasing"),
    )
    status = F.expr(_STATUS_SQL.format(min_complete=float(min_complete), allowed_lag=allowed_lag))
    helpers = ["_stopped", "_recent_lag_zero", "_lag_always_nonzero", "_rewind_at", "_stalled", "_lags",
               "_rewind_recovered", "_lag_not_decreasing"]
    return df.select("*", status.alias("status")).drop(*helpers)


def partition_status(
    commits: DataFrame,
    samples: DataFrame,
    now_ms: int,
    *,
    window: int = DEFAULT_WINDOW,
    min_complete: float = 0.0,
    allowed_lag: int = 0,
    topics: Mapping[str, int] | None = None,
    buckets: DataFrame | None = None,
) -> DataFrame:
    """Burrow's status of every group/topic/partition with a committed offset (see burrow_rules.py).

    `complete` is the share of the window that is filled; partitions below `min_complete` are
    OK, as in Burrow's minimum-complete setting; a lag of at most `allowed_lag` counts as none,
    as in Burrow's allowed-lag setting. With `topics` (name -> partition count of the topics that
    exist), partitions of other topics are left out. Columns also show the window's offsets and lags.
    `buckets` is commit_buckets(commits) if already computed. Runs a small Spark job when called
    (to bound the scan of the newest commits).
    """
    check_status_options(window, allowed_lag)
    allowed_lag = int(allowed_lag)
    lagged = with_commit_lag(commit_windows(commits, window, buckets=buckets), samples, now_ms)
    per_key = lagged.groupBy(*COMMIT_KEY).agg(
        F.sort_array(F.collect_list(F.struct("log_partition", "log_offset", "offset", "commit_timestamp", "lag")))
        .alias("w")
    )
    df = per_key.join(_end_offsets(samples, now_ms, window), ["topic", "partition"], "left")
    df = df.select(
        *COMMIT_KEY,
        "end_offset",
        F.coalesce("recent_end_offsets", F.array().cast("array<bigint>")).alias("recent_end_offsets"),
        F.size("w").alias("window_commits"),
        F.expr("transform(w, x -> x.offset)").alias("window_offsets"),
        F.expr("transform(w, x -> x.lag)").alias("window_lags"),
        F.expr("w[0].commit_timestamp").alias("window_start_ms"),
        F.expr("element_at(w, -1).commit_timestamp").alias("window_end_ms"),
        F.expr("element_at(w, -1).offset").alias("committed_offset"),
    )
    df = df.select(
        "*",
        non_negative(F.col("end_offset") - F.col("committed_offset")).alias("current_lag"),
        (F.col("window_commits") / float(window)).alias("complete"),
    )
    if topics is not None:
        df = df.where(F.col("partition") < _partition_count(topics)) if topics else df.where(F.lit(False))
    df = window_status(df, now_ms, min_complete=min_complete, allowed_lag=allowed_lag)
    return df.select(
        *COMMIT_KEY,
        "status",
        "committed_offset",
        "end_offset",
        "current_lag",
        "complete",
        "window_commits",
        "window_start_ms",
        "window_end_ms",
        "window_offsets",
        "window_lags",
    ).orderBy(*COMMIT_KEY)


def _partition_count(topics: Mapping[str, int]) -> Any:
    """The partition count of a row's topic, from a map literal of `topics` (0 for a topic not in it)."""
    counts = F.create_map(*[x for name in sorted(topics) for x in (F.lit(name), F.lit(int(topics[name])))])
    return F.coalesce(counts[F.col("topic")], F.lit(0))


def group_status(partitions: DataFrame, groups: Sequence[str] | None = None) -> DataFrame:
    """Per group: the worst partition status (STOP, STALL, REWIND become ERR), lag totals, max lag.

    With `groups`, only those groups, and NOTFOUND (with no partitions) for any without a committed offset.
    """
    sev = F.create_map(*[x for name, value in SEVERITY.items() for x in (F.lit(name), F.lit(value))])
    df = partitions.select("*", sev[F.col("status")].alias("_sev"))
    agg = df.groupBy("group").agg(
        F.max("_sev").alias("_worst"),
        F.count(F.lit(1)).alias("partitions"),
        F.sum(F.when(F.col("status") != "OK", 1).otherwise(0)).cast("long").alias("partitions_not_ok"),
        F.sum("current_lag").alias("total_lag"),
        F.max(F.when(F.col("current_lag").isNotNull(),
                     F.struct("current_lag", "topic", "partition", "status"))).alias("_max"),
        F.avg(F.when(F.col("complete") >= 1.0, 1.0).otherwise(0.0)).alias("complete"),
        F.max(F.struct("_sev", "status")).alias("_worst_partition"),
    )
    group = F.when(F.col("_worst") >= SEVERITY["ERR"], "ERR").when(F.col("_worst") == SEVERITY["WARN"], "WARN")
    if groups is not None:
        asked = arrow_to_spark(partitions.sparkSession, pa.table({"group": pa.array(sorted(set(groups)), pa.string())}))
        agg = asked.join(agg, "group", "left")
        group = F.when(F.col("_worst").isNull(), "NOTFOUND").otherwise(group.otherwise("OK"))
    return agg.select(
        "group",
        (group if groups is not None else group.otherwise("OK")).alias("status"),
        F.col("_worst_partition.status").alias("worst_partition_status"),
        F.coalesce("partitions", F.lit(0)).cast("long").alias("partitions"),
        F.coalesce("partitions_not_ok", F.lit(0)).cast("long").alias("partitions_not_ok"),
        "total_lag",
        F.col("_max.topic").alias("max_lag_topic"),
        F.col("_max.partition").alias("max_lag_partition"),
        F.col("_max.current_lag").alias("max_lag"),
        F.coalesce("complete", F.lit(1.0)).alias("complete"),
    ).orderBy("group")
