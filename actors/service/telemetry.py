"""What one partition actor reports about itself: request latencies, the shard's counters and gauges, its log, lag.

The request path and the runtime's group commit call `request`/`requests` and `flushed` (cheap:
request latencies are counted in this process, a batch's once per API and error, and a flush is
one histogram observation); everything else, and the latency counts, go to Ray in `turn`, which the
runtime's loop supervisor runs every `interval_s` (computing consumer lag every `lag_interval_s`).
With metrics off nothing is sent to Ray, but the turn still samples the commit count for
`groupcoord status`. Requests answered with an error are logged, rate-limited.
"""

from __future__ import annotations

import asyncio
import logging
import math
import time
from collections import Counter, deque
from dataclasses import dataclass
from typing import Any, Callable, Sequence

from groupcoord.protocol import Errors
from groupcoord.protocol.responses import response_error
from groupcoord.protocol.shard.stats import consumer_lag

from .metrics import RayMetrics
from .spec import Observability

log = logging.getLogger(__name__)

# ShardStats counter -> the metric it feeds.
_SHARD_COUNTERS = {
    "offset_commits": "groupcoord_offset_commits_total",
    "rebalances": "groupcoord_rebalances_total",
    "completed_rebalances": "groupcoord_completed_rebalances_total",
    "session_expirations": "groupcoord_session_expirations_total",
    "offset_expirations": "groupcoord_offset_expirations_total",
    "offset_deletions": "groupcoord_offset_deletions_total",
    "group_deletions": "groupcoord_group_deletions_total",
    "expiry_write_failures": "groupcoord_offset_expiry_failures_total",
    "timer_failures": "groupcoord_timer_failures_total",
    "refused_writes": "groupcoord_refused_writes_total",
}
# The supervised loop whose failed turns are failed compactions (see partition_runtime).
COMPACTION_LOOP = "compaction"
RATE_WINDOW_S = 60.0  # the commit rate `groupcoord status` shows is over about this long
_END_OFFSETS_TIMEOUT_S = 10.0  # a router that does not answer delays the lag, never the other metrics
_MAX_ID_IN_LOG = 256  # a group or member id longer than this is cut in log lines
MAX_LAG_SERIES = 10_000  # per partition actor; past it only the per-group max and sum lags are exported
# Publishing consumer lag lets the event loop serve requests after about this many offsets or gauges: a partition
# of a million offsets with end offsets known held its requests 4 s every lag interval when it did all at once.
LAG_STEP = 2_000


@dataclass(frozen=True)
class ReplicationFacts:
    """What a leading replica knows of its partition's replication, for the metrics."""

    epoch: int
    voters: int  # the leader included
    in_sync: int  # the leader included
    lags: dict[str, int | None]  # follower replica id -> records behind the leader's log end


class PartitionTelemetry:
    """Turns one partition's activity into groupcoord_* metrics (when enabled) and facts for `status`."""

    def __init__(self, partition: int, runtime: Any, options: Observability,
                 end_offsets: Callable[[], Any] | None = None) -> None:
        self.partition = partition
        self.runtime = runtime
        self.options = options
        self.metrics = RayMetrics(partition) if options.metrics and _ray_running() else None
        self._end_offsets = end_offsets  # async: topic -> {"end_offsets": {partition: offset}}
        self._published: dict[Any, int] = {}  # counter (name, or name and tags) -> total sent
        self._tags: dict[tuple[str, Errors], dict[str, str]] = {}
        self._latency = self.metrics["groupcoord_request_latency_seconds"] if self.metrics else None
        self.recording = self.metrics is not None  # set_recording turns it off and on at runtime
        self._commit_samples: deque[tuple[float, int]] = deque()
        self._lag_series: set[tuple[str, str, int]] = set()
        self._lag_groups: set[str] = set()
        self._compactions_seen = 0
        # A leading replica's facts (epoch, voters, in-sync followers, follower lags); None without replication.
        self.replication: Callable[[], ReplicationFacts] | None = None
        self._follower_series: set[str] = set()
        self._load_published = False
        self._next_lag = time.monotonic()
        self.request_failures: Counter[str] = Counter()  # requests whose handler raised, by API

    def set_recording(self, on: bool) -> bool:
        """Record (and publish) metrics or not from now on; stays off where Ray metrics were never created."""
        self.recording = bool(on) and self.metrics is not None
        self._latency = self.metrics["groupcoord_request_latency_seconds"] if self.recording else None
        return self.recording

    # --- the request path --------------------------------------------------------------------

    def request(self, api: str, req: Any, response: Any, seconds: float) -> None:
        """One request answered after `seconds`: its latency by API and error, and a log line if it failed."""
        error = response_error(response)
        if self._latency is not None:
            self._latency.observe(seconds, self._tags_of(api, error))
        if error != Errors.NONE and log.isEnabledFor(logging.INFO):
            self._log_failed(api, req, error)

    def _tags_of(self, api: str, error: Errors) -> dict[str, str]:
        key = (api, error)
        tags = self._tags.get(key)
        if tags is None:
            tags = self._tags[key] = {"api": api, "error": error.name}
        return tags

    def request_failed(self, api: str, req: Any) -> None:
        """A handler raised on one request (a bug, or broken storage): log it with its traceback and count it.

        Call from inside the `except` block; the request itself is answered UNKNOWN_SERVER_ERROR.
        """
        self.request_failures[api] += 1
        group = getattr(req, "group_id", None)
        log.exception("%s of group %s failed; answered UNKNOWN_SERVER_ERROR", api,
                      group[:_MAX_ID_IN_LOG] if isinstance(group, str) else None,
                      extra={"group": group[:_MAX_ID_IN_LOG] if isinstance(group, str) else None})

    def requests(self, calls: Sequence[tuple[str, Any]], responses: Sequence[Any], seconds: float) -> None:
        """The requests of one `batch` call, all answered after `seconds`: counted once per API and error."""
        counts: dict[tuple[str, Errors], int] = {}
        errors: dict[int, Errors] = {}  # a batch's heartbeat answers are mostly one shared object
        for (api, req), response in zip(calls, responses, strict=True):
            error = errors.get(id(response))
            if error is None:
                error = errors[id(response)] = response_error(response)
            counts[api, error] = counts.get((api, error), 0) + 1
            if error != Errors.NONE and log.isEnabledFor(logging.INFO):
                self._log_failed(api, req, error)
        if self._latency is not None:
            for (api, error), n in counts.items():
                self._latency.observe(seconds, self._tags_of(api, error), n)

    @staticmethod
    def _log_failed(api: str, req: Any, error: Errors) -> None:
        group = getattr(req, "group_id", None)
        member = getattr(req, "member_id", None)
        log.info("%s answered %s", api, error.name,
                 extra={"group": group[:_MAX_ID_IN_LOG] if isinstance(group, str) else None,
                        "member": member[:_MAX_ID_IN_LOG] if isinstance(member, str) and member else None,
                        "rate_key": (api, error)})

    # --- the runtime's group commit ------------------------------------------------------------

    def flushed(self, seconds: float, records: int) -> None:
        """One flush (write + fsync) took `seconds` and made `records` durable."""
        if self.recording and records > 0:
            try:
                self.metrics["groupcoord_log_flush_seconds"].observe(seconds)
                self.metrics["groupcoord_log_flush_records"].observe(records)
            except Exception:  # called inside the group commit: a metric must not fail the partition
                log.exception("recording a flush failed")

    # --- publishing --------------------------------------------------------------------------

    async def turn(self) -> None:
        """Publish once, and the lag too once its interval has passed (the runtime's supervisor runs this repeatedly).

        A failure goes to the supervisor, which logs and counts it (loop "metrics") and goes on.
        """
        self.publish()
        if self.recording and self._end_offsets is not None and time.monotonic() >= self._next_lag:
            self._next_lag = time.monotonic() + self.options.lag_interval_s
            await self.publish_lag(await asyncio.wait_for(self._end_offsets(), _END_OFFSETS_TIMEOUT_S))

    def publish(self) -> None:
        """Sample the commit count, and send the shard's counters and gauges and the log's to Ray."""
        coord = self.runtime.coord
        if coord is None:
            if self.recording:
                self.metrics["groupcoord_partition_loaded"].set(0)
            return
        now = time.monotonic()
        samples = self._commit_samples
        samples.append((now, coord.stats.offset_commits))
        while len(samples) > 2 and now - samples[1][0] >= RATE_WINDOW_S:
            samples.popleft()
        if not self.recording:
            return
        stats = coord.stats
        for field, name in _SHARD_COUNTERS.items():
            self._inc_to(name, getattr(stats, field))
        durations = self.metrics["groupcoord_rebalance_duration_seconds"]
        for ms in stats.take_rebalance_durations():
            durations.observe(ms / 1000)
        self.metrics["groupcoord_request_latency_seconds"].publish()
        self._publish_gauges(coord.gauges())
        self._publish_log()
        self._publish_loop_failures()
        for api, total in list(self.request_failures.items()):
            self._inc_to("groupcoord_request_failures_total", total, {"api": api})
        if self.replication is not None:
            self._publish_replication(self.replication())

    def _inc_to(self, name: str, total: int, tags: dict[str, str] | None = None) -> None:
        """Advance counter `name` (with `tags`) to `total`, a cumulative count kept elsewhere."""
        key = name if tags is None else (name, *sorted(tags.items()))
        delta = total - self._published.get(key, 0)
        if delta > 0 and self.metrics is not None:
            self.metrics[name].inc(delta, tags)
            self._published[key] = total

    def _publish_gauges(self, gauges: Any) -> None:
        m = self.metrics
        assert m is not None
        for state, count in gauges.groups_by_state.items():
            m["groupcoord_groups"].set(count, {"state": state})
        m["groupcoord_members"].set(gauges.members)
        m["groupcoord_offsets"].set(gauges.offsets)
        for kind in {"session", "heartbeat", "join", "sync", "offsets-retention", *gauges.timers}:
            m["groupcoord_purgatory_size"].set(gauges.timers.get(kind, 0), {"kind": kind})
        for api, count in gauges.parked.items():
            m["groupcoord_parked_requests"].set(count, {"api": api})
        m["groupcoord_awaiting_durability"].set(gauges.awaiting_durability)

    def _publish_log(self) -> None:
        m, rt = self.metrics, self.runtime
        assert m is not None
        plog = rt.log
        if not self._load_published and rt.load_ms is not None:
            m["groupcoord_load_seconds"].set(rt.load_ms / 1000)
            m["groupcoord_loaded_records"].set(rt.records_replayed)
            m["groupcoord_partition_loaded"].set(1)
            self._load_published = True
        if plog is None:
            return
        self._inc_to("groupcoord_log_appends_total", plog.appends)
        self._inc_to("groupcoord_log_appended_records_total", plog.end_offset - rt.records_replayed)
        self._inc_to("groupcoord_log_appended_bytes_total", plog.bytes_written)
        m["groupcoord_log_end_offset"].set(plog.end_offset)
        m["groupcoord_log_size_bytes"].set(rt.log_bytes())
        new = plog.compaction_count - self._compactions_seen
        if new > 0:
            for _, result in list(plog.compactions)[-new:]:
                m["groupcoord_compaction_duration_seconds"].observe(result.seconds)
                m["groupcoord_compaction_reclaimed_bytes_total"].inc(max(0, result.bytes_before - result.bytes_after))
            m["groupcoord_compactions_total"].inc(new)
            self._compactions_seen = plog.compaction_count

    def _publish_loop_failures(self) -> None:
        """Failed turns of the supervised background loops, by loop; the compaction loop's are failed compactions."""
        supervisor = self.runtime.supervisor
        for loop_name, total in list(supervisor.failures.items()):
            self._inc_to("groupcoord_loop_errors_total", total, {"loop": loop_name})
        self._inc_to("groupcoord_compaction_failures_total", supervisor.failures.get(COMPACTION_LOOP, 0))

    def leader_elected(self) -> None:
        """This replica became the partition's leader."""
        if self.recording and self.metrics is not None:
            self.metrics["groupcoord_leader_elections_total"].inc()

    def _publish_replication(self, facts: ReplicationFacts) -> None:
        """The leader's epoch, voters, in-sync replicas and each follower's lag (NaN for followers gone since)."""
        m = self.metrics
        assert m is not None
        m["groupcoord_leader_epoch"].set(facts.epoch)
        m["groupcoord_replicas"].set(facts.voters)
        m["groupcoord_in_sync_replicas"].set(facts.in_sync)
        lag_gauge = m["groupcoord_follower_lag_records"]
        for replica, lag in facts.lags.items():
            lag_gauge.set(math.nan if lag is None else lag, {"replica": replica})
        for replica in self._follower_series - set(facts.lags):
            lag_gauge.set(math.nan, {"replica": replica})
        self._follower_series = set(facts.lags)

    async def publish_lag(self, topics: dict) -> None:
        """Set the lag gauges from the topics' end offsets; series of offsets gone since are set to NaN. The walk
        yields to the event loop every LAG_STEP offsets or gauges, over the groups as they were when it began."""
        coord = self.runtime.coord
        m = self.metrics
        if coord is None or m is None:
            return
        ends = {t: {int(p): int(o) for p, o in info.get("end_offsets", {}).items()} for t, info in topics.items()}
        lag_gauge, committed_gauge = m["groupcoord_consumer_lag"], m["groupcoord_consumer_committed_offset"]
        series: set[tuple[str, str, int]] = set()
        max_lag: dict[str, int] = {}
        sum_lag: dict[str, int] = {}
        step = _Steps()
        for item in consumer_lag(list(coord.offsets.items()), ends):
            lag = item.lag
            max_lag[item.group] = max(lag, max_lag.get(item.group, 0))
            sum_lag[item.group] = sum_lag.get(item.group, 0) + lag
            if len(series) < MAX_LAG_SERIES:
                key = (item.group, item.topic, item.partition)
                series.add(key)
                tags = {"group": item.group, "topic": item.topic, "partition": str(item.partition)}
                lag_gauge.set(lag, tags)
                committed_gauge.set(item.committed, tags)
            await step()
        for group, topic, partition in self._lag_series - series:
            tags = {"group": group, "topic": topic, "partition": str(partition)}
            lag_gauge.set(math.nan, tags)
            committed_gauge.set(math.nan, tags)
            await step()
        for group in max_lag:
            m["groupcoord_consumer_group_max_lag"].set(max_lag[group], {"group": group})
            m["groupcoord_consumer_group_sum_lag"].set(sum_lag[group], {"group": group})
            await step()
        for group in self._lag_groups - max_lag.keys():
            m["groupcoord_consumer_group_max_lag"].set(math.nan, {"group": group})
            m["groupcoord_consumer_group_sum_lag"].set(math.nan, {"group": group})
            await step()
        self._lag_series, self._lag_groups = series, set(max_lag)

    # --- facts for `groupcoord status` -------------------------------------------------------

    def commit_rate(self) -> float | None:
        """Offsets committed per second over the last minute or so (None until two samples exist)."""
        samples = self._commit_samples
        if len(samples) < 2:
            return None
        (t0, c0), (t1, c1) = samples[0], samples[-1]
        return (c1 - c0) / (t1 - t0) if t1 > t0 else None

    def last_compaction(self) -> dict | None:
        """When the last compaction finished (epoch s), how long it took and the bytes it freed; None if none ran."""
        plog = self.runtime.log
        if plog is None or not plog.compactions:
            return None
        finished, result = plog.compactions[-1]
        return {"finished": finished, "seconds": result.seconds,
                "reclaimed_bytes": max(0, result.bytes_before - result.bytes_after)}


def _ray_running() -> bool:
    try:
        import ray
    except ImportError:  # pragma: no cover - ray is a dependency
        return False
    return ray.is_initialized()


class _Steps:
    """Awaited once per unit of work: lets the event loop run every LAG_STEP units."""

    def __init__(self) -> None:
        self.left = LAG_STEP

    async def __call__(self) -> None:
        self.left -= 1
        if not self.left:
            self.left = LAG_STEP
            await asyncio.sleep(0)
