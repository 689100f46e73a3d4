"""Offset retention (KIP-211) in bounded steps, so that a sweep of many expired offsets never holds up requests.

Kafka's Java coordinator runs cleanupGroupMetadata over every group at once. Here the pass walks
the groups with a cursor and looks at no more than `step_size` offsets per step: expired offsets get
tombstones, and an Empty group left without offsets gets a group tombstone (and only then, once the
log took it, is marked Dead). Whether an offset has expired is decided again at the step that
tombstones it, so a commit that lands between steps is never deleted.
"""

from __future__ import annotations

import logging
from typing import Callable

from .config import GroupConfig
from .expiration import expiration_condition, is_expired
from .group import ClassicGroup, GroupState
from .log import RecordBatchTooLarge
from .offset_manager import OffsetMetadataManager
from .records import Record
from .runtime import ShardRuntime
from .values import TopicPartition

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
        self.expired_total = 0
        self.groups_deleted_total = 0
        self.refused_total = 0

    def start(self) -> None:
        """Begin a new pass over the groups the shard has now."""
        self._group_ids = list(self.offsets.groups.groups)
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
        expired = 0
        while budget > 0 and self.running:
            group_id = self._group_ids[self._next_group]
            group = self.offsets.groups.get_group(group_id)
            if group is None or group.in_state(GroupState.DEAD):
                self._next_group_please()
                continue
            if self._partitions is None:
                self._partitions, self._next_partition = self.offsets.offset_keys(group_id), 0
            chunk = self._partitions[self._next_partition : self._next_partition + budget]
            self._next_partition += len(chunk)
            budget -= max(len(chunk), 1)
            condition = expiration_condition(group)
            tombstoned = 0
            if condition is not None:
                for tp in chunk:
                    value = self.offsets.committed_value(group_id, tp)
                    if value is not None and is_expired(condition, tp, value, now, self.config.offsets_retention_ms):
                        records.append(self.offsets.tombstone(group_id, tp))
                        tombstoned += 1
            expired += tombstoned
            if self._next_partition >= len(self._partitions):
                left = self.offsets.offset_count(group_id) - tombstoned
                if group.in_state(GroupState.EMPTY) and left == 0:
                    records.append(self.offsets.groups.group_tombstone(group_id))
                    emptied.append(group)
                self._next_group_please()
        self._write(records, emptied, expired)
        return self.running

    def _next_group_please(self) -> None:
        self._next_group += 1
        self._partitions = None

    def _write(self, records: list[Record], emptied: list[ClassicGroup], expired: int) -> None:
        if not records:
            return
        try:
            self.rt.append(records)
        except RecordBatchTooLarge as e:
            # Nothing changed; the next pass tries again.
            self.refused_total += 1
            log.error("offset expiry could not store %d records: %s", len(records), e)
            return
        for group in emptied:
            self._mark_dead(group)
        self.expired_total += expired
        self.groups_deleted_total += len(emptied)
        log.info("offset expiry removed %d offsets and %d empty groups", expired, len(emptied))
