"""Spark on the exported history: its own Parquet reader with pruning and pushdown, Burrow's table, NOTFOUND."""

from __future__ import annotations

import burrow_table
import pyarrow as pa
import pytest
import spark_history as h

import groupcoord.spark.commit_buckets as commit_buckets_module
from groupcoord.spark import analyze, arrow_to_spark, group_status, partition_status
from groupcoord.spark.burrow import window_status
from groupcoord.spark.end_offsets import end_offsets_frame
from groupcoord.spark.history import export_history
from groupcoord.spark.history_read import history_frames, history_tables
from groupcoord.spark.pandas_reports import group_status_local, partition_status_local


@pytest.fixture(scope="module")
def exported(tmp_path_factory):
    """The generated history (spark_history.py), its storage root and its export."""
    base = tmp_path_factory.mktemp("spark-export")
    root = h.write_history(base / "storage")
    history = str(base / "history")
    export_history(root, history, step_records=40)
    return root, history


# The reports test_reports_from_the_history_are_those_of_the_logs checks (rebalances: test_spark_reports.py).
CHECKED_REPORTS = ("commits", "partition_status", "lag", "generations", "group_status")


@pytest.fixture(scope="module")
def from_history(spark, exported):
    """Every report defined by Spark on the exported history (now = NOW), and those checked here collected."""
    root, history = exported
    analysis = analyze(spark, root, history=history, until_ms=h.NOW, groups=["alpha", "nobody"])
    reports = analysis.reports()
    return analysis, {name: [r.asDict(recursive=True) for r in reports[name].collect()] for name in CHECKED_REPORTS}


def test_reports_from_the_history_are_those_of_the_logs(from_history):
    _, collected = from_history
    assert h.by_key(collected["commits"], h.COMMIT_COLUMNS) == h.EXPECTED_COMMITS
    assert h.by_key(collected["partition_status"], h.STATUS_COLUMNS) == h.EXPECTED_STATUS
    assert h.by_key(collected["lag"], h.LAG_COLUMNS) == h.EXPECTED_LAG
    generations = [(r["group"], r["generation"], r["started_ms"], r["ended_ms"], r["leader"], r["member_count"],
                    r["members"], r["records"]) for r in collected["generations"]]
    assert generations == h.EXPECTED_GENERATIONS
    groups = {r["group"]: (r["status"], r["partitions"]) for r in collected["group_status"]}
    assert groups == {"alpha": ("ERR", 5), "nobody": ("NOTFOUND", 0)}


def test_spark_prunes_dates_and_pushes_the_time_range_into_the_parquet_scan(spark, exported):
    _, history = exported
    frames = history_frames(spark, history, since_ms=h.ms(50), until_ms=h.ms(100))
    spark.conf.set("spark.sql.maxMetadataStringLength", "4096")  # the whole scan description in the plan
    plan = frames.commits._jdf.queryExecution().executedPlan().toString()
    assert "FileScan parquet" in plan and "PartitionFilters: [isnotnull(date" in plan, plan
    assert "GreaterThanOrEqual(log_timestamp," in plan and "LessThanOrEqual(log_timestamp," in plan, plan
    spark_offsets = sorted((r.log_partition, r.log_offset) for r in frames.commits.collect())
    local, _ = history_tables(history, since_ms=h.ms(50), until_ms=h.ms(100))
    assert spark_offsets == sorted(zip(local["log_partition"].to_pylist(), local["log_offset"].to_pylist(),
                                       strict=True))
    assert 0 < len(spark_offsets) < h.events().__len__()


def test_a_time_range_limits_every_report_and_pandas_agrees(spark, from_history, exported):
    root, history = exported
    analysis, _ = from_history
    until = h.ms(100)
    ranged = analyze(spark, root, history=history, since_ms=h.ms(30), until_ms=until, cache=False)
    status = {(r.group, r.topic, r.partition): (r.status, r.window_commits) for r in ranged.partition_status.collect()}
    commits, _ = history_tables(history, since_ms=h.ms(30), until_ms=until)
    local = partition_status_local(commits, analysis.samples, until, topics={"events": 5, "audit": 2})
    assert status == {(g, t, p): (s, n) for g, t, p, s, n in zip(local["group"], local["topic"], local["partition"],
                                                                 local["status"], local["window_commits"], strict=True)}
    assert status[("alpha", "events", 0)][1] == 7  # commits at 35, 45, ..., 95 s


def test_deleted_topics_are_dropped_and_pandas_agrees(spark, from_history, exported):
    analysis, _ = from_history
    samples = end_offsets_frame(spark, analysis.samples)
    # Cached: group_status below reads it again.
    status = partition_status(analysis.loaded.commits, samples, h.NOW, topics={"events": 2}).cache()
    keys = sorted((r.group, r.topic, r.partition) for r in status.collect())
    assert keys == [("alpha", "events", 0), ("alpha", "events", 1), ("beta", "events", 0)]
    groups = {r.group: r.status for r in group_status(status, ["alpha", "gamma", "zeta"]).collect()}
    status.unpersist()
    commits, _ = history_tables(exported[1])
    local = group_status_local(partition_status_local(commits, analysis.samples, h.NOW, topics={"events": 2}),
                               ["alpha", "gamma", "zeta"])
    assert groups == dict(zip(local["group"], local["status"], strict=True))
    assert groups == {"alpha": "ERR", "gamma": "NOTFOUND", "zeta": "NOTFOUND"}


def test_burrow_evaluator_table_in_spark(spark):
    rows = burrow_table.ROWS
    table = pa.table({
        "row": list(range(len(rows))),
        "window_offsets": pa.array([r[0] for r in rows], pa.list_(pa.int64())),
        "window_lags": pa.array([r[2] for r in rows], pa.list_(pa.int64())),
        "window_start_ms": [r[1][0] for r in rows],
        "window_end_ms": [r[1][-1] for r in rows],
        "window_commits": [len(r[0]) for r in rows],
        "committed_offset": [r[0][-1] for r in rows],
        "current_lag": pa.array([r[3] for r in rows], pa.int64()),
        "recent_end_offsets": pa.array([r[4] for r in rows], pa.list_(pa.int64())),
        "complete": [1.0] * len(rows),
    })
    df = arrow_to_spark(spark, table)
    parts = [window_status(df.where(df.row.isin([i for i, r in enumerate(rows) if (r[5], r[6]) == key])), key[0],
                           allowed_lag=key[1]) for key in sorted({(r[5], r[6]) for r in rows})]
    result = parts[0]
    for part in parts[1:]:
        result = result.unionByName(part)
    got = {r.row: r.status for r in result.collect()}
    assert got == {i: r[7] for i, r in enumerate(rows)}


def test_narrowing_to_the_newest_buckets_changes_no_status(spark, from_history, monkeypatch):
    analysis, _ = from_history
    samples = end_offsets_frame(spark, analysis.samples)
    monkeypatch.setattr(commit_buckets_module, "BUCKET_OFFSETS", 4)  # many buckets per key: the narrowing really cuts
    for window in (3, 10):
        narrowed = partition_status(analysis.loaded.commits, samples, h.NOW, window=window).collect()
        monkeypatch.setattr(commit_buckets_module, "BUCKET_OFFSETS", 1 << 40)  # one bucket: nothing is cut
        whole = partition_status(analysis.loaded.commits, samples, h.NOW, window=window).collect()
        monkeypatch.setattr(commit_buckets_module, "BUCKET_OFFSETS", 4)
        assert [r.asDict(recursive=True) for r in narrowed] == [r.asDict(recursive=True) for r in whole]
        assert len(narrowed) == len(h.EXPECTED_STATUS)
