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
    from groupcoord.actors.tools.cli_support import fit_columns, print_table, table_width
    from groupcoord.actors.tools.demo_analysis import DEMO_WIDTH, OPTIONAL_COLUMNS

    columns = ["group", "topic", "partition", "status", "complete", "current_lag", "window_offsets", "window_lags",
               "window_commits", "window_start_ms", "window_end_ms"]
    window = ",".join(str(1000 + 37 * i) for i in range(12)) + ",…(+3)"
    rows = [["demo-group", "events", str(p), "OK", "1.000", "0", window, "0,0,0,0,0,0,0,0,0,0,0,0,…(+3)", "15",
             "2026-11-26T08:00:00.000Z", "2026-11-26T08:01:00.000Z"] for p in range(4)]
    assert table_width(columns, rows) > DEMO_WIDTH  # as it was printed before: wrapped on a 120-column terminal
    kept, cut = fit_columns(columns, rows, DEMO_WIDTH, OPTIONAL_COLUMNS)
    assert table_width(kept, cut) <= DEMO_WIDTH
    assert kept[:6] == columns[:6] and "window_end_ms" in kept and "window_offsets" not in kept
    print_table("Burrow status per partition", columns, rows, width=DEMO_WIDTH, optional=OPTIONAL_COLUMNS)
    printed = capsys.readouterr().out.splitlines()
    assert len(printed) == 1 + 1 + len(rows) and max(len(line) for line in printed) <= DEMO_WIDTH


def test_the_describe_table_drops_client_id_then_host_to_fit(capsys):
    from groupcoord.actors.tools.cli_groups import OFFSETS_COLUMNS
    from groupcoord.actors.tools.cli_support import print_table

    member = "worker-1-366a5cd9-13ed-49f0-b9b6-6923837a26ae"
    rows = [["demo-group", "events", p, 570, 570, 0, member, "192.0.2.2", "worker-1"] for p in range(3)]
    print_table(None, OFFSETS_COLUMNS, rows, width=120, optional=("CLIENT-ID", "HOST"))
    printed = capsys.readouterr().out.splitlines()
    assert max(len(line) for line in printed) <= 120 and member in printed[1]
    assert "CONSUMER-ID" in printed[0] and "CLIENT-ID" not in printed[0]
    print_table(None, OFFSETS_COLUMNS, rows)  # without a width: every column, as kafka-consumer-groups prints
    assert "CLIENT-ID" in capsys.readouterr().out
