"""Structured service logs: partition, group and member on every line, JSON lines, per-request rate limiting."""

from __future__ import annotations

import io
import json
import logging
import sys
from pathlib import Path

import pytest

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "protocol"))
from shard_context import GROUP, SESSION_MS, ShardContext

from groupcoord.actors.service.logs import RateLimitFilter, make_handler
from groupcoord.actors.service.spec import Observability
from groupcoord.actors.service.telemetry import PartitionTelemetry
from groupcoord.protocol import Errors, OffsetAndMetadata, TopicPartition
from groupcoord.protocol.messages import HeartbeatResponse, OffsetCommitRequest, OffsetCommitResponse


@pytest.fixture
def captured():
    """The `groupcoord` logger writing JSON lines of partition 7 into a buffer."""
    stream = io.StringIO()
    root = logging.getLogger("groupcoord")
    handler = make_handler(7, "json", stream)
    old_level = root.level
    root.addHandler(handler)
    root.setLevel(logging.INFO)
    try:
        yield lambda: [json.loads(line) for line in stream.getvalue().splitlines()]
    finally:
        root.removeHandler(handler)
        root.setLevel(old_level)


def test_shard_lines_carry_partition_group_and_member(captured):
    ctx = ShardContext()
    gen = ctx.stable_group(2)
    ctx.heartbeat(GROUP, gen.generation, gen.leader)
    ctx.advance(SESSION_MS - 1)
    ctx.heartbeat(GROUP, gen.generation, gen.leader)
    ctx.advance(2)
    lines = captured()
    assert lines and all(line["partition"] == 7 for line in lines)
    expired = [line for line in lines if "failed its session" in line["message"]]
    assert [(e["group"], e["member"]) for e in expired] == [(GROUP, gen.followers[0])]
    assert any(line["group"] == GROUP and line["member"] is None and "rebalance" in line["message"] for line in lines)
    assert {"time", "level", "logger"} <= lines[0].keys()


def test_text_lines_put_the_context_after_the_level():
    stream = io.StringIO()
    handler = make_handler(3, "text", stream)
    record = logging.makeLogRecord({"name": "groupcoord.x", "levelno": logging.INFO, "levelname": "INFO",
                                    "msg": "hello %s", "args": ("there",), "group": "g1", "member": "m1"})
    handler.handle(record)
    assert "INFO groupcoord.x [partition=3 group=g1 member=m1] hello there" in stream.getvalue()
    with pytest.raises(ValueError, match="log format"):
        make_handler(3, "xml")


def test_repeated_lines_are_rate_limited_and_the_next_one_says_how_many_were_dropped():
    now = [0.0]
    limit = RateLimitFilter(burst=3, window_s=10.0, clock=lambda: now[0])

    def record(level=logging.INFO, key=None):
        extra = {"rate_key": key} if key else {}
        return logging.makeLogRecord({"name": "n", "levelno": level, "msg": "request %s failed", **extra})

    passed = [limit.filter(record()) for _ in range(10)]
    assert passed == [True] * 3 + [False] * 7
    assert limit.filter(record(logging.ERROR))  # errors always pass
    assert limit.filter(record(key=("join_group", 25)))  # another key has its own budget
    now[0] = 10.0
    after = record()
    assert limit.filter(after) and after.msg.endswith("(and 7 similar lines suppressed)")


def test_a_failed_request_is_logged_with_its_group_and_member_once_per_burst(captured):
    telemetry = PartitionTelemetry(7, runtime=None, options=Observability(metrics=False))
    tp = TopicPartition("t", 0)
    req = OffsetCommitRequest("g9", {tp: OffsetAndMetadata(1)}, 3, "member-1")
    for _ in range(50):
        telemetry.request("commit_offsets", req, OffsetCommitResponse({tp: Errors.ILLEGAL_GENERATION}), 0.001)
    telemetry.request("heartbeat", req, HeartbeatResponse(Errors.NONE), 0.001)  # success: no line
    lines = [line for line in captured() if "answered" in line["message"]]
    assert 1 <= len(lines) <= 10
    assert lines[0]["message"] == "commit_offsets answered ILLEGAL_GENERATION"
    assert (lines[0]["group"], lines[0]["member"], lines[0]["partition"]) == ("g9", "member-1", 7)
