"""The offset-reset planner: Kafka's reset options, clamping, parsing and CSV export."""

from __future__ import annotations

import pytest

from groupcoord.actors.tools.offset_reset import (
    ResetError,
    ResetSpec,
    export_csv,
    offset_at,
    parse_datetime_ms,
    parse_duration_ms,
    parse_topic_arg,
    plan_reset,
)
from groupcoord.protocol import TopicPartition

T0, T1 = TopicPartition("t", 0), TopicPartition("t", 1)
CURRENT = {T0: 50, T1: 10}
ENDS = {T0: 100, T1: 20}


def plan(kind, value=None, **kw):
    return plan_reset(ResetSpec(kind, value), [T0, T1], CURRENT, ENDS, **kw)


def test_earliest_latest_and_explicit_offsets_are_clamped_to_the_log():
    assert plan("to-earliest") == {T0: 0, T1: 0}
    assert plan("to-latest") == {T0: 100, T1: 20}
    assert plan("to-offset", 30) == {T0: 30, T1: 20}  # 30 is past the end of t-1
    assert plan("to-offset", -5) == {T0: 0, T1: 0}


def test_shift_by_moves_from_the_committed_offset_within_bounds():
    assert plan("shift-by", -20) == {T0: 30, T1: 0}
    assert plan("shift-by", 15) == {T0: 65, T1: 20}
    with pytest.raises(ResetError, match="no committed offset"):
        plan_reset(ResetSpec("shift-by", 1), [TopicPartition("t", 9)], {}, {})


def test_latest_needs_a_reported_end_offset():
    with pytest.raises(ResetError, match="end-offsets"):
        plan_reset(ResetSpec("to-latest"), [T0], {}, {})


def test_times_map_to_offsets_by_interpolating_end_offset_samples():
    samples = [(1000, 0), (2000, 100), (4000, 300)]
    assert offset_at(samples, 500) == 0
    assert offset_at(samples, 1500) == 50
    assert offset_at(samples, 3000) == 200
    assert offset_at(samples, 9000) == 300
    history = {T0: samples, T1: [(1000, 0), (3000, 20)]}
    assert plan("by-duration", "PT1S", history=history, now_ms=3000) == {T0: 100, T1: 10}
    assert plan("to-datetime", "1970-01-01T00:00:03", history=history) == {T0: 100, T1: 20}  # T0 clamped


def test_duration_and_datetime_parsing():
    assert parse_duration_ms("PT15M") == 15 * 60_000
    assert parse_duration_ms("P1DT2H30M") == ((24 + 2) * 60 + 30) * 60_000
    assert parse_duration_ms("pt1.5s") == 1500
    for bad in ("15m", "P", "PT", "P1X", ""):
        with pytest.raises(ResetError, match="ISO-8601 duration"):
            parse_duration_ms(bad)
    assert parse_datetime_ms("1970-01-01T00:00:01") == 1000
    assert parse_datetime_ms("1970-01-01T01:00:01+01:00") == 1000
    with pytest.raises(ResetError, match="ISO-8601 time"):
        parse_datetime_ms("yesterday")


def test_topic_arguments():
    assert parse_topic_arg("orders") == ("orders", None)
    assert parse_topic_arg("orders:2,0,2") == ("orders", [0, 2])
    for bad in (":1", "orders:x", "orders:-1", "orders:"):
        with pytest.raises(ResetError):
            parse_topic_arg(bad)


def test_export_is_kafka_csv():
    assert export_csv({T1: 5, T0: 7}) == "t,0,7\nt,1,5\n"
