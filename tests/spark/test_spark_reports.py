"""The reports computed by Spark running on Ray through RayDP, checked exactly on a known history.

One Spark session (one executor, one core; the `spark` fixture of conftest.py) serves every
spark test module; it takes about half a minute to start and is stopped at the end.
"""

from __future__ import annotations

import math

import pytest
import spark_history as h

from groupcoord.spark import (
    analyze,
    commit_summary,
    end_offset_samples,
    end_offsets_frame,
    group_status,
    lag_report,
    load_history,
    load_local,
    partition_status,
    run_analysis,
)
from groupcoord.spark.pandas_reports import (
    commit_summary_local,
    group_status_local,
    lag_report_local,
    partition_status_local,
)
from groupcoord.spark.plot import activity_timeseries, plot_timeseries


@pytest.fixture(scope="module")
def root(tmp_path_factory):
    """The generated history (see spark_history.py)."""
    return h.write_history(tmp_path_factory.mktemp("spark-history"))


@pytest.fixture(scope="module")
def progress_events():
    """Progress events of the module's load."""
    return []


@pytest.fixture(scope="module")
def analysis(spark, root, progress_events):
    """The history loaded into Spark, with every report defined for now = NOW."""
    return analyze(spark, root, now_ms=h.NOW, progress=progress_events.append)


@pytest.fixture(scope="module")
def series(analysis):
    """The activity time series of the module's analysis (20 buckets), computed once for the plot tests."""
    return activity_timeseries(analysis.loaded.commits, analysis.samples, now_ms=h.NOW, buckets=20)


@pytest.fixture(scope="module")
def collected(analysis):
    """Every report collected once, as lists of dicts."""
    return {name: [r.asDict(recursive=True) for r in df.collect()] for name, df in analysis.reports().items()}


def test_history_is_loaded_inside_the_cluster_with_progress(analysis, progress_events):
    loaded = analysis.loaded
    events = h.events()
    assert loaded.records == len(events)
    assert loaded.group_rows == sum(1 for e in events if type(e[2].key).__name__ == "GroupMetadataKey")
    assert loaded.commit_rows == len(events) - loaded.group_rows
    assert loaded.ranges > 4  # small segments: several per offsets partition
    assert sorted(e.done for e in progress_events) == list(range(1, loaded.ranges + 1))
    assert sum(e.records for e in progress_events) == len(events)
    assert loaded.commits.count() == loaded.commit_rows
    tomb = loaded.commits.where("tombstone").collect()
    assert [(r.group, r.offset, r.log_timestamp) for r in tomb] == [("delta", None, h.DELTA_DELETED)]
    assert loaded.groups.where("tombstone").select("group").collect()[0].group == "delta"


def test_commit_summary(collected):
    assert h.by_key(collected["commits"], h.COMMIT_COLUMNS) == h.EXPECTED_COMMITS


def test_partition_status_follows_burrow(collected):
    rows = collected["partition_status"]
    assert h.by_key(rows, h.STATUS_COLUMNS) == h.EXPECTED_STATUS
    windows = h.by_key(rows, ["window_offsets", "window_lags", "window_start_ms", "window_end_ms"])
    for key, expected in h.EXPECTED_WINDOWS.items():
        assert windows[key] == expected
    assert {r["complete"] for r in rows} == {1.0}


def test_group_status_takes_the_worst_partition(collected):
    rows = collected["group_status"]
    got = {r["group"]: (r["status"], r["worst_partition_status"], r["partitions"], r["partitions_not_ok"],
                        r["total_lag"], (r["max_lag_topic"], r["max_lag_partition"], r["max_lag"]))
           for r in rows}
    assert got == h.EXPECTED_GROUPS


def test_lag_and_time_lag(collected):
    assert h.by_key(collected["lag"], h.LAG_COLUMNS) == h.EXPECTED_LAG


def test_rebalance_history(collected):
    got = [(r["group"], r["generation"], r["started_ms"], r["ended_ms"], r["leader"], r["member_count"],
            r["members"], r["records"]) for r in collected["generations"]]
    assert got == h.EXPECTED_GENERATIONS
    assert h.by_key(collected["rebalances"], h.REBALANCE_COLUMNS, key=("group",)) == h.EXPECTED_REBALANCES


def test_spark_and_pandas_agree(analysis, collected, root):
    commits_arrow, _ = load_local(root, progress=None)
    samples = analysis.samples

    def same(spark_rows, frame, columns, **by):
        """The Spark rows and the pandas frame hold the same values of `columns` per key."""
        local = [{c: (None if isinstance(v, float) and math.isnan(v) else v) for c, v in r.items()}
                 for r in frame.astype(object).where(frame.notna(), None).to_dict("records")]
        assert h.by_key(spark_rows, columns, **by) == h.by_key(local, columns, **by)

    same(collected["commits"], commit_summary_local(commits_arrow, h.NOW), h.COMMIT_COLUMNS)
    same(collected["lag"], lag_report_local(commits_arrow, samples, h.NOW), h.LAG_COLUMNS)
    status_columns = [*h.STATUS_COLUMNS, "window_offsets", "window_lags"]
    local_status = partition_status_local(commits_arrow, samples, h.NOW)
    same(collected["partition_status"], local_status, status_columns)
    group_columns = ["status", "worst_partition_status", "partitions", "partitions_not_ok", "total_lag",
                     "max_lag_topic", "max_lag_partition", "max_lag", "complete"]
    same(collected["group_status"], group_status_local(local_status), group_columns, key=("group",))


@pytest.mark.parametrize("allowed_lag", [100, 1200])
def test_spark_and_pandas_agree_on_an_allowed_lag(analysis, spark, root, allowed_lag):
    commits_arrow, _ = load_local(root, progress=None)
    samples = end_offsets_frame(spark, analysis.samples)
    # Cached: group_status below reads it again.
    status = partition_status(analysis.loaded.commits, samples, h.NOW, allowed_lag=allowed_lag).cache()
    got = {(r.group, r.topic, r.partition): r.status for r in status.collect()}
    local = partition_status_local(commits_arrow, analysis.samples, h.NOW, allowed_lag=allowed_lag)
    assert got == {(g, t, p): st for g, t, p, st in zip(local["group"], local["topic"], local["partition"],
                                                         local["status"], strict=True)}
    assert got[("alpha", "events", 3)] == ("REWIND" if allowed_lag < 750 else "OK")
    assert got[("zeta", "audit", 1)] == "STALL"
    groups = {r.group: r.status for r in group_status(status).collect()}
    status.unpersist()
    assert groups == dict(zip(*(group_status_local(local)[c] for c in ("group", "status")), strict=True))


def test_a_user_table_of_current_end_offsets(spark, analysis):
    samples = end_offsets_frame(spark, end_offset_samples(end_offsets={("audit", 0): 250, ("audit", 1): 7},
                                                          now_ms=h.NOW))
    status = {(r.group, r.topic, r.partition): (r.status, r.current_lag, r.window_lags)
              for r in partition_status(analysis.loaded.commits, samples, h.NOW).collect()}
    # No lag is known at commit time, so WARN cannot be judged; audit-1 is caught up, hence OK.
    assert status[("zeta", "audit", 0)] == ("OK", 60, [None] * 10)
    assert status[("zeta", "audit", 1)] == ("OK", 0, [None] * 10)
    assert status[("alpha", "events", 1)] == ("STALL", None, [None] * 10)
    lag = {(r.group, r.topic, r.partition): (r.lag, r.time_lag_ms)
           for r in lag_report(analysis.loaded.commits, samples, h.NOW).collect()}
    assert lag == {("zeta", "audit", 0): (60, None), ("zeta", "audit", 1): (0, 0)}


def test_a_window_of_three_commits(analysis, spark):
    samples = end_offsets_frame(spark, analysis.samples)
    rows = {(r.group, r.topic, r.partition): (r.status, r.window_offsets)
            for r in partition_status(analysis.loaded.commits, samples, h.NOW, window=3).collect()}
    assert rows[("alpha", "events", 3)] == ("WARN", [1100, 1200, 1300])  # the rewind left the window
    assert rows[("alpha", "events", 2)] == ("STOP", [700, 800, 900])


def test_a_torn_last_entry_is_loaded_up_to_the_last_complete_entry(spark, tmp_path):
    root, complete = h.write_torn_log(tmp_path / "torn")
    loaded = load_history(spark, root, progress=None)
    try:
        assert loaded.records == complete
        offsets = [r.log_offset for r in loaded.commits.orderBy("log_offset").collect()]
        assert offsets == list(range(complete))
    finally:
        loaded.release()


def test_plot_and_time_series(series, tmp_path):
    per_group = series.groupby("group")["commits"].sum().to_dict()
    assert per_group == {"alpha": 90, "beta": 20, "delta": 5, "gamma": 20, "zeta": 40}
    last = series.sort_values("bucket_start_ms").groupby("group").tail(1).set_index("group")["lag"].to_dict()
    assert last["alpha"] == 3300 and last["beta"] == 100 and last["gamma"] == 1060
    assert last["zeta"] is None or math.isnan(last["zeta"])
    path = plot_timeseries(series, tmp_path / "report.png")
    assert path.read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"


def test_run_analysis_renders_reports_and_plots(spark, root, tmp_path):
    rendered = run_analysis(root, spark=spark, now_ms=h.NOW, reports=["group_status", "commits"],
                            plot_path=tmp_path / "p.png", progress=None)
    assert list(rendered) == ["group_status", "commits"]
    groups = {row[0]: row for row in rendered["group_status"].rows}
    assert groups["alpha"][1] == "ERR" and groups["gamma"][1] == "WARN"
    commits = rendered["commits"]
    first = dict(zip(commits.columns, commits.rows[0], strict=True))
    assert first["first_commit_ms"] == "2023-11-14T22:13:25.000Z" and first["last_commit_age_ms"] == "5.0s"
    assert (tmp_path / "p.png").stat().st_size > 0


def test_an_empty_storage_root_gives_empty_reports(spark, tmp_path):
    from groupcoord.storage import StorageRoot

    StorageRoot(tmp_path / "empty", 3)
    loaded = load_history(spark, tmp_path / "empty", progress=None)
    try:
        assert (loaded.records, loaded.ranges, loaded.commits.count(), loaded.groups.count()) == (0, 0, 0, 0)
        assert commit_summary(loaded.commits, h.NOW).collect() == []
    finally:
        loaded.release()


def test_the_plot_marks_rebalances_and_other_events_with_a_legend(analysis, series, tmp_path, monkeypatch):
    import matplotlib.pyplot as plt

    from groupcoord.spark.plot import rebalance_events

    rebalances = rebalance_events(analysis.rebalance_history, ["alpha"])
    generations = analysis.rebalance_history.where("`group` = 'alpha'").count()
    assert len(rebalances) == generations > 0 and all(kind == "rebalance" for _, kind in rebalances)
    restart = (int(series["bucket_start_ms"].median()), "coordinator restart")
    figures, close = [], plt.close
    monkeypatch.setattr(plt, "close", figures.append)  # keep the figure to look at it
    plot_timeseries(series, tmp_path / "marked.png", events=[*rebalances, restart])
    rate_ax, lag_ax = figures[0].axes
    legend = [t.get_text() for t in rate_ax.get_legend().get_texts()]
    assert "rebalance (new generation)" in legend and "coordinator restart" in legend
    assert legend.count("coordinator restart") == 1 and legend.count("rebalance (new generation)") == 1
    vertical = [line for line in lag_ax.get_lines() if len(set(line.get_xdata())) == 1]
    assert len(vertical) == len(rebalances) + 1
    close(figures[0])
