"""Reports over the loaded histories, each a Spark DataFrame: commit activity, lag, rebalances.

Consumer status in Burrow's style is in burrow.py. Every report takes an explicit `now_ms`, so
its values are exact and repeatable; end-offset samples after `now_ms` are ignored. A key's
commits are ordered by log position (offsets partition, log offset), as in the log.
"""

from __future__ import annotations

import logging
from typing import Any

from pyspark.sql import DataFrame, Window
from pyspark.sql import functions as F

from .commit_buckets import commit_buckets
from .schema import COMMIT_KEY

log = logging.getLogger(__name__)

HOUR_MS = 3_600_000


def _position(*fields: str) -> Any:
    return F.struct("log_partition", "log_offset", *fields)


def non_negative(diff: Any) -> Any:
    """max(diff, 0), staying null when diff is null (Spark's greatest() would skip the null)."""
    return F.when(diff.isNull(), F.lit(None)).otherwise(F.greatest(diff, F.lit(0)))


def commit_summary(commits: DataFrame, now_ms: int, *, buckets: DataFrame | None = None) -> DataFrame:
    """Per group/topic/partition: latest committed offset, commits, rate, first/last time, age.

    `commit_rate` is commits per second over the observed span, (commits - 1) / (last - first),
    null with fewer than two commits or a zero span. `deleted` says the latest record of the key
    is a tombstone (its committed offset was deleted); `committed_offset` is then the last one
    that was committed before. `buckets` is commit_buckets(commits) if already computed.
    """
    b = commit_buckets(commits) if buckets is None else buckets
    agg = b.groupBy(*COMMIT_KEY).agg(
        F.sum("_commits").cast("long").alias("commits"),
        F.sum("_tombstones").cast("long").alias("tombstones"),
        F.min("_first_ms").alias("first_commit_ms"),
        F.max("_last_ms").alias("last_commit_ms"),
        F.max_by("_live_offset", "_live_pos").alias("committed_offset"),
        F.max_by("_tombstone", "_pos").alias("deleted"),
    )
    span = F.col("last_commit_ms") - F.col("first_commit_ms")
    return agg.select(
        *COMMIT_KEY,
        "committed_offset",
        "deleted",
        "commits",
        "tombstones",
        F.when((F.col("commits") >= 2) & (span > 0), (F.col("commits") - 1) * 1000.0 / span).alias("commit_rate"),
        "first_commit_ms",
        "last_commit_ms",
        (F.lit(now_ms) - F.col("last_commit_ms")).alias("last_commit_age_ms"),
    ).orderBy(*COMMIT_KEY)


def current_commits(commits: DataFrame, *, buckets: DataFrame | None = None) -> DataFrame:
    """The committed offset of every key whose latest record is a commit (deleted keys left out)."""
    b = commit_buckets(commits) if buckets is None else buckets
    latest = b.groupBy(*COMMIT_KEY).agg(
        F.max_by("_tombstone", "_pos").alias("_deleted"),
        F.max_by("_offset", "_pos").alias("committed_offset"),
    )
    return latest.where(~F.col("_deleted")).drop("_deleted")


def samples_until(samples: DataFrame, now_ms: int) -> DataFrame:
    """End-offset samples reported at or before now_ms."""
    return samples.where(F.col("timestamp") <= F.lit(now_ms))


def latest_end_offsets(samples: DataFrame, now_ms: int) -> DataFrame:
    """Per topic/partition: the latest end offset reported at or before now_ms, and when."""
    latest = samples_until(samples, now_ms).groupBy("topic", "partition").agg(
        F.max(F.struct("timestamp", "offset")).alias("e")
    )
    return latest.select(
        "topic", "partition", F.col("e.offset").alias("end_offset"), F.col("e.timestamp").alias("end_offset_ms")
    )


def _bracketing_samples(samples: DataFrame, now_ms: int) -> DataFrame:
    """Per end-offset sample (as `before`): the next sample strictly later in time (`after`), and the
    range [_lo, _hi) of committed offsets for which it is the latest sample at or below the offset.

    With a partition's samples ranked by (time, offset), _lo is the smallest offset of this sample
    and every later-ranked one: the latest-ranked sample at or below an offset c is the one whose
    _lo <= c < _hi (_hi being the next sample's _lo, null for the last). So each key meets exactly
    one sample by a join on its partition, with no window or aggregation over keys x samples.
    """
    part = ["topic", "partition"]
    s = samples_until(samples, now_ms).select(*part, F.col("timestamp").alias("ts"), "offset")
    by_rank = Window.partitionBy(*part).orderBy("ts", "offset")
    ranked = s.select("*", F.row_number().over(by_rank).alias("_rank"))
    # Frames growing from the newest sample (a frame running to the end would be evaluated anew per row).
    from_here = Window.partitionBy(*part).orderBy(F.col("_rank").desc()).rowsBetween(
        Window.unboundedPreceding, Window.currentRow)
    later = Window.partitionBy(*part).orderBy(F.col("ts").desc()).rangeBetween(Window.unboundedPreceding, -1)
    ranges = ranked.select(
        "*", F.min("offset").over(from_here).alias("_lo"), F.min(F.struct("ts", "offset")).over(later).alias("after")
    )
    return ranges.select(
        *part, "_lo", F.lead("_lo").over(Window.partitionBy(*part).orderBy("_rank")).alias("_hi"),
        F.struct("ts", "offset").alias("before"), "after",
    )


def lag_report(commits: DataFrame, samples: DataFrame, now_ms: int, *, buckets: DataFrame | None = None) -> DataFrame:
    """Per group/topic/partition with a known end offset: lag in offsets and estimated time lag.

    `lag` is end_offset - committed_offset (0 if the consumer is at or past the end).
    `time_lag_ms` is now_ms minus the time the log end last stood at the committed offset,
    interpolated linearly between the end-offset samples around it: 0 when lag is 0, null when
    the samples do not reach back to the committed offset. `buckets` is commit_buckets(commits) if
    already computed.
    """
    known = current_commits(commits, buckets=buckets).join(latest_end_offsets(samples, now_ms), ["topic", "partition"])
    c = F.col("committed_offset")
    # `before`: the latest sample (by time, then offset) at or below c; `after`: the first one later in time.
    r = _bracketing_samples(samples, now_ms).alias("r")
    k = known.alias("k")
    matches = ((F.col("k.topic") == F.col("r.topic")) & (F.col("k.partition") == F.col("r.partition"))
               & (F.col("r._lo") <= F.col("k.committed_offset"))
               & (F.col("r._hi").isNull() | (F.col("k.committed_offset") < F.col("r._hi"))))
    out = k.join(r, matches, "left").select("k.*", "r.before", "r.after")
    lag = non_negative(F.col("end_offset") - c)
    b_ts, b_off = F.col("before.ts"), F.col("before.offset")
    a_ts, a_off = F.col("after.ts"), F.col("after.offset")
    at = b_ts + (c - b_off) * (a_ts - b_ts) / (a_off - b_off)
    time_lag = (
        F.when(lag == 0, F.lit(0).cast("long"))
        .when(F.col("before").isNull() | F.col("after").isNull(), F.lit(None).cast("long"))
        .otherwise(F.round(F.lit(now_ms) - at).cast("long"))
    )
    return out.select(
        *COMMIT_KEY,
        "committed_offset",
        "end_offset",
        "end_offset_ms",
        lag.cast("long").alias("lag"),
        time_lag.alias("time_lag_ms"),
    ).orderBy(*COMMIT_KEY)


def rebalance_history(groups: DataFrame) -> DataFrame:
    """One row per group and generation: when it started and ended, protocol, leader and members.

    A generation's values are those of its latest record; it ends when the next one starts.
    """
    live = groups.where(~F.col("tombstone"))
    per_gen = live.groupBy("group", "generation").agg(
        F.min(_position()).alias("_first"),
        F.min("timestamp").alias("started_ms"),
        F.max(_position("protocol_type", "protocol", "leader", "member_count", "members")).alias("r"),
        F.count(F.lit(1)).alias("records"),
    )
    by_start = Window.partitionBy("group").orderBy("_first")
    return per_gen.select(
        "group",
        "generation",
        "started_ms",
        F.lead("started_ms").over(by_start).alias("ended_ms"),
        F.col("r.protocol_type").alias("protocol_type"),
        F.col("r.protocol").alias("protocol"),
        F.col("r.leader").alias("leader"),
        F.col("r.member_count").alias("member_count"),
        F.transform(F.col("r.members"), lambda m: m["member_id"]).alias("members"),
        "records",
        "_first",
    ).orderBy("group", "_first").drop("_first")


def rebalance_summary(groups: DataFrame, now_ms: int) -> DataFrame:
    """Per group: generations seen, rebalances (generations after the first), rebalances per hour.

    The rate is over the span from the group's first record to now_ms. `deleted` says the
    group's latest record is a tombstone.
    """
    gens = groups.where(~F.col("tombstone")).groupBy("group").agg(
        F.countDistinct("generation").alias("generations"),
        F.min("timestamp").alias("first_seen_ms"),
        F.max(_position("generation", "member_count", "timestamp")).alias("cur"),
    )
    gen_start = (
        groups.where(~F.col("tombstone"))
        .groupBy("group", "generation")
        .agg(F.min("timestamp").alias("started_ms"))
    )
    latest = groups.groupBy("group").agg(F.max(_position("tombstone", "timestamp")).alias("latest"))
    out = latest.join(gens, "group", "left").join(
        gen_start.withColumnRenamed("generation", "_g"), "group", "left"
    )
    out = out.where(F.col("_g").isNull() | (F.col("_g") == F.col("cur.generation")))
    rebalances = F.greatest(F.coalesce(F.col("generations"), F.lit(0)) - 1, F.lit(0)).cast("long")
    span = F.lit(now_ms) - F.col("first_seen_ms")
    return out.select(
        "group",
        F.col("generations").cast("long").alias("generations"),
        rebalances.alias("rebalances"),
        F.when(span > 0, rebalances * float(HOUR_MS) / span).alias("rebalances_per_hour"),
        "first_seen_ms",
        F.col("started_ms").alias("current_generation_since_ms"),
        F.col("cur.generation").alias("current_generation"),
        F.col("cur.member_count").alias("current_members"),
        F.col("latest.tombstone").alias("deleted"),
    ).orderBy("group")
