"""Commit rate and lag over time per group: a small time series computed in Spark, drawn as a PNG.

Spark reduces the history to one row per group and time bucket (commit counts) and one per
key and bucket (the last committed offset); only those go to the driver, where the committed
offsets are carried forward and compared with the end offsets interpolated at each bucket's end.
"""

from __future__ import annotations

import logging
import math
from pathlib import Path
from typing import Any, Sequence

import numpy as np
import pandas as pd
import pyarrow as pa

from .schema import COMMIT_KEY

log = logging.getLogger(__name__)


def activity_timeseries(
    commits: Any, samples: pa.Table | None, *, now_ms: int | None = None, buckets: int = 60, max_groups: int = 8
) -> pd.DataFrame:
    """Per group and time bucket: commits, commit_rate (per second) and lag (summed over partitions).

    Buckets split [first commit, max(last commit, now_ms)] evenly; only the `max_groups` groups
    with the most commits are kept. Lag is null where no end offset of its partitions is known.
    """
    from pyspark.sql import functions as F

    # Two passes over the history: one aggregation per group (its commits and first and last commit time,
    # which give the time range and the busiest groups), then one per key and bucket over those groups.
    columns = ["group", "bucket_start_ms", "bucket_end_ms", "commits", "commit_rate", "lag"]
    per_group = _collect(commits.where(~F.col("tombstone")).groupBy("group").agg(
        F.count(F.lit(1)).alias("count"), F.min("commit_timestamp").alias("t0"), F.max("commit_timestamp").alias("t1")))
    firsts = [int(t) for t in per_group["t0"] if t is not None]
    if not firsts:
        return pd.DataFrame(columns=columns)
    t0 = min(firsts)
    t1 = max(max(int(t) for t in per_group["t1"] if t is not None), now_ms if now_ms is not None else 0)
    width = max(1, math.ceil((t1 - t0 + 1) / buckets))
    busiest = sorted((-int(n), g) for g, n in zip(per_group["group"], per_group["count"], strict=True))
    top = [g for _, g in busiest[:max_groups]]
    chosen = commits.where(F.col("group").isin(top))
    at = F.coalesce(F.col("commit_timestamp"), F.col("log_timestamp"))
    bucketed = chosen.select("*", F.floor((at - F.lit(t0)) / F.lit(width)).cast("long").alias("bucket"))
    per_key = _collect(
        bucketed.groupBy(*COMMIT_KEY, "bucket")
        .agg(F.count(F.when(~F.col("tombstone"), 1)).alias("count"),
             F.max(F.struct("log_partition", "log_offset", "offset")).alias("r"))
        # A tombstone (deleted offset) is -1, so that carrying offsets forward stops at it.
        .select(*COMMIT_KEY, "bucket", "count", F.coalesce(F.col("r.offset"), F.lit(-1)).alias("offset"))
    )
    # Commits per group and bucket: only buckets that hold a commit (a tombstone's bucket may lie past the last).
    counts = per_key[per_key["count"] > 0].groupby(["group", "bucket"], as_index=False)["count"].sum()
    last = per_key[[*COMMIT_KEY, "bucket", "offset"]]
    nb = max(int(counts["bucket"].max()) + 1 if len(counts) else 0, buckets)
    ends = _end_offset_series(samples)
    starts = t0 + width * np.arange(nb)
    rows = []
    for group in top:
        c = counts[counts["group"] == group].set_index("bucket")["count"].reindex(range(nb), fill_value=0)
        lag = np.zeros(nb)
        known = np.zeros(nb, dtype=bool)
        for (topic, partition), g in last[last["group"] == group].groupby(["topic", "partition"]):
            offsets = np.array(g.set_index("bucket")["offset"].reindex(range(nb)).ffill(), dtype=float)
            offsets[offsets < 0] = np.nan
            series = ends.get((topic, partition))
            if series is None:
                continue
            end = np.interp(starts + width, series[0], series[1], left=np.nan)
            part_lag = np.maximum(end - offsets, 0)
            ok = ~np.isnan(part_lag)
            lag[ok] += part_lag[ok]
            known |= ok
        for b in range(nb):
            rows.append((group, int(starts[b]), int(starts[b] + width), int(c.iloc[b]), c.iloc[b] * 1000.0 / width,
                         lag[b] if known[b] else None))
    return pd.DataFrame(rows, columns=columns)


def _collect(df: Any) -> pd.DataFrame:
    # Small results only; collect() rather than toPandas(), which PySpark 3.5 runs poorly on pandas 3.
    return pd.DataFrame([tuple(r) for r in df.collect()], columns=df.columns)


def _end_offset_series(samples: pa.Table | None) -> dict[tuple[str, int], tuple[np.ndarray, np.ndarray]]:
    if samples is None or samples.num_rows == 0:
        return {}
    s = samples.to_pandas().sort_values(["topic", "partition", "timestamp"], kind="stable")
    return {
        (t, int(p)): (g["timestamp"].to_numpy(dtype=float), g["offset"].to_numpy(dtype=float))
        for (t, p), g in s.groupby(["topic", "partition"])
    }


# How each kind of event is marked: line style, colour, and the legend's words.
EVENT_STYLES = {
    "rebalance": {"linestyle": "--", "color": "0.35", "linewidth": 1.0, "label": "rebalance (new generation)"},
    "coordinator restart": {"linestyle": "-", "color": "tab:red", "linewidth": 1.6, "label": "coordinator restart"},
}


def rebalance_events(rebalance_history: Any, groups: Sequence[str] | None = None) -> list[tuple[int, str]]:
    """(time in ms, "rebalance") of every generation's start in a rebalance history (Spark), of `groups` if given."""
    rows = rebalance_history.select("group", "started_ms").collect()
    return sorted((int(r["started_ms"]), "rebalance") for r in rows
                  if r["started_ms"] is not None and (groups is None or r["group"] in groups))


def plot_timeseries(
    series: pd.DataFrame,
    path: str | Path,
    *,
    title: str = "groupcoord: consumer groups",
    events: Sequence[tuple[int, str]] = (),
) -> Path:
    """Draw commit rate (top) and lag (bottom) per group over time into a PNG at `path`.

    `events` are (time in ms, kind) marked on both plots as vertical lines, one legend entry per kind
    (EVENT_STYLES: "rebalance", "coordinator restart"; another kind gets a dotted line).
    """
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    path = Path(path)
    fig, (rate_ax, lag_ax) = plt.subplots(2, 1, sharex=True, figsize=(10, 6.5))
    try:
        for group, g in series.groupby("group", sort=True):
            t = pd.to_datetime(g["bucket_start_ms"], unit="ms", utc=True)
            rate_ax.step(t, g["commit_rate"], where="post", label=str(group))
            lag = pd.to_numeric(g["lag"], errors="coerce")
            if lag.notna().any():
                lag_ax.step(t, lag, where="post", label=str(group))
        marked: set[str] = set()
        for at_ms, kind in sorted(events):
            style = dict(EVENT_STYLES.get(kind, {"linestyle": ":", "color": "tab:purple", "label": kind}))
            label = style.pop("label")
            when = pd.to_datetime(at_ms, unit="ms", utc=True)
            for ax in (rate_ax, lag_ax):
                ax.axvline(when, **style, label="_nolegend_" if kind in marked or ax is lag_ax else label)
            marked.add(kind)
        rate_ax.set_ylabel("commits / s")
        rate_ax.set_title(title)
        lag_ax.set_ylabel("lag (offsets)")
        lag_ax.set_xlabel("time (UTC)")
        for ax in (rate_ax, lag_ax):
            ax.grid(True, alpha=0.3)
        if len(series) or marked:
            rate_ax.legend(loc="upper right", fontsize="small", ncol=2)
        fig.autofmt_xdate()
        fig.tight_layout()
        fig.savefig(path, format="png", dpi=100)
    finally:
        plt.close(fig)
    log.info("wrote %s", path)
    return path


def plot_report(
    commits: Any,
    samples: pa.Table | None,
    path: str | Path,
    *,
    now_ms: int | None = None,
    buckets: int = 60,
    max_groups: int = 8,
    events: Sequence[tuple[int, str]] = (),
    rebalances: Any = None,
) -> Path:
    """Commit rate and lag over time per group (the busiest `max_groups`) as a PNG at `path`, with `events` and
    the rebalances of the plotted groups (from a rebalance history, reports.rebalance_history) marked."""
    series = activity_timeseries(commits, samples, now_ms=now_ms, buckets=buckets, max_groups=max_groups)
    marks = list(events)
    if rebalances is not None and len(series):
        marks += rebalance_events(rebalances, sorted(set(series["group"])))
    return plot_timeseries(series, path, events=marks)
