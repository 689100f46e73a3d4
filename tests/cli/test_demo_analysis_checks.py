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
