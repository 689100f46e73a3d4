"""What a service is made of: the settings its router and every partition actor are created with."""

from __future__ import annotations

from dataclasses import dataclass, field

from groupcoord.protocol.config import GroupConfig
from groupcoord.protocol.security.snapshot import SecurityConfig
from groupcoord.storage.partition_log import (
    DEFAULT_MIN_COMPACTION_BYTES,
    DEFAULT_MIN_DIRTY_RATIO,
    DEFAULT_SEGMENT_BYTES,
    DEFAULT_TOMBSTONE_RETENTION_MS,
)


@dataclass(frozen=True)
class Observability:
    """How a service reports itself: Ray metrics on or off and how often they are published, and its logs."""

    metrics: bool = True  # export groupcoord_* metrics through ray.util.metrics
    interval_s: float = 5.0  # how often the shard's counters and gauges are published
    lag_interval_s: float = 15.0  # how often consumer lag is computed from the topics' end offsets
    log_format: str = "text"  # "text" (key=value context) or "json" (one JSON object per line)
    log_level: str = "INFO"


@dataclass(frozen=True)
class LogSettings:
    """The partition logs' storage settings: Kafka's offsets.topic.segment.bytes and the log cleaner's."""

    segment_bytes: int = DEFAULT_SEGMENT_BYTES  # a segment rolls (and may be compacted) past this size
    min_compaction_bytes: int = DEFAULT_MIN_COMPACTION_BYTES  # closed dirty bytes before the cleaner runs
    min_dirty_ratio: float = DEFAULT_MIN_DIRTY_RATIO  # log.cleaner.min.cleanable.ratio
    tombstone_retention_ms: int = DEFAULT_TOMBSTONE_RETENTION_MS  # log.cleaner.delete.retention.ms

    def options(self) -> dict:
        """These settings as PartitionLog keyword arguments."""
        return {
            "segment_bytes": self.segment_bytes,
            "min_compaction_bytes": self.min_compaction_bytes,
            "min_dirty_ratio": self.min_dirty_ratio,
            "tombstone_retention_ms": self.tombstone_retention_ms,
        }


@dataclass(frozen=True)
class ServiceSpec:
    """A service's namespace, storage root, partition count, fsync policy, group settings and observability."""

    namespace: str | None  # where the router is named; None for a partition run outside a service
    storage_path: str
    num_partitions: int
    fsync: str = "always"
    config: GroupConfig = field(default_factory=GroupConfig)
    observability: Observability = field(default_factory=Observability)
    replication_factor: int = 1  # replicas per partition, on distinct nodes (1: one PartitionActor)
    min_insync_replicas: int = 1  # replicas (leader included) that hold a write durably before it is acknowledged
    log: LogSettings = field(default_factory=LogSettings)
    security: SecurityConfig = field(default_factory=SecurityConfig)  # authorization off unless asked for
