"""The demo's final check of the Spark reports: it must catch a report that disagrees with what was acknowledged."""

from __future__ import annotations

from groupcoord.actors.tools.demo_analysis import _check
from groupcoord.protocol import TopicPartition

ACKED = {TopicPartition("events", p): 100 + p for p in range(3)}
ALL_OK = {tp: "OK" for tp in ACKED}


def test_reports_that_match_the_run_pass():
    assert _check(ACKED, dict(ACKED), ALL_OK, ["OK"]) == []


def test_a_lost_or_stale_offset_a_bad_status_or_a_missing_partition_is_reported():
    stale = {**ACKED, TopicPartition("events", 1): 99}
    assert "committed offsets differ" in _check(ACKED, stale, ALL_OK, ["OK"])[0]
    stopped = {**ALL_OK, TopicPartition("events", 2): "STOP"}
    assert "not OK" in _check(ACKED, dict(ACKED), stopped, ["OK"])[0]
    missing = {tp: s for tp, s in ALL_OK.items() if tp.partition != 0}
    assert "not OK" in _check(ACKED, dict(ACKED), missing, ["OK"])[0]
    assert "group's status" in _check(ACKED, dict(ACKED), ALL_OK, ["ERR"])[0]


def test_a_burrow_partition_table_is_cut_to_the_demos_120_columns(capsys):
    from groupcoord.actors.tools.cli_support import print_table
    from groupcoord.actors.tools.demo_analysis import DEMO_WIDTH, fit_columns, table_width

    columns = ["group", "topic", "partition", "status", "complete", "current_lag", "window_offsets", "window_lags",
               "window_commits", "window_start_ms", "window_end_ms"]
    window = ",".join(str(1000 + 37 * i) for i in range(12)) + ",…(+3)"
    rows = [["demo-group", "events", str(p), "OK", "1.000", "0", window, "0,0,0,0,0,0,0,0,0,0,0,0,…(+3)", "15",
             "2026-11-26T08:00:00.000Z", "2026-11-26T08:01:00.000Z"] for p in range(4)]
    assert table_width(columns, rows) > DEMO_WIDTH  # as it was printed before: wrapped on a 120-column terminal
    kept, cut = fit_columns(columns, rows, DEMO_WIDTH)
    assert table_width(kept, cut) <= DEMO_WIDTH
    assert kept[:6] == columns[:6] and "window_end_ms" in kept and "window_offsets" not in kept
    print_table("Burrow status per partition", kept, cut, width=DEMO_WIDTH)
    printed = capsys.readouterr().out.splitlines()
    assert len(printed) == 1 + 1 + len(rows) and max(len(line) for line in printed) <= DEMO_WIDTH
