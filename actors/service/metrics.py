"""The service's metrics: one catalog of `groupcoord_*` metrics, created through ray.util.metrics.

Each node's Ray metrics agent exports them in Prometheus format (scrape it at the node's
metrics export port); Prometheus sees every name with Ray's `ray_` prefix, and a histogram as
its `_bucket`, `_sum` and `_count` series. Meanings follow Kafka's group-coordinator-metrics
(offset-commit-rate, group-rebalance-rate, group-completed-rebalance-rate, offset-expiration-rate,
NumGroups<State>, NumOffsets, partition-load-time) and kafka-lag-exporter for consumer lag.
Only this module touches ray.util.metrics.
"""

from __future__ import annotations

from bisect import bisect_left
from dataclasses import dataclass
from typing import Any, Callable

PROMETHEUS_PREFIX = "ray_"  # what Ray's metrics agent puts before every application metric

# Latency buckets (seconds) of requests and flushes: a Ray call is ~1 ms, an fsync 0.1-20 ms.
LATENCY_BOUNDARIES = [0.0005, 0.001, 0.002, 0.005, 0.01, 0.02, 0.05, 0.1, 0.2, 0.5, 1.0, 2.0, 5.0, 10.0, 30.0]
REBALANCE_BOUNDARIES = [0.01, 0.05, 0.1, 0.25, 0.5, 1.0, 2.5, 5.0, 10.0, 30.0, 60.0, 120.0, 300.0]
BATCH_BOUNDARIES = [1, 2, 5, 10, 20, 50, 100, 200, 500, 1000, 2000, 5000, 10000, 50000]
COMPACTION_BOUNDARIES = [0.01, 0.1, 0.5, 1.0, 2.0, 5.0, 10.0, 30.0, 60.0, 300.0]

P = ("partition",)  # the offsets partition (the coordinator shard) a series comes from


@dataclass(frozen=True)
class MetricSpec:
    """One exported metric: its kind (counter, gauge or histogram), meaning, tag keys and buckets."""

    name: str
    kind: str
    description: str
    tags: tuple[str, ...] = P
    boundaries: tuple[float, ...] = ()
    counted_here: bool = False  # a histogram counted in the process and exported as gauges (CountedHistogram)

    def prometheus_names(self) -> set[str]:
        """The series names Prometheus sees for this metric."""
        base = PROMETHEUS_PREFIX + self.name
        if self.kind == "histogram":
            return {f"{base}_bucket", f"{base}_sum", f"{base}_count"}
        return {base}


def _counter(name: str, description: str, tags: tuple[str, ...] = P) -> MetricSpec:
    return MetricSpec(name, "counter", description, tags)


def _gauge(name: str, description: str, tags: tuple[str, ...] = P) -> MetricSpec:
    return MetricSpec(name, "gauge", description, tags)


def _histogram(name: str, description: str, boundaries: list, tags: tuple[str, ...] = P,
               counted_here: bool = False) -> MetricSpec:
    return MetricSpec(name, "histogram", description, tags, tuple(boundaries), counted_here)


CATALOG: tuple[MetricSpec, ...] = (
    # --- requests (measured in the partition actor's request path) ---
    _histogram("groupcoord_request_latency_seconds",
               "Time from a request's arrival at the partition actor to its response (durable), by API and "
               "error code; its _count is the request rate. Counted in the partition actor and exported as gauges "
               "holding the running totals (see CountedHistogram): rate() and histogram_quantile() read its series "
               "as any histogram's.", LATENCY_BOUNDARIES, ("partition", "api", "error"), counted_here=True),
    _counter("groupcoord_auth_failures_total", "Requests refused by authentication (SASL_AUTHENTICATION_FAILED) or "
             "authorization (GROUP/TOPIC/CLUSTER_AUTHORIZATION_FAILED), by principal and API ('unknown': credentials "
             "naming no principal).", ("partition", "principal", "api", "error")),
    # --- the shard (Kafka's group-coordinator-metrics) ---
    _counter("groupcoord_offset_commits_total", "Offsets committed (one per partition of an OffsetCommit): "
             "Kafka's offset-commit-count."),
    _counter("groupcoord_rebalances_total", "Rebalances started (moves to PreparingRebalance): "
             "group-rebalance-count."),
    _counter("groupcoord_completed_rebalances_total", "Rebalances that reached Stable: "
             "group-completed-rebalance-count."),
    _histogram("groupcoord_rebalance_duration_seconds", "Time from the join that started a rebalance to Stable.",
               REBALANCE_BOUNDARIES),
    _counter("groupcoord_session_expirations_total", "Members removed because their session timed out."),
    _counter("groupcoord_offset_expirations_total", "Offsets removed by the retention check: offset-expiration-count."),
    _counter("groupcoord_offset_deletions_total", "Offsets removed by OffsetDelete: offset-deletion-count."),
    _counter("groupcoord_group_deletions_total", "Groups removed by DeleteGroups or by offset expiry."),
    _counter("groupcoord_offset_expiry_failures_total", "Retention sweep steps whose tombstones the log refused "
             "(nothing removed; the next pass tries again)."),
    _counter("groupcoord_timer_failures_total", "Timer callbacks (session expiry, join/sync completion, retention) "
             "that failed; each is logged and the other timers go on."),
    _counter("groupcoord_refused_writes_total", "Requests whose records the log refused (too large a batch); each "
             "was answered UNKNOWN_SERVER_ERROR and changed nothing."),
    _counter("groupcoord_request_failures_total", "Requests whose handler raised (a bug or broken storage), by API; "
             "each was logged with its traceback and answered UNKNOWN_SERVER_ERROR, the others of its batch were "
             "not affected.", ("partition", "api")),
    _gauge("groupcoord_groups", "Groups of both protocols by state: Kafka's NumGroups<State> (classic: Empty, "
           "PreparingRebalance, CompletingRebalance, Stable, Dead; consumer: also Assigning, Reconciling).",
           ("partition", "state")),
    _gauge("groupcoord_members", "Members of the partition's groups, classic and consumer."),
    _gauge("groupcoord_offsets", "Committed offsets held: Kafka's NumOffsets."),
    _gauge("groupcoord_purgatory_size", "Armed delayed operations by kind (session = one per classic group with "
           "members, heartbeat = pending member ids, consumer-session, join, sync, offsets-retention).",
           ("partition", "kind")),
    _gauge("groupcoord_parked_requests", "JoinGroup and SyncGroup requests parked in a rebalance.",
           ("partition", "api")),
    _gauge("groupcoord_awaiting_durability", "Responses waiting for their records to be fsynced."),
    # --- the log (measured in the partition runtime) ---
    _counter("groupcoord_log_appends_total", "Batches appended to the partition's log (one per state change)."),
    _counter("groupcoord_log_appended_records_total", "Records appended to the log."),
    _counter("groupcoord_log_appended_bytes_total", "Bytes written to the log."),
    _histogram("groupcoord_log_flush_seconds", "Time of one group-commit flush (write + fsync).", LATENCY_BOUNDARIES),
    _histogram("groupcoord_log_flush_records", "Records made durable by one flush (the group-commit batch size).",
               BATCH_BOUNDARIES),
    _gauge("groupcoord_log_size_bytes", "Size of the partition's log on disk."),
    _gauge("groupcoord_log_end_offset", "The log end offset (records ever appended)."),
    _counter("groupcoord_compactions_total", "Compactions of the log that ran."),
    _histogram("groupcoord_compaction_duration_seconds", "Time of one compaction.", COMPACTION_BOUNDARIES),
    _counter("groupcoord_compaction_reclaimed_bytes_total", "Bytes of log freed by compaction."),
    _counter("groupcoord_compaction_failures_total", "Compactions that failed; serving goes on and the compaction "
             "is retried with a growing backoff."),
    _counter("groupcoord_loop_errors_total", "Failed turns of the partition's supervised background loops, by loop "
             "(timers, compaction, interval sync, metrics); each is logged and retried after a backoff.",
             ("partition", "loop")),
    _gauge("groupcoord_load_seconds", "Time the partition took to load (replay) its log at its last start: "
           "Kafka's partition-load-time."),
    _gauge("groupcoord_loaded_records", "Records replayed at the partition's last start."),
    _gauge("groupcoord_partition_loaded", "1 once the partition has replayed its log and serves requests."),
    # --- consumer lag (kafka-lag-exporter's meanings; `partition` is the topic's partition here) ---
    _gauge("groupcoord_consumer_lag", "End offset of a topic partition minus the group's committed offset.",
           ("group", "topic", "partition")),
    _gauge("groupcoord_consumer_committed_offset", "A group's committed offset of a topic partition.",
           ("group", "topic", "partition")),
    _gauge("groupcoord_consumer_group_max_lag", "The largest lag of any partition the group committed.", ("group",)),
    _gauge("groupcoord_consumer_group_sum_lag", "The sum of the group's lags over its partitions.", ("group",)),
    # --- replication (exported by each partition's leader replica; absent with replication_factor 1) ---
    _gauge("groupcoord_leader_epoch", "The partition's leader epoch, as its current leader holds it."),
    _counter("groupcoord_leader_elections_total", "Times a replica of the partition became its leader; an increase "
             "after the first is a leader change (a failover, or a deposed or restarted leader)."),
    _gauge("groupcoord_replicas", "Replicas of the partition that vote in elections and acknowledgements."),
    _gauge("groupcoord_in_sync_replicas", "Voting replicas, the leader included, that hold everything the leader "
           "acknowledged; fewer than groupcoord_replicas is Kafka's UnderReplicatedPartitions."),
    _gauge("groupcoord_follower_lag_records", "Records a follower (or a new replica catching up) is behind its "
           "leader's log end; NaN until it has synced with the current leader.", ("partition", "replica")),
)

BY_NAME: dict[str, MetricSpec] = {m.name: m for m in CATALOG}


def exported_names() -> set[str]:
    """Every series name a Prometheus scrape can show for the service's metrics."""
    return {n for m in CATALOG for n in m.prometheus_names()}


def _le(boundary: float) -> str:
    """A bucket's upper bound as Prometheus writes it in the `le` label."""
    return "+Inf" if boundary == float("inf") else str(float(boundary))


class CountedHistogram:
    """A histogram counted in this process and exported as Prometheus' `_bucket`, `_count` and `_sum` series: Ray
    gauges that `publish` sets to the running totals.

    Observing costs a bisect and a few additions, where Ray's Histogram.observe costs a call into Ray's core worker
    (2-3 µs: with the loop around it, a fifth of a partition actor's CPU under batched heartbeats), and `n` equal
    values (a batch's requests, all answered at once) count in one step. The totals only grow, so rate() and
    histogram_quantile() read the series as any histogram's; Prometheus' TYPE line says gauge. The sum is exact (Ray
    sums bucket midpoints).
    """

    def __init__(self, spec: MetricSpec, gauge: Callable[[str, tuple[str, ...]], Any]) -> None:
        self.boundaries = spec.boundaries
        self._le = [_le(b) for b in (*spec.boundaries, float("inf"))]
        self._buckets = gauge(spec.name + "_bucket", (*spec.tags, "le"))
        self._count = gauge(spec.name + "_count", spec.tags)
        self._sum = gauge(spec.name + "_sum", spec.tags)
        self._series: dict[tuple[tuple[str, str], ...], _Series] = {}
        self._changed: set[_Series] = set()

    def observe(self, value: float, tags: dict[str, str] | None = None, n: int = 1) -> None:
        """Count `n` observations of `value` in the series of `tags`."""
        key = tuple(tags.items()) if tags else ()
        series = self._series.get(key)
        if series is None:
            series = self._series[key] = _Series(dict(tags or {}), len(self._le))
        series.counts[bisect_left(self.boundaries, value)] += n  # a value equal to a bound is in that bound's bucket
        series.sum += value * n
        self._changed.add(series)

    def publish(self) -> None:
        """Set the gauges of every series observed since the last publish to its totals."""
        for series in self._changed:
            tags, cumulative = series.tags, 0
            for le, count in zip(self._le, series.counts, strict=True):
                cumulative += count
                self._buckets.set(cumulative, {**tags, "le": le})
            self._count.set(cumulative, tags)
            self._sum.set(series.sum, tags)
        self._changed.clear()


class _Series:
    """One tag set's counts by bucket (not cumulative) and the sum of its values."""

    __slots__ = ("counts", "sum", "tags")

    def __init__(self, tags: dict[str, str], buckets: int) -> None:
        self.tags = tags
        self.counts = [0] * buckets
        self.sum = 0.0


class RayMetrics:
    """The catalog's metrics as ray.util.metrics objects in this process, tagged with its partition."""

    def __init__(self, partition: int | None) -> None:
        from ray.util import metrics

        def tagged(metric: Any, tags: tuple[str, ...]) -> Any:
            if partition is not None and tags[:1] == ("partition",):
                metric.set_default_tags({"partition": str(partition)})
            return metric

        self.metrics: dict[str, Any] = {}
        for spec in CATALOG:
            if spec.kind == "counter":
                metric = tagged(metrics.Counter(spec.name, spec.description, tag_keys=spec.tags), spec.tags)
            elif spec.kind == "gauge":
                metric = tagged(metrics.Gauge(spec.name, spec.description, tag_keys=spec.tags), spec.tags)
            elif spec.counted_here:
                metric = CountedHistogram(spec, lambda name, tags, d=spec.description: tagged(
                    metrics.Gauge(name, d, tag_keys=tags), tags))
            else:
                metric = tagged(metrics.Histogram(spec.name, spec.description, list(spec.boundaries),
                                                  tag_keys=spec.tags), spec.tags)
            self.metrics[spec.name] = metric

    def __getitem__(self, name: str) -> Any:
        return self.metrics[name]
