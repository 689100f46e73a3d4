"""What a shard counts as it works, and the gauges read off its state: the facts behind the service's metrics.

Kafka's group coordinator exposes these as group-coordinator-metrics (offset-commit-rate,
group-rebalance-rate, group-completed-rebalance-rate, offset-expiration-rate, NumGroups*,
NumOffsets). The shard only keeps plain numbers here; the service turns them into metrics.
Counters grow only by live work (never by a replay), so a restarted shard starts them at zero.
"""

from __future__ import annotations

from collections import deque
from dataclasses import dataclass, field
from typing import Container, Iterable, Iterator, Mapping, Protocol

# Rebalance durations waiting for the service to take them; older ones are dropped past this many.
MAX_PENDING_DURATIONS = 10_000


class ShardStats:
    """Cumulative counters of one shard, plus the rebalance durations not yet taken by the service."""

    __slots__ = (
        "commit_requests",
        "completed_rebalances",
        "expiry_write_failures",
        "group_deletions",
        "offset_commits",
        "offset_deletions",
        "offset_expirations",
        "rebalance_durations_ms",
        "rebalances",
        "refused_writes",
        "session_expirations",
        "timer_failures",
    )

    def __init__(self) -> None:
        self.offset_commits = 0  # offsets (partitions) committed: Kafka's offset-commit-count
        self.commit_requests = 0  # OffsetCommit requests that wrote offsets
        self.rebalances = 0  # moves to PreparingRebalance: group-rebalance-count
        self.completed_rebalances = 0  # rebalances that reached Stable: group-completed-rebalance-count
        self.session_expirations = 0  # members removed because their session expired
        self.offset_expirations = 0  # offsets removed by the retention sweep (KIP-211)
        self.offset_deletions = 0  # offsets removed by OffsetDelete
        self.group_deletions = 0  # groups removed by DeleteGroups or by the retention sweep
        self.expiry_write_failures = 0  # retention sweep steps whose tombstones the log refused (retried next pass)
        self.timer_failures = 0  # timer callbacks that raised (logged; the other timers went on)
        self.refused_writes = 0  # requests whose records the log refused (answered UNKNOWN_SERVER_ERROR)
        self.rebalance_durations_ms: deque[int] = deque(maxlen=MAX_PENDING_DURATIONS)

    def take_rebalance_durations(self) -> list[int]:
        """The durations (first join to Stable, ms) of rebalances completed since the last call."""
        out = list(self.rebalance_durations_ms)
        self.rebalance_durations_ms.clear()
        return out

    def counters(self) -> dict[str, int]:
        """The cumulative counters by name."""
        return {name: getattr(self, name) for name in self.__slots__ if name != "rebalance_durations_ms"}


@dataclass(frozen=True)
class ShardGauges:
    """The shard's state at one moment: groups per state, members, offsets and what waits in purgatory."""

    groups_by_state: Mapping[str, int] = field(default_factory=dict)  # Kafka's NumGroups<State>
    members: int = 0
    offsets: int = 0  # Kafka's NumOffsets
    timers: Mapping[str, int] = field(default_factory=dict)  # armed timers by kind (heartbeat, join, sync, ...)
    parked: Mapping[str, int] = field(default_factory=dict)  # requests parked in a rebalance, by API
    awaiting_durability: int = 0  # responses and actions waiting for the log's fsync

    @property
    def groups(self) -> int:
        """Every group of the shard (Kafka's NumGroups)."""
        return sum(self.groups_by_state.values())


@dataclass(frozen=True)
class PartitionLag:
    """A group's committed offset of one topic partition, the topic's end offset, and the difference."""

    group: str
    topic: str
    partition: int
    committed: int
    end_offset: int

    @property
    def lag(self) -> int:
        """Messages between the committed offset and the end (never negative, as kafka-lag-exporter)."""
        return max(0, self.end_offset - self.committed)


class CommittedOffsets(Protocol):
    """A group's committed offsets as consumer lag reads them (offsets.columns.GroupOffsets, above this room)."""

    def committed_of(self, topics: Container[str]) -> list[tuple[str, int, int]]:
        """(topic, partition, committed offset) of the partitions of `topics` that have one."""
        ...


def consumer_lag(committed: Iterable[tuple[str, CommittedOffsets]], end_offsets: Mapping[str, Mapping[int, int]]
                 ) -> Iterator[PartitionLag]:
    """The lag of every committed offset (`coord.offsets.items()`) whose topic partition has a known end offset.

    Only the offsets of topics with end offsets are read, from the columns: a partition of a million offsets
    and no end offsets known takes milliseconds, not the second that building every value took."""
    known = {topic: ends for topic, ends in end_offsets.items() if ends}
    if not known:
        return
    for group_id, offsets in committed:
        for topic, partition, offset in offsets.committed_of(known):
            end = known[topic].get(partition)
            if end is not None:
                yield PartitionLag(group_id, topic, partition, offset, end)
