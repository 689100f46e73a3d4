"""One aggregation of the commit history that the commit reports share: per key and bucket of log offsets.

commit_summary, lag_report (its committed offsets) and partition_status (which log buckets hold
each key's newest commits) are all computed from `commit_buckets(commits)`: a few rows per key
and bucket of BUCKET_OFFSETS log offsets instead of every commit. Each report computes it from
the commits by default; analyze() computes it once, keeps it (a local checkpoint in the
executors, spilling to disk) and hands it to every report, so the history is scanned in full
once, not once per report. Exact: the values per key are the same as over the commits.
"""

from __future__ import annotations

import logging
from typing import Any

from pyspark.sql import DataFrame
from pyspark.sql import functions as F

from .schema import COMMIT_KEY

log = logging.getLogger(__name__)

# Log offsets per bucket.
BUCKET_OFFSETS = 1 << 16


def log_position() -> Any:
    """A record's place in the logs as one long (offsets partition, then log offset): an ordering that
    max_by can aggregate in a hash table, where max(struct) needs a sort of every row."""
    return F.col("log_partition").cast("long") * F.lit(1 << 40) + F.col("log_offset")


def bucket_of_log_offset() -> Any:
    """The bucket of a record's log offset (log offsets are never negative)."""
    return F.expr(f"log_offset div {int(BUCKET_OFFSETS)}")


def bucket_start(bucket: int) -> int:
    """The first log offset of a bucket."""
    return int(bucket) * int(BUCKET_OFFSETS)


def commit_buckets(commits: DataFrame) -> DataFrame:
    """Per group/topic/partition, offsets partition and `_bucket`: what the commit reports need of its rows.

    `_rows` (records), `_commits` and `_tombstones`; `_first_ms`/`_last_ms` (commit times of the
    commits); the latest commit's log position and offset (`_live_pos`, `_live_offset`); the
    latest record's position and offset and whether it is a tombstone (`_pos`, `_offset`,
    `_tombstone`).
    """
    live = ~F.col("tombstone")
    pos = log_position()
    return commits.groupBy(*COMMIT_KEY, "log_partition", bucket_of_log_offset().alias("_bucket")).agg(
        F.count(F.lit(1)).alias("_rows"),
        F.sum(F.when(live, 1).otherwise(0)).cast("long").alias("_commits"),
        F.sum(F.when(live, 0).otherwise(1)).cast("long").alias("_tombstones"),
        F.min(F.when(live, F.col("commit_timestamp"))).alias("_first_ms"),
        F.max(F.when(live, F.col("commit_timestamp"))).alias("_last_ms"),
        F.max(F.when(live, pos)).alias("_live_pos"),
        F.max_by(F.col("offset"), F.when(live, pos)).alias("_live_offset"),
        F.max(pos).alias("_pos"),
        F.max_by(F.col("offset"), pos).alias("_offset"),
        F.max_by(F.col("tombstone"), pos).alias("_tombstone"),
    )


def shared_commit_buckets(commits: DataFrame) -> DataFrame:
    """commit_buckets computed now and kept for several reports (a local checkpoint: no lineage back to the scan)."""
    return commit_buckets(commits).localCheckpoint(eager=True)
