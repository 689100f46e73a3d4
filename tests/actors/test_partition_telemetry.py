"""What a partition's telemetry publishes, read off a real shard and a real log (recorded, without Ray)."""

from __future__ import annotations

import asyncio
from collections import defaultdict
from types import SimpleNamespace

from groupcoord.actors.service import telemetry as telemetry_module
from groupcoord.actors.service.metrics import BY_NAME, LATENCY_BOUNDARIES, CountedHistogram
from groupcoord.actors.service.partition_runtime import _compaction_is_fatal
from groupcoord.actors.service.spec import Observability
from groupcoord.actors.service.supervisor import LoopSupervisor
from groupcoord.actors.service.telemetry import PartitionTelemetry
from groupcoord.protocol import Errors, GroupConfig, ManualClock, OffsetAndMetadata, TopicPartition
from groupcoord.protocol.messages import (
    HeartbeatRequest,
    HeartbeatResponse,
    OffsetCommitRequest,
    OffsetCommitResponse,
)
from groupcoord.protocol.shard.coordinator import GroupCoordinator
from groupcoord.storage import PartitionLog
from groupcoord.storage.errors import CompactionError


class Recorded:
    """Stands in for one ray.util.metrics object: remembers what it was told, by tags."""

    def __init__(self, kind: str) -> None:
        self.kind = kind
        self.values: dict = defaultdict(float)
        self.observations: list = []

    def inc(self, value: float = 1.0, tags: dict | None = None) -> None:
        self.values[tuple(sorted((tags or {}).items()))] += value

    def set(self, value: float, tags: dict | None = None) -> None:
        self.values[tuple(sorted((tags or {}).items()))] = value

    def observe(self, value: float, tags: dict | None = None) -> None:
        self.observations.append((value, tags or {}))


def _never_fails(error: BaseException) -> None:
    raise AssertionError(f"the actor would fail: {error!r}")


def telemetry_over(tmp_path, **log_options):
    plog = PartitionLog(tmp_path / "p0", sync="never", **log_options)
    coord = GroupCoordinator(GroupConfig(), ManualClock(0), plog)
    supervisor = LoopSupervisor(0, fail=_never_fails)
    runtime = SimpleNamespace(coord=coord, log=plog, load_ms=12.0, records_replayed=0, log_bytes=lambda: 4096,
                              supervisor=supervisor)
    telemetry = PartitionTelemetry(0, runtime, Observability(metrics=False))
    recorded: dict = {name: Recorded(spec.kind) for name, spec in BY_NAME.items() if not spec.counted_here}

    def gauge(name: str, _tags: tuple) -> Recorded:
        return recorded.setdefault(name, Recorded("gauge"))

    recorded.update({name: CountedHistogram(spec, gauge) for name, spec in BY_NAME.items() if spec.counted_here})
    telemetry.metrics = recorded  # what RayMetrics would be inside a Ray worker
    assert telemetry.set_recording(True)
    return telemetry, coord, plog, recorded


def commit(coord, group: str, offset: int, partitions: int = 5) -> None:
    offsets = {TopicPartition("t", p): OffsetAndMetadata(offset) for p in range(partitions)}
    coord.commit_offsets(OffsetCommitRequest(group, offsets))
    coord.on_durable(coord.log.flush())


def value(recorded, name: str, **tags) -> float:
    return recorded[name].values[tuple(sorted(tags.items()))]


def test_counters_advance_by_what_happened_since_the_last_publish(tmp_path):
    telemetry, coord, plog, recorded = telemetry_over(tmp_path)
    for i in range(3):
        commit(coord, "g", i)
    telemetry.publish()
    commit(coord, "g", 9)
    telemetry.publish()
    assert value(recorded, "groupcoord_offset_commits_total") == 20
    assert value(recorded, "groupcoord_log_appends_total") == 4
    assert value(recorded, "groupcoord_log_appended_records_total") == 20
    assert value(recorded, "groupcoord_log_appended_bytes_total") == plog.bytes_written > 0
    assert value(recorded, "groupcoord_groups", state="Empty") == 1
    assert value(recorded, "groupcoord_offsets") == 5
    assert value(recorded, "groupcoord_load_seconds") == 0.012
    assert value(recorded, "groupcoord_log_size_bytes") == 4096
    rate = telemetry.commit_rate()
    assert rate is not None and rate >= 0


LATENCY = "groupcoord_request_latency_seconds"


def test_request_latencies_are_counted_per_request_and_published_as_running_totals(tmp_path):
    telemetry, _, _, recorded = telemetry_over(tmp_path)
    ok, late = HeartbeatResponse(Errors.NONE), HeartbeatResponse(Errors.REBALANCE_IN_PROGRESS)
    calls = [("heartbeat", HeartbeatRequest("g", 1, f"m{i}")) for i in range(500)]
    telemetry.requests(calls, [late if i % 100 == 0 else ok for i in range(500)], 0.002)  # on a bound: le="0.002"
    telemetry.request("heartbeat", calls[0][1], ok, 0.3)
    telemetry.publish()

    def bucket(le: str, error: str = "NONE") -> float:
        return value(recorded, LATENCY + "_bucket", api="heartbeat", error=error, le=le)

    assert [bucket(le) for le in ("0.001", "0.002", "0.2", "0.5", "+Inf")] == [0, 495, 495, 496, 496]
    assert value(recorded, LATENCY + "_count", api="heartbeat", error="NONE") == 496
    assert value(recorded, LATENCY + "_sum", api="heartbeat", error="NONE") == 495 * 0.002 + 0.3
    assert bucket("+Inf", "REBALANCE_IN_PROGRESS") == 5
    assert len([k for k in recorded[LATENCY + "_bucket"].values if dict(k)["error"] == "NONE"]) == \
        len(LATENCY_BOUNDARIES) + 1
    telemetry.requests(calls[:10], [ok] * 10, 0.0001)
    telemetry.publish()
    assert bucket("0.001") == 10 and bucket("+Inf") == 506  # the totals only grow


def test_a_batch_of_distinct_answers_is_counted_by_api_and_error_and_each_failure_logged(tmp_path, caplog):
    telemetry, _, _, recorded = telemetry_over(tmp_path)
    calls = [("heartbeat", HeartbeatRequest("g", 1, f"m{i}")) for i in range(4)] + [
        ("commit_offsets", OffsetCommitRequest("g", 1, "m0", {TopicPartition("t", 0): OffsetAndMetadata(1)}))]
    answers = [HeartbeatResponse(Errors.NONE), HeartbeatResponse(Errors.NONE),  # equal, but not one object
               HeartbeatResponse(Errors.UNKNOWN_MEMBER_ID), HeartbeatResponse(Errors.UNKNOWN_MEMBER_ID),
               OffsetCommitResponse({TopicPartition("t", 0): Errors.ILLEGAL_GENERATION})]
    with caplog.at_level("INFO", logger="groupcoord.actors.service.telemetry"):
        telemetry.requests(calls, answers, 0.01)
    telemetry.publish()
    assert value(recorded, LATENCY + "_count", api="heartbeat", error="NONE") == 2
    assert value(recorded, LATENCY + "_count", api="heartbeat", error="UNKNOWN_MEMBER_ID") == 2
    assert value(recorded, LATENCY + "_count", api="commit_offsets", error="ILLEGAL_GENERATION") == 1
    logged = [r.getMessage() for r in caplog.records]
    assert logged == ["heartbeat answered UNKNOWN_MEMBER_ID"] * 2 + ["commit_offsets answered ILLEGAL_GENERATION"]


def test_compactions_are_published_once_with_duration_and_bytes_reclaimed(tmp_path):
    telemetry, coord, plog, recorded = telemetry_over(tmp_path, segment_bytes=600, min_compaction_bytes=0)
    for i in range(30):
        commit(coord, "g", i)  # the same five keys again and again: compaction keeps the last of each
    result = plog.compact()
    assert result.bytes_before > result.bytes_after
    telemetry.publish()
    telemetry.publish()
    assert value(recorded, "groupcoord_compactions_total") == 1
    assert value(recorded, "groupcoord_compaction_reclaimed_bytes_total") == result.bytes_before - result.bytes_after
    assert [v for v, _ in recorded["groupcoord_compaction_duration_seconds"].observations] == [result.seconds]
    last = telemetry.last_compaction()
    assert last is not None and last["reclaimed_bytes"] == result.bytes_before - result.bytes_after


def test_paused_metrics_record_nothing_and_resume_from_the_totals(tmp_path):
    telemetry, coord, _, recorded = telemetry_over(tmp_path)
    assert not telemetry.set_recording(False)
    commit(coord, "g", 1)
    telemetry.publish()
    telemetry.flushed(0.001, 5)
    telemetry.request("heartbeat", HeartbeatRequest("g", 1, "m"), HeartbeatResponse(Errors.NONE), 0.001)
    assert recorded["groupcoord_offset_commits_total"].values == {}
    assert recorded["groupcoord_log_flush_seconds"].observations == []
    telemetry.set_recording(True)
    telemetry.publish()
    assert value(recorded, "groupcoord_offset_commits_total") == 5
    assert recorded[LATENCY + "_count"].values == {}  # the paused heartbeat was not counted


def test_lag_series_that_disappear_are_set_to_nan(tmp_path):
    telemetry, coord, _, recorded = telemetry_over(tmp_path)
    commit(coord, "g", 7, partitions=2)
    asyncio.run(telemetry.publish_lag({"t": {"partitions": 2, "end_offsets": {"0": 10, "1": 7}}}))
    assert value(recorded, "groupcoord_consumer_lag", group="g", topic="t", partition="0") == 3
    assert value(recorded, "groupcoord_consumer_group_sum_lag", group="g") == 3
    asyncio.run(telemetry.publish_lag({}))  # the topic's end offsets are gone
    lag = value(recorded, "groupcoord_consumer_lag", group="g", topic="t", partition="0")
    assert lag != lag  # NaN



def test_lag_is_published_in_steps_while_requests_change_the_groups(tmp_path, monkeypatch):
    telemetry, coord, _, recorded = telemetry_over(tmp_path)
    monkeypatch.setattr(telemetry_module, "LAG_STEP", 3)
    for g in range(6):
        commit(coord, f"g{g}", g, partitions=2)
    during: list[bool] = []

    async def main() -> None:
        publishing = asyncio.ensure_future(
            telemetry.publish_lag({"t": {"partitions": 2, "end_offsets": {"0": 10, "1": 10}}}))
        for i in range(4):  # requests served meanwhile: new groups, and a new topic in a group being read
            await asyncio.sleep(0)
            during.append(not publishing.done())
            commit(coord, f"new{i}", 1, partitions=2)
            coord.commit_offsets(OffsetCommitRequest("g5", {TopicPartition(f"other{i}", 0): OffsetAndMetadata(1)}))
        await publishing

    asyncio.run(main())
    assert during[:2] == [True, True]  # the walk let other work run before it finished
    assert [value(recorded, "groupcoord_consumer_group_sum_lag", group=f"g{g}") for g in range(6)] == \
        [2 * (10 - g) for g in range(6)]

def test_background_failures_are_counted_by_loop_and_timer_failures_once(tmp_path):
    telemetry, coord, _, recorded = telemetry_over(tmp_path)

    def broken_timer() -> None:
        raise RuntimeError("a bug in one timer")

    coord.runtime.timers.schedule(("heartbeat", "g", "m"), coord.runtime.monotonic(), broken_timer)
    coord.tick()

    def failing(times: int, error: Exception):
        left = {"n": times}

        async def turn() -> None:
            if left["n"] > 0:
                left["n"] -= 1
                raise error
            await asyncio.Event().wait()  # then healthy: one long turn until close()

        return turn

    async def loops() -> None:
        supervisor = telemetry.runtime.supervisor
        supervisor.backoff_s = 0.001
        supervisor.start("compaction", failing(2, CompactionError("disk full", False)), fatal=_compaction_is_fatal)
        supervisor.start("interval sync", failing(1, OSError("EIO")))
        while sum(supervisor.failures.values()) < 3:
            await asyncio.sleep(0.001)
        await supervisor.close()

    asyncio.run(loops())
    telemetry.publish()
    telemetry.publish()
    assert coord.stats.timer_failures == coord.timer_failures == 1
    assert value(recorded, "groupcoord_timer_failures_total") == 1
    assert value(recorded, "groupcoord_loop_errors_total", loop="compaction") == 2
    assert value(recorded, "groupcoord_loop_errors_total", loop="interval sync") == 1
    assert value(recorded, "groupcoord_compaction_failures_total") == 2
