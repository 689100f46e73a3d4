"""The same reports computed with pandas on the driver, from Arrow tables (see loader.load_local).

For small logs, for checking the Spark reports, and as the baseline of benchmarks/bench_spark.py.
Columns and values match commit_summary, partition_status and lag_report of the Spark modules.
"""

from __future__ import annotations

import itertools
import logging

import numpy as np
import pandas as pd
import pyarrow as pa

from .schema import COMMIT_KEY, DEFAULT_WINDOW

log = logging.getLogger(__name__)

_POS = ["log_partition", "log_offset"]


_NULLABLE_INTS = {pa.int64(): pd.Int64Dtype(), pa.int32(): pd.Int32Dtype()}


def _frame(commits: pa.Table) -> pd.DataFrame:
    df = commits.to_pandas(types_mapper=_NULLABLE_INTS.get)
    return df.sort_values(_POS, kind="stable", ignore_index=True)


def commit_summary_local(commits: pa.Table, now_ms: int) -> pd.DataFrame:
    """commit_summary with pandas."""
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
    """lag_report with pandas."""
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


def _status(offsets: np.ndarray, times: np.ndarray, lags: list, current_lag, recent: np.ndarray, now_ms: int,
            window: int, min_complete: float) -> str:
    n = len(offsets)
    if n / window < min_complete or current_lag == 0:
        return "OK"
    last = offsets[-1]
    stopped = (now_ms - times[-1]) > (times[-1] - times[0])
    if stopped and not (recent <= last).any():
        return "STOP"
    if any(lag == 0 for lag in lags):
        return "OK"
    if (np.diff(offsets) < 0).any():
        return "REWIND"
    if (offsets == offsets[0]).all():
        return "STALL"
    known = [lag for lag in lags if lag is not None]
    if len(known) >= 2 and all(b >= a for a, b in itertools.pairwise(known)):
        return "WARN"
    return "OK"


def partition_status_local(commits: pa.Table, samples: pa.Table, now_ms: int, *, window: int = DEFAULT_WINDOW,
                           min_complete: float = 0.0) -> pd.DataFrame:
    """partition_status with pandas (a Python loop over keys for the rules themselves)."""
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
        offsets = g["offset"].to_numpy()
        times = g["commit_timestamp"].to_numpy()
        lags = [None if pd.isna(e) else max(int(e) - int(o), 0) for e, o in zip(g["_end"], offsets, strict=True)]
        end, recent = ends.get((topic, partition), (None, np.array([], dtype=np.int64)))
        current_lag = None if end is None else max(end - int(offsets[-1]), 0)
        status = _status(offsets, times, lags, current_lag, recent, now_ms, window, min_complete)
        rows.append((group, topic, partition, status, int(offsets[-1]), end, current_lag, len(offsets) / window,
                     len(offsets), int(times[0]), int(times[-1]), [int(o) for o in offsets], lags))
    cols = [*COMMIT_KEY, "status", "committed_offset", "end_offset", "current_lag", "complete", "window_commits",
            "window_start_ms", "window_end_ms", "window_offsets", "window_lags"]
    out = pd.DataFrame(rows, columns=cols)
    return out.astype({"end_offset": "Int64", "current_lag": "Int64"})
