"""Offset retention (KIP-211) in bounded steps, so that a sweep of many expired offsets never holds up requests.

Kafka's Java coordinator runs cleanupGroupMetadata over every group at once. Here the pass walks
the groups with a cursor and looks at no more than `step_size` offsets per step: expired offsets get
tombstones, and an Empty group left without offsets gets a group tombstone (and only then, once the
log took it, is marked Dead). Whether an offset has expired is decided again at the step that
tombstones it, so a commit that lands between steps is never deleted. What a pass removes is
counted in the shard's ShardStats (offset_expirations, group_deletions, expiry_write_failures).

Consumer groups (KIP-848) are walked in the same pass, under the same budget: as in Kafka, an
offset of a topic no member subscribes to expires from its commit time, and an Empty consumer
group left without offsets is deleted with its records (their replay removes it).
"""

from __future__ import annotations

import logging
from typing import Callable

from ..classic.group import ClassicGroup, GroupState
from ..config import GroupConfig
from ..consumer.group import ConsumerGroup
from ..records import Record
from ..shard.log import RecordBatchTooLarge
from ..shard.runtime import ShardRuntime
from ..values import TopicPartition
from .expiration import expiration_condition, is_expired
from .manager import OffsetMetadataManager

log = logging.getLogger(__name__)

DEFAULT_STEP_SIZE = 1000


class RetentionSweep:
    """One offset-expiry pass over a shard's groups, run a bounded step at a time."""

    def __init__(
        self,
        runtime: ShardRuntime,
        offsets: OffsetMetadataManager,
        config: GroupConfig,
        mark_dead: Callable[[ClassicGroup], None],
        step_size: int = DEFAULT_STEP_SIZE,
    ) -> None:
        self.rt = runtime
        self.offsets = offsets
        self.config = config
        self.step_size = step_size
        self._mark_dead = mark_dead
        self._group_ids: list[str] = []
        self._next_group = 0
        self._partitions: list[TopicPartition] | None = None
        self._next_partition = 0

    def start(self) -> None:
        """Begin a new pass over the groups the shard has now."""
        self._group_ids = list(self.offsets.groups.groups) + list(self.offsets.consumer.groups)
        self._next_group = 0
        self._partitions = None

    @property
    def running(self) -> bool:
        """Whether a pass has groups left to look at."""
        return self._next_group < len(self._group_ids)

    def step(self) -> bool:
        """Look at up to `step_size` offsets and write what expired; True while the pass has more to do."""
        now = self.rt.now()
        budget = self.step_size
        records: list[Record] = []
        emptied: list[ClassicGroup] = []
        consumer_deleted = expired = 0
        while budget > 0 and self.running:
            group_id = self._group_ids[self._next_group]
            group = self.offsets.groups.get_group(group_id)
            consumer_group = self.offsets.consumer.get(group_id) if group is None else None
            if consumer_group is None and (group is None or group.in_state(GroupState.DEAD)):
                self._next_group_please()
                continue
            if self._partitions is None:
                self._partitions, self._next_partition = self.offsets.offset_keys(group_id), 0
            chunk = self._partitions[self._next_partition : self._next_partition + budget]
            self._next_partition += len(chunk)
            budget -= max(len(chunk), 1)
            if consumer_group is not None:
                tombstones = self._expired_of_consumer_group(consumer_group, chunk, now)
            else:
                tombstones = self._expired_of_classic_group(group, chunk, now)  # type: ignore[arg-type]
            records.extend(tombstones)
            expired += len(tombstones)
            if self._next_partition >= len(self._partitions):
                left = self.offsets.offset_count(group_id) - len(tombstones)
                if consumer_group is not None:
                    if consumer_group.is_empty() and left == 0:
                        records.extend(self.offsets.consumer.delete_records(consumer_group))
                        consumer_deleted += 1
                elif group.in_state(GroupState.EMPTY) and left == 0:  # type: ignore[union-attr]
                    records.append(self.offsets.groups.group_tombstone(group_id))
                    emptied.append(group)  # type: ignore[arg-type]
                self._next_group_please()
        self._write(records, emptied, consumer_deleted, expired)
        return self.running

    def _expired_of_classic_group(self, group: ClassicGroup, chunk: list[TopicPartition], now: int) -> list[Record]:
        """Tombstones of the offsets in `chunk` that KIP-211 expires in a classic group."""
        condition = expiration_condition(group)
        if condition is None:
            return []
        retention = self.config.offsets_retention_ms
        out = []
        for tp in chunk:
            value = self.offsets.committed_value(group.group_id, tp)
            if value is not None and is_expired(condition, tp, value, now, retention):
                out.append(self.offsets.tombstone(group.group_id, tp))
        return out

    def _expired_of_consumer_group(self, group: ConsumerGroup, chunk: list[TopicPartition], now: int) -> list[Record]:
        """Tombstones of the offsets in `chunk` of topics no member subscribes to, committed a retention ago."""
        subscribed = self.offsets.consumer.subscribed(group)
        cutoff = now - self.config.offsets_retention_ms
        out = []
        for tp in chunk:
            if tp.topic in subscribed:
                continue
            value = self.offsets.committed_value(group.group_id, tp)
            if value is not None and value.commit_timestamp <= cutoff:
                out.append(self.offsets.tombstone(group.group_id, tp))
        return out

    def _next_group_please(self) -> None:
        self._next_group += 1
        self._partitions = None

    def _write(self, records: list[Record], emptied: list[ClassicGroup], consumer_deleted: int, expired: int) -> None:
        if not records:
            return
        stats = self.rt.stats
        try:
            self.rt.append(records)
        except RecordBatchTooLarge as e:
            # Nothing changed; the next pass tries again.
            stats.expiry_write_failures += 1
            log.error("offset expiry could not store %d records: %s", len(records), e)
            return
        for group in emptied:
            self._mark_dead(group)
        deleted = len(emptied) + consumer_deleted
        stats.offset_expirations += expired
        stats.group_deletions += deleted
        log.info("offset expiry removed %d offsets and %d empty groups", expired, deleted)
