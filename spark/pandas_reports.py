"""The reports without Spark: the same reports as reports.py and burrow.py, computed with pandas.

This is the no-Spark implementation of the analytics. It reads the Arrow tables that
loader.load_local decodes on the driver (the same rows that Spark loads) and returns pandas
DataFrames with the columns and values of commit_summary, lag_report, partition_status and
group_status. It serves small deployments that do not want to start Spark, checks the Spark
reports in the tests, and is the baseline of benchmarks/bench_spark.py. It imports neither
Spark nor Ray.
"""

from __future__ import annotations

import logging
from typing import Mapping, Sequence

import numpy as np
import pandas as pd
import pyarrow as pa

from .burrow_rules import SEVERITY, check_status_options, evaluate, group_status_of
from .schema import COMMIT_KEY, DEFAULT_WINDOW

log = logging.getLogger(__name__)

_POS = ["log_partition", "log_offset"]


_NULLABLE_INTS = {pa.int64(): pd.Int64Dtype(), pa.int32(): pd.Int32Dtype()}


def _frame(commits: pa.Table) -> pd.DataFrame:
    df = commits.to_pandas(types_mapper=_NULLABLE_INTS.get)
    return df.sort_values(_POS, kind="stable", ignore_index=True)


def commit_summary_local(commits: pa.Table, now_ms: int) -> pd.DataFrame:
    """commit_summary with pandas: per group/topic/partition, committed offset, commits, rate and times."""
    df = _frame(commits)
    by_key = df.groupby(COMMIT_KEY, sort=True)
    out = by_key.agg(tombstones=("tombstone", "sum"), deleted=("tombstone", "last"))
    live = df[~df["tombstone"]]
    agg = live.groupby(COMMIT_KEY, sort=True).agg(
        committed_offset=("offset", "last"),
        commits=("offset", "size"),
        first_commit_ms=("commit_timestamp", "min"),
        last_commit_ms=("commit_timestamp", "max"),
    )
    out = out.join(agg, how="left")
    out["commits"] = out["commits"].fillna(0).astype("int64")
    span = out["last_commit_ms"] - out["first_commit_ms"]
    rate = (out["commits"] - 1) * 1000.0 / span
    out["commit_rate"] = rate.where((out["commits"] >= 2) & (span > 0))
    out["last_commit_age_ms"] = now_ms - out["last_commit_ms"]
    out["tombstones"] = out["tombstones"].astype("int64")
    cols = ["committed_offset", "deleted", "commits", "tombstones", "commit_rate", "first_commit_ms",
            "last_commit_ms", "last_commit_age_ms"]
    return out[cols].reset_index()


def _current(df: pd.DataFrame) -> pd.DataFrame:
    latest = df.groupby(COMMIT_KEY, sort=True).tail(1)
    latest = latest[~latest["tombstone"]]
    return latest[[*COMMIT_KEY, "offset", "commit_timestamp"]].rename(columns={"offset": "committed_offset"})


def _samples(samples: pa.Table, now_ms: int) -> pd.DataFrame:
    s = samples.to_pandas().astype({"partition": "int32"})
    return s[s["timestamp"] <= now_ms].sort_values(["topic", "partition", "timestamp"], kind="stable")


def _latest_ends(s: pd.DataFrame) -> pd.DataFrame:
    last = s.groupby(["topic", "partition"], sort=False).tail(1)
    return last.rename(columns={"offset": "end_offset", "timestamp": "end_offset_ms"})


def lag_report_local(commits: pa.Table, samples: pa.Table, now_ms: int) -> pd.DataFrame:
    """lag_report with pandas: per group/topic/partition with a known end offset, lag and time lag."""
    current = _current(_frame(commits))
    s = _samples(samples, now_ms)
    known = current.merge(_latest_ends(s), on=["topic", "partition"])
    series = {k: (g["timestamp"].to_numpy(), g["offset"].to_numpy()) for k, g in s.groupby(["topic", "partition"])}
    time_lags: list[float | None] = []
    for topic, partition, c, end in zip(known["topic"], known["partition"], known["committed_offset"],
                                        known["end_offset"], strict=True):
        if end - c <= 0:
            time_lags.append(0)
            continue
        ts, offs = series[(topic, partition)]
        below = np.nonzero(offs <= c)[0]
        if len(below) == 0:
            time_lags.append(None)
            continue
        # The latest sample at or below c (ties on time: the larger offset, as max(struct) picks).
        b = max(below, key=lambda i: (ts[i], offs[i]))
        later = np.nonzero(ts > ts[b])[0]
        if len(later) == 0:
            time_lags.append(None)
            continue
        a = min(later, key=lambda i: (ts[i], offs[i]))
        at = ts[b] + (c - offs[b]) * (ts[a] - ts[b]) / (offs[a] - offs[b])
        time_lags.append(round(now_ms - at))
    known["lag"] = (known["end_offset"] - known["committed_offset"]).clip(lower=0)
    known["time_lag_ms"] = pd.array(time_lags, dtype="Int64")
    cols = [*COMMIT_KEY, "committed_offset", "end_offset", "end_offset_ms", "lag", "time_lag_ms"]
    return known[cols].sort_values(COMMIT_KEY, ignore_index=True)


def partition_status_local(commits: pa.Table, samples: pa.Table, now_ms: int, *, window: int = DEFAULT_WINDOW,
                           min_complete: float = 0.0, allowed_lag: int = 0,
                           topics: Mapping[str, int] | None = None) -> pd.DataFrame:
    """partition_status with pandas (a Python loop over keys for the rules themselves)."""
    check_status_options(window, allowed_lag)
    df = _frame(commits)
    df["_pos"] = np.arange(len(df))
    last_tomb = df[df["tombstone"]].groupby(COMMIT_KEY)["_pos"].max().rename("_tomb")
    df = df.join(last_tomb, on=COMMIT_KEY)
    df = df[~df["tombstone"] & ~(df["_pos"] <= df["_tomb"])]
    w = df.groupby(COMMIT_KEY, sort=False).tail(window).astype(
        {"offset": "int64", "commit_timestamp": "int64", "partition": "int32"}
    )
    s = _samples(samples, now_ms)
    lagged = pd.merge_asof(
        w.sort_values("commit_timestamp", kind="stable"),
        s.rename(columns={"offset": "_end", "timestamp": "_t"}).sort_values("_t", kind="stable"),
        left_on="commit_timestamp", right_on="_t", by=["topic", "partition"], direction="backward",
    ).sort_values("_pos", kind="stable")
    ends = {k: (int(g["offset"].iloc[-1]), g["offset"].to_numpy()[-window:])
            for k, g in s.groupby(["topic", "partition"])}
    rows = []
    for (group, topic, partition), g in lagged.groupby(COMMIT_KEY, sort=True):
        if topics is not None and not partition < topics.get(topic, 0):
            continue  # a partition of a topic that no longer exists
        offsets = g["offset"].to_numpy()
        times = g["commit_timestamp"].to_numpy()
        lags = [None if pd.isna(e) else max(int(e) - int(o), 0) for e, o in zip(g["_end"], offsets, strict=True)]
        end, recent = ends.get((topic, partition), (None, np.array([], dtype=np.int64)))
        current_lag = None if end is None else max(end - int(offsets[-1]), 0)
        if len(offsets) / window < min_complete:
            status = "OK"
        else:
            status = evaluate(offsets.tolist(), times.tolist(), lags, current_lag, recent.tolist(), now_ms,
                              allowed_lag=allowed_lag)
        rows.append((group, topic, partition, status, int(offsets[-1]), end, current_lag, len(offsets) / window,
                     len(offsets), int(times[0]), int(times[-1]), [int(o) for o in offsets], lags))
    cols = [*COMMIT_KEY, "status", "committed_offset", "end_offset", "current_lag", "complete", "window_commits",
            "window_start_ms", "window_end_ms", "window_offsets", "window_lags"]
    out = pd.DataFrame(rows, columns=cols)
    return out.astype({"end_offset": "Int64", "current_lag": "Int64"})


_GROUP_COLUMNS = ["group", "status", "worst_partition_status", "partitions", "partitions_not_ok", "total_lag",
                  "max_lag_topic", "max_lag_partition", "max_lag", "complete"]


def group_status_local(partitions: pd.DataFrame, groups: Sequence[str] | None = None) -> pd.DataFrame:
    """group_status with pandas, from partition_status_local: per group, the worst status, lag totals, max lag.

    With `groups`, only those groups, and NOTFOUND (with no partitions) for any without a committed offset.
    """
    rows = []
    if groups is not None:
        asked = set(groups)
        partitions = partitions[partitions["group"].isin(asked)]
        rows = [(g, "NOTFOUND", None, 0, 0, None, None, None, None, 1.0)
                for g in sorted(asked - set(partitions["group"]))]
    for group, g in partitions.groupby("group", sort=True):
        severities = [SEVERITY[s] for s in g["status"]]
        worst = max(severities)
        lagged = [(int(lag), topic, int(p), s) for lag, topic, p, s
                  in zip(g["current_lag"], g["topic"], g["partition"], g["status"], strict=True) if not pd.isna(lag)]
        max_lag, max_topic, max_partition, _ = max(lagged) if lagged else (None, None, None, None)
        rows.append((group, group_status_of(worst), g["status"].iloc[severities.index(worst)], len(g),
                     sum(s != "OK" for s in g["status"]), sum(t[0] for t in lagged) if lagged else None,
                     max_topic, max_partition, max_lag, float((g["complete"] >= 1.0).mean())))
    out = pd.DataFrame(rows, columns=_GROUP_COLUMNS).sort_values("group", ignore_index=True)
    return out.astype({"partitions": "int64", "partitions_not_ok": "int64", "total_lag": "Int64",
                       "max_lag_partition": "Int32", "max_lag": "Int64"})
