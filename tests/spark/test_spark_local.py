"""Loading and the reports without Spark: decoding ranges, torn tails, pandas reports, rendering."""

from __future__ import annotations

import inspect
import itertools
import math
import subprocess
import sys

import burrow_table
import pandas as pd
import pytest
import spark_history as h

from groupcoord.protocol.records import OffsetCommitKey, OffsetCommitValue, Record
from groupcoord.spark.burrow_rules import evaluate
from groupcoord.spark.decode import decode_range, plan_ranges
from groupcoord.spark.end_offsets import end_offset_samples
from groupcoord.spark.loader import load_local, plan_load, storage_partitions
from groupcoord.spark.pandas_reports import (
    commit_summary_local,
    group_status_local,
    lag_report_local,
    partition_status_local,
)
from groupcoord.spark.quiet import default_log_file
from groupcoord.spark.render import format_duration, format_instant, format_table, render_rows
from groupcoord.spark.session import SparkOptions
from groupcoord.storage import StorageRoot


@pytest.fixture(scope="module")
def history(tmp_path_factory):
    """The generated history, decoded on the driver, and its end-offset samples."""
    root = h.write_history(tmp_path_factory.mktemp("history"))
    commits, groups = load_local(root, progress=None)
    return root, commits, groups, end_offset_samples(root)


def _nan_to_none(value):
    if value is pd.NA or (isinstance(value, float) and math.isnan(value)):
        return None
    return value


def _rows(df: pd.DataFrame) -> list[dict]:
    return [{k: _nan_to_none(v) for k, v in r.items()} for r in df.to_dict("records")]


def test_a_torn_last_entry_is_read_up_to_the_last_complete_entry(tmp_path):
    root, complete = h.write_torn_log(tmp_path / "torn")
    (part,) = plan_load(root)
    decoded = decode_range(part)
    assert decoded.records == complete
    assert decoded.next_offset == complete
    assert decoded.commits.column("log_offset").to_pylist() == list(range(complete))
    assert decoded.commits.column("offset").to_pylist() == [10 * i + j for i in range(4) for j in range(3)]


def test_a_segment_still_being_appended_to_is_read_as_far_as_it_is_written(tmp_path):
    storage = StorageRoot(tmp_path / "live", 1)
    log = storage.open_partition(0, sync="never", clock=lambda: h.T0)
    try:
        for i in range(3):
            log.append([Record(OffsetCommitKey("g", "t", 0), OffsetCommitValue(i, 1, "", h.T0 + i, -1))])
        log.flush()
        log.append([Record(OffsetCommitKey("g", "t", 0), OffsetCommitValue(99, 1, "", h.T0, -1))])  # staged only
        commits, _ = load_local(tmp_path / "live", progress=None)
        assert commits.column("offset").to_pylist() == [0, 1, 2]
        log.flush()
        commits, _ = load_local(tmp_path / "live", progress=None)
        assert commits.column("offset").to_pylist() == [0, 1, 2, 99]
    finally:
        log.close()


def test_ranges_follow_segments_and_cover_every_record_once(history):
    root, commits, groups, _ = history
    parts = dict(storage_partitions(root))
    ranges = plan_ranges(parts[0], 0)
    assert len(ranges) > 2
    assert ranges[0].start_offset == 0 and ranges[-1].end_offset is None
    assert all(a.end_offset == b.start_offset for a, b in itertools.pairwise(ranges))
    decoded = [decode_range(r) for r in ranges]
    offsets = [o for d in decoded for t in (d.commits, d.groups) for o in t.column("log_offset").to_pylist()]
    assert sorted(offsets) == list(range(sum(1 for e in h.events() if e[0] == 0)))
    assert commits.num_rows + groups.num_rows == len(h.events())


def test_progress_is_reported_once_per_range(history):
    root = history[0]
    events = []
    load_local(root, progress=events.append)
    assert [e.done for e in events] == list(range(1, len(plan_load(root)) + 1))
    assert all(e.total == len(events) for e in events)
    assert sum(e.records for e in events) == len(h.events())
    assert "offsets partition" in events[0].line()


def test_tombstones_are_rows_marked_as_such(history):
    _, commits, groups, _ = history
    rows = [r for r in commits.to_pylist() if r["group"] == "delta" and r["tombstone"]]
    assert len(rows) == 1 and rows[0]["offset"] is None and rows[0]["log_timestamp"] == h.DELTA_DELETED
    (tomb,) = [r for r in groups.to_pylist() if r["tombstone"]]
    assert tomb["group"] == "delta" and tomb["generation"] is None and tomb["timestamp"] == h.ms(70)
    alpha = [r for r in groups.to_pylist() if r["group"] == "alpha"]
    assert [r["generation"] for r in alpha] == [1, 1, 2, 2, 3, 3]
    assert alpha[-1]["members"][0] == {
        "member_id": "m2", "group_instance_id": None, "client_id": "client-m2", "client_host": "/10.0.0.1",
        "rebalance_timeout": 60_000, "session_timeout": 10_000,
    }


def test_local_commit_summary(history):
    _, commits, _, _ = history
    rows = _rows(commit_summary_local(commits, h.NOW))
    assert h.by_key(rows, h.COMMIT_COLUMNS) == h.EXPECTED_COMMITS


def test_local_partition_status(history):
    _, commits, _, samples = history
    rows = _rows(partition_status_local(commits, samples, h.NOW))
    assert h.by_key(rows, h.STATUS_COLUMNS) == h.EXPECTED_STATUS
    windows = h.by_key(rows, ["window_offsets", "window_lags", "window_start_ms", "window_end_ms"])
    for key, expected in h.EXPECTED_WINDOWS.items():
        assert windows[key] == expected


def test_local_partition_status_with_an_allowed_lag(history):
    _, commits, _, samples = history

    def statuses(**options):
        return {k: v[0] for k, v in h.by_key(_rows(partition_status_local(commits, samples, h.NOW, **options)),
                                             ["status"]).items()}

    expected = {k: v[0] for k, v in h.EXPECTED_STATUS.items()}
    assert statuses(allowed_lag=0) == expected
    # A window lag of at most 100 counts as none: alpha-1 (lags from 90) becomes OK; alpha-2 still stopped,
    # alpha-3 still rewound (Burrow judges a rewind it has not caught up from before the window's lags),
    # alpha-4 (lags from 510) still lagging, zeta-1 (lag unknown) still stalled.
    assert statuses(allowed_lag=100) == expected | {("alpha", "events", 1): "OK"}
    # A current lag of at most the allowed lag is OK whatever the window; an unknown one is not.
    assert statuses(allowed_lag=1200) == {k: "STALL" if k == ("zeta", "audit", 1) else "OK" for k in expected}
    with pytest.raises(ValueError, match="allowed_lag"):
        partition_status_local(commits, samples, h.NOW, allowed_lag=-1)


def test_local_group_status(history):
    _, commits, _, samples = history
    rows = _rows(group_status_local(partition_status_local(commits, samples, h.NOW)))
    got = {r["group"]: (r["status"], r["worst_partition_status"], r["partitions"], r["partitions_not_ok"],
                        r["total_lag"], (r["max_lag_topic"], r["max_lag_partition"], r["max_lag"]))
           for r in rows}
    assert got == h.EXPECTED_GROUPS
    assert [r["group"] for r in rows] == sorted(got) and {r["complete"] for r in rows} == {1.0}


def test_importing_the_package_starts_neither_spark_nor_ray():
    code = (
        "import sys, groupcoord.spark as s\n"
        "names = ['COMMITS_SCHEMA', 'END_OFFSETS_SCHEMA', 'arrow_to_spark', 'partition_status',\n"
        "         'partition_status_local', 'group_status']\n"
        "assert all(hasattr(s, n) for n in names)\n"
        "assert 'raydp' not in sys.modules\n"
        "assert 'ray' not in sys.modules or not sys.modules['ray'].is_initialized()\n"
        "from pyspark import SparkContext\n"
        "assert SparkContext._active_spark_context is None and SparkContext._gateway is None\n"
    )
    subprocess.run([sys.executable, "-c", code], check=True, timeout=120)


def test_status_options_are_keyword_only_as_documented():
    import groupcoord.spark as s

    for fn in (s.partition_status, s.partition_status_local):
        params = inspect.signature(fn).parameters
        assert list(params)[:3] == ["commits", "samples", "now_ms"]
        for name, default in (("window", s.DEFAULT_WINDOW), ("min_complete", 0.0), ("allowed_lag", 0)):
            assert params[name].kind is inspect.Parameter.KEYWORD_ONLY and params[name].default == default


def test_local_lag_report(history):
    _, commits, _, samples = history
    rows = _rows(lag_report_local(commits, samples, h.NOW))
    assert h.by_key(rows, h.LAG_COLUMNS) == h.EXPECTED_LAG


def test_end_offsets_from_a_user_table():
    samples = end_offset_samples(end_offsets={("audit", 0): 250}, now_ms=h.NOW)
    assert samples.to_pylist() == [{"topic": "audit", "partition": 0, "offset": 250, "timestamp": h.NOW}]
    listed = end_offset_samples(end_offsets=[("a", 1, 5, 7), {"topic": "b", "partition": 0, "offset": 1,
                                                                 "timestamp": 2}])
    assert listed.column("topic").to_pylist() == ["a", "b"]
    with pytest.raises(ValueError):
        end_offset_samples(end_offsets={("a", 0): 1})


def test_a_directory_without_storage_metadata_is_refused(tmp_path):
    with pytest.raises(FileNotFoundError, match="not a groupcoord storage root"):
        plan_load(tmp_path)


def test_rendering():
    assert [format_duration(v) for v in (250, 5000, 185_000, 7_380_000, 93_600_000, -5000)] == [
        "250ms", "5.0s", "3m05s", "2h03m", "1d02h", "-5.0s"]
    assert format_instant(h.ms(5)) == "2023-11-14T22:13:25.000Z"
    df = pd.DataFrame({"group": ["a", "b"], "last_commit_ms": [h.ms(5), None], "time_lag_ms": [10_000, None],
                       "commit_rate": [0.1, None], "deleted": [True, False], "window_offsets": [[1, 2], []]})
    r = render_rows(df, title="t", limit=1)
    assert r.truncated and r.rows == [["a", "2023-11-14T22:13:25.000Z", "10.0s", "0.100", "yes", "1,2"]]
    text = format_table(render_rows(df))
    assert text.splitlines()[2].split() == ["b", "-", "-", "-", "no"]


def test_spark_options_fit_one_machine_by_default():
    conf = SparkOptions().spark_configs()
    assert conf["spark.sql.shuffle.partitions"] == "2" and conf["spark.ui.enabled"] == "false"
    big = SparkOptions(num_executors=4, executor_cores=4, configs={"spark.ui.enabled": "true"}).spark_configs()
    assert big["spark.sql.shuffle.partitions"] == "32" and big["spark.ui.enabled"] == "true"


def test_the_small_default_starts_every_jvm_for_short_analyses():
    keys = ["spark.ray.raydp_app_master.extraJavaOptions", "spark.driver.extraJavaOptions",
            "spark.executor.extraJavaOptions"]
    conf = SparkOptions(log_file="/tmp/x.log").spark_configs()
    assert all(conf[k].startswith("-XX:TieredStopAtLevel=1 -XX:+UseSerialGC") for k in keys), conf
    assert conf["spark.driver.extraJavaOptions"].endswith(" -Dgroupcoord.spark.log=/tmp/x.log")
    # Bigger applications keep the JVM's defaults; a user's flags come after ours, so they win.
    big = SparkOptions(executor_cores=2, quiet=False, configs={"spark.executor.extraJavaOptions": "-Xss4m"})
    assert [big.spark_configs().get(k) for k in keys] == [None, None, "-Xss4m"]
    mine = SparkOptions(java_options=("-XX:+UseParallelGC",), configs={"spark.driver.extraJavaOptions": "-Da=1"})
    assert mine.spark_configs()["spark.driver.extraJavaOptions"].split() == [
        "-XX:+UseParallelGC", f"-Dgroupcoord.spark.log={default_log_file()}", "-Da=1"]


@pytest.mark.parametrize("row", range(len(burrow_table.ROWS)))
def test_burrow_evaluator_table(row):
    offsets, times, lags, current_lag, broker, now_ms, allowed_lag, status = burrow_table.ROWS[row]
    assert evaluate(offsets, times, lags, current_lag, broker, now_ms, allowed_lag=allowed_lag) == status


def test_a_group_asked_for_without_commits_is_notfound_and_deleted_topics_are_dropped(history):
    _, commits, _, samples = history
    status = partition_status_local(commits, samples, h.NOW, topics={"events": 3})
    assert sorted(set(zip(status["topic"], status["partition"], strict=True))) == [("events", p) for p in range(3)]
    groups = group_status_local(status, groups=["alpha", "nobody", "zeta"])
    assert groups["group"].tolist() == ["alpha", "nobody", "zeta"]
    nobody = groups.set_index("group").loc["nobody"]
    assert (nobody["status"], nobody["partitions"], nobody["complete"]) == ("NOTFOUND", 0, 1.0)
    assert groups.set_index("group").loc["zeta", "status"] == "NOTFOUND"  # its topic "audit" was dropped


def test_spark_conf_pairs_of_the_analyze_command():
    import click

    from actors.tools.cli_export import spark_conf_option

    pairs = ("spark.sql.shuffle.partitions=1", " spark.executor.extraJavaOptions =-Da=b=c")
    assert spark_conf_option(None, None, pairs) == {"spark.sql.shuffle.partitions": "1",
                                                    "spark.executor.extraJavaOptions": "-Da=b=c"}
    for bad in ("spark.ui.enabled", "=true"):
        with pytest.raises(click.BadParameter, match="KEY=VALUE"):
            spark_conf_option(None, None, (bad,))
