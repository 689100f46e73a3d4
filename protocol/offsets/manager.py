"""Committed offsets of one shard: OffsetCommit, OffsetFetch, OffsetDelete, DeleteGroups and expiry.

Follows Kafka's Java OffsetMetadataManager. Offsets change only by replaying OffsetCommit records
(`replay`), the same path recovery takes; every handler appends its records through the runtime
and answers with a Deferred that completes once they, and every earlier write, are durable.
Commits are synchronous through the log, so there are never "pending" regular commits to hide
from a fetch: a fetch is answered only after every earlier write is durable instead.
"""

from __future__ import annotations

import logging
from typing import Iterable, Iterator, Mapping

from ..classic.group import CONSUMER_PROTOCOL_TYPE, ClassicGroup, GroupState
from ..classic.manager import GroupMetadataManager
from ..commit_run import OffsetCommitRun
from ..config import GroupConfig
from ..consumer.group import ConsumerGroup
from ..consumer.manager import ConsumerGroupManager
from ..errors import Errors
from ..messages import (
    DeleteGroupsRequest,
    DeleteGroupsResponse,
    OffsetCommitRequest,
    OffsetCommitResponse,
    OffsetDeleteRequest,
    OffsetDeleteResponse,
    OffsetFetchPartition,
    OffsetFetchRequest,
    OffsetFetchResponse,
)
from ..records import OffsetCommitKey, OffsetCommitValue, Record
from ..shard.deferred import Deferred
from ..shard.registry import GroupRegistry
from ..shard.runtime import ShardRuntime
from ..values import OffsetAndMetadata, TopicPartition
from .columns import GroupOffsets

log = logging.getLogger(__name__)
_PLAIN = {int, str}  # the value types of a run that needs no conversion

INT64_MAX = 2**63 - 1
NO_OFFSET = OffsetFetchPartition(-1, "", -1, Errors.NONE)


def java_string_length(s: str) -> int:
    """Java's String.length(): the number of UTF-16 code units."""
    return len(s) if s.isascii() else len(s.encode("utf-16-le", "surrogatepass")) // 2


def _tombstone(group_id: str, tp: TopicPartition) -> Record:
    return Record(OffsetCommitKey(group_id, tp.topic, tp.partition), None)


class OffsetMetadataManager:
    """Owns the committed offsets of one shard's groups and the requests that read or change them."""

    def __init__(
        self,
        runtime: ShardRuntime,
        config: GroupConfig,
        registry: GroupRegistry,
        groups: GroupMetadataManager,
        consumer: ConsumerGroupManager,
    ) -> None:
        self.rt = runtime
        self.config = config
        self.registry = registry
        self.groups = groups
        self.consumer = consumer
        self._offsets: dict[str, GroupOffsets] = {}
        self._count = 0

    # --- state and replay ------------------------------------------------------------------

    def offsets_of(self, group_id: str) -> dict[TopicPartition, OffsetCommitValue]:
        """A copy of the committed offsets of `group_id` (empty if it has none), by topic, then partition."""
        offsets = self._offsets.get(group_id)
        return {} if offsets is None else dict(offsets.items())

    def has_offsets(self, group_id: str) -> bool:
        """Whether `group_id` has any committed offset."""
        return group_id in self._offsets

    def total_offsets(self) -> int:
        """How many offsets the shard holds (Kafka's NumOffsets)."""
        return self._count

    def items(self) -> Iterator[tuple[str, GroupOffsets]]:
        """(group id, its committed offsets) of every group with offsets; read-only views, not copies."""
        return iter(self._offsets.items())

    def replay(self, key: OffsetCommitKey, value: OffsetCommitValue | None) -> None:
        """Apply one OffsetCommit record: store the value (latest wins) or, for a tombstone, delete it.

        As in Kafka's Java replay, an offset of a group that does not exist creates a simple group.
        """
        group_id, topic, partition = key
        offsets = self._offsets.get(group_id)
        if value is None:
            if offsets is not None and offsets.delete(topic, partition):
                self._count -= 1
                if not len(offsets):
                    del self._offsets[group_id]
            return
        if group_id not in self.registry:
            self.groups.create_simple_group(group_id)
        if offsets is None:
            offsets = self._offsets[group_id] = GroupOffsets()
        if offsets.put(topic, partition, value):
            self._count += 1

    def replay_run(self, run: OffsetCommitRun) -> None:
        """Apply a run of OffsetCommit records by column: the state `replay` of each of its records leaves."""
        group_id = run.group_id
        if group_id not in self.registry:
            self.groups.create_simple_group(group_id)
        offsets = self._offsets.get(group_id)
        if offsets is None:
            offsets = self._offsets[group_id] = GroupOffsets()
        self._count += offsets.put_run(run.topics, run.partitions, run.offsets, run.epochs, run.metadata,
                                       run.commit_timestamp, run.expire_timestamp)

    def ensure_group(self, group_id: str) -> None:
        """The groups half of replaying an offset value: a group that does not exist becomes a simple group."""
        if group_id not in self.registry:
            self.groups.create_simple_group(group_id)

    def install(self, offsets: dict[str, GroupOffsets]) -> None:
        """Take the committed offsets a bulk load built (a fresh shard's, before any other offset is stored)."""
        if self._offsets:
            raise RuntimeError("bulk-loaded offsets go into a shard that holds none")
        self._offsets = {group_id: group for group_id, group in offsets.items() if len(group)}
        self._count = sum(len(group) for group in self._offsets.values())


    # --- OffsetCommit ----------------------------------------------------------------------

    def commit_offsets(self, req: OffsetCommitRequest) -> Deferred[OffsetCommitResponse]:
        """Validate the committer against the group, then write one record per partition."""
        partitions = [tp if type(tp) is TopicPartition else TopicPartition(*tp) for tp in req.offsets]
        group = self.registry.get(req.group_id)
        if group is None or type(group) is ClassicGroup:
            error = self._validate_commit(group, req)
        else:
            error = self.consumer.commit_error(group, req)
        if error != Errors.NONE:
            return self.rt.respond(OffsetCommitResponse({tp: error for tp in partitions}))
        if type(group) is ClassicGroup and group.in_state(GroupState.STABLE, GroupState.PREPARING_REBALANCE):
            # A commit from the current generation keeps the member's session alive.
            self.groups.refresh_session(group, req.member_id)
        now = self.rt.now()
        expire = -1 if req.retention_time_ms == -1 else min(now + req.retention_time_ms, INT64_MAX)
        errors: dict[TopicPartition, Errors] = dict.fromkeys(partitions, Errors.NONE)
        run = self._commit_run(req.group_id, partitions, req.offsets.values(), now, expire, errors)
        # The first record of an unknown group creates it as a simple group when it is replayed.
        self.rt.append(run)
        if run:
            stats = self.rt.stats
            stats.offset_commits += len(run)
            stats.commit_requests += 1
        return self.rt.respond(OffsetCommitResponse(errors))

    def _commit_run(self, group_id: str, partitions: list[TopicPartition], values: Iterable[OffsetAndMetadata],
                    now: int, expire: int, errors: dict[TopicPartition, Errors]) -> OffsetCommitRun:
        """The records of a validated commit, by column; a partition whose metadata is too long gets its error
        in `errors` instead of a record."""
        if not partitions:
            return OffsetCommitRun(group_id, (), (), (), (), (), now, expire)
        topics, numbers = zip(*partitions, strict=True)
        offsets, metadata, epochs = zip(*values, strict=True)
        # Validation let through int and str subclasses; the log's columns hold the plain types. Converting every
        # value costs a seventh of a 100-partition commit, so only a run that holds a subclass is converted.
        if {*map(type, offsets), *map(type, epochs), *map(type, metadata)} != _PLAIN:
            offsets, epochs, metadata = tuple(map(int, offsets)), tuple(map(int, epochs)), tuple(map(str, metadata))
        distinct = set(metadata)  # usually one string ("") for the whole run
        limit = self.config.offset_metadata_max_bytes
        # A str has at most 2 UTF-16 units per character, so only long metadata needs measuring.
        if 2 * max(map(len, distinct)) > limit:
            too_long = {i for i, m in enumerate(metadata) if 2 * len(m) > limit and java_string_length(m) > limit}
            for i in too_long:
                errors[partitions[i]] = Errors.OFFSET_METADATA_TOO_LARGE
            kept = [i for i in range(len(metadata)) if i not in too_long]
            topics, numbers, offsets, epochs, metadata = (
                tuple(column[i] for i in kept) for column in (topics, numbers, offsets, epochs, metadata))
        return OffsetCommitRun(group_id, topics, numbers, offsets, epochs, metadata, now, expire)

    def _validate_commit(self, group: ClassicGroup | None, req: OffsetCommitRequest) -> Errors:
        """Kafka's OffsetCommit validation (Java ClassicGroup.validateOffsetCommit), first match wins."""
        if group is None:
            # Java answers GROUP_ID_NOT_FOUND from OffsetCommit v9 on; before v9, and to the Python API
            # (no version), the answer of v0-v8 (and of Kafka's Scala coordinator).
            if req.generation_id < 0:
                return Errors.NONE
            v9 = req.api_version is not None and req.api_version >= 9
            return Errors.GROUP_ID_NOT_FOUND if v9 else Errors.ILLEGAL_GENERATION
        if group.in_state(GroupState.DEAD):
            return Errors.COORDINATOR_NOT_AVAILABLE
        if req.generation_id < 0 and group.in_state(GroupState.EMPTY):
            # The admin client or a consumer without group management: allowed while Empty.
            return Errors.NONE
        if req.generation_id >= 0 or req.member_id or req.group_instance_id is not None:
            error = self.groups.validate_member(group, req.member_id, req.group_instance_id)
            if error != Errors.NONE:
                return error
            if req.generation_id != group.generation_id:
                return Errors.ILLEGAL_GENERATION
        elif not group.in_state(GroupState.EMPTY):
            # Without member id and generation only an Empty group takes commits.
            return Errors.UNKNOWN_MEMBER_ID
        if group.in_state(GroupState.COMPLETING_REBALANCE):
            return Errors.REBALANCE_IN_PROGRESS
        return Errors.NONE

    # --- OffsetFetch -----------------------------------------------------------------------

    def fetch_offsets(self, req: OffsetFetchRequest) -> Deferred[OffsetFetchResponse]:
        """Committed offsets of some or all partitions, answered once every earlier write is durable."""
        known = req.group_id in self.registry
        if known and (req.member_id is not None or req.member_epoch >= 0):
            group = self.registry.get(req.group_id)
            if isinstance(group, ConsumerGroup):
                error = self.consumer.fetch_error(group, req.member_id, req.member_epoch)
                if error != Errors.NONE:
                    return self.rt.respond(OffsetFetchResponse(error, {}))
        committed: Mapping[TopicPartition, OffsetCommitValue] = self._offsets.get(req.group_id, {}) if known else {}
        if req.partitions is None:
            offsets = {tp: _fetched(v) for tp, v in committed.items()}
        else:
            offsets = {}
            for tp in req.partitions:
                tp = TopicPartition(*tp)
                value = committed.get(tp)
                offsets[tp] = NO_OFFSET if value is None else _fetched(value)
        # require_stable needs nothing more: there are no pending (unwritten) commits to report
        # as UNSTABLE_OFFSET_COMMIT, and the response waits until all earlier writes are durable.
        return self.rt.respond(OffsetFetchResponse(Errors.NONE, offsets))

    # --- OffsetDelete ----------------------------------------------------------------------

    def delete_offsets(self, req: OffsetDeleteRequest) -> Deferred[OffsetDeleteResponse]:
        """Delete offsets of partitions whose topics the group does not consume (KIP-496)."""
        group = self.registry.get(req.group_id)
        subscribed: set[str] | None
        if isinstance(group, ConsumerGroup):
            subscribed = self.consumer.subscribed(group)
        elif group is None or group.in_state(GroupState.DEAD):
            return self.rt.respond(OffsetDeleteResponse(Errors.GROUP_ID_NOT_FOUND, {}))
        elif not group.in_state(GroupState.EMPTY) and group.protocol_type != CONSUMER_PROTOCOL_TYPE:
            return self.rt.respond(OffsetDeleteResponse(Errors.NON_EMPTY_GROUP, {}))
        else:
            subscribed = self._subscribed(group)
        committed: Mapping[TopicPartition, OffsetCommitValue] = self._offsets.get(req.group_id, {})
        errors: dict[TopicPartition, Errors] = {}
        records: dict[TopicPartition, Record] = {}
        for tp in req.partitions:
            tp = TopicPartition(*tp)
            if subscribed is None or tp.topic in subscribed:
                errors[tp] = Errors.GROUP_SUBSCRIBED_TO_TOPIC
                continue
            errors[tp] = Errors.NONE
            if tp in committed:
                records[tp] = _tombstone(req.group_id, tp)
        # As Kafka's Java coordinator: an Empty group left without offsets is removed by the
        # next expiry pass, not here.
        self.rt.append(list(records.values()))
        self.rt.stats.offset_deletions += len(records)
        return self.rt.respond(OffsetDeleteResponse(Errors.NONE, errors))

    @staticmethod
    def _subscribed(group: ClassicGroup) -> set[str] | None:
        """Topics the group consumes; None means unknown, i.e. every topic counts as subscribed."""
        if group.in_state(GroupState.EMPTY) or group.protocol_type != CONSUMER_PROTOCOL_TYPE:
            return set()
        return group.subscribed_topics()

    # --- DeleteGroups ----------------------------------------------------------------------

    def delete_groups(self, req: DeleteGroupsRequest) -> Deferred[DeleteGroupsResponse]:
        """Delete Empty groups with all their offsets; other groups are refused per id.

        The tombstones go to the log first; only once it took them are the groups marked Dead, so
        a refused write leaves every group as it was (the shard answers UNKNOWN_SERVER_ERROR for all, as Kafka).
        """
        results: dict[str, Errors] = {}
        records: list[Record] = []
        deleted: list[ClassicGroup] = []
        consumer_deleted: list[str] = []
        for group_id in req.group_ids:
            if group_id in results:
                continue
            group = self.registry.get(group_id)
            if isinstance(group, ConsumerGroup):
                if self.consumer.can_delete(group):
                    records.extend(self._delete_consumer_group_records(group))
                    consumer_deleted.append(group_id)
                    results[group_id] = Errors.NONE
                else:
                    results[group_id] = Errors.NON_EMPTY_GROUP
            elif group is None or group.in_state(GroupState.DEAD):
                results[group_id] = Errors.GROUP_ID_NOT_FOUND
            elif not group.in_state(GroupState.EMPTY):
                results[group_id] = Errors.NON_EMPTY_GROUP
            else:
                records.extend(self.delete_group_records(group))
                deleted.append(group)
                results[group_id] = Errors.NONE
        self.rt.append(records)
        for group in deleted:
            self.groups.mark_dead(group)
        self.rt.stats.group_deletions += len(deleted)
        return self.rt.respond(DeleteGroupsResponse(results))

    def delete_group_records(self, group: ClassicGroup) -> list[Record]:
        """The tombstones of all of `group`'s offsets and of the group itself (mark it Dead once appended)."""
        records = [_tombstone(group.group_id, tp) for tp in self._offsets.get(group.group_id, {})]
        records.append(self.groups.group_tombstone(group.group_id))
        return records

    def _delete_consumer_group_records(self, group: ConsumerGroup) -> list[Record]:
        """The tombstones of all offsets of an empty consumer group, then of the group's own records."""
        records = [_tombstone(group.group_id, tp) for tp in self._offsets.get(group.group_id, {})]
        records.extend(self.consumer.delete_records(group))
        return records

    def offset_keys(self, group_id: str) -> list[TopicPartition]:
        """The partitions `group_id` has committed offsets for, as a list (a snapshot)."""
        return list(self._offsets.get(group_id, ()))

    def committed_value(self, group_id: str, tp: TopicPartition) -> OffsetCommitValue | None:
        """The committed offset of one partition of a group, or None."""
        offsets = self._offsets.get(group_id)
        return None if offsets is None else offsets.get(tp)

    def offset_count(self, group_id: str) -> int:
        """How many partitions `group_id` has committed offsets for."""
        return len(self._offsets.get(group_id, ()))

    # --- expiry ----------------------------------------------------------------------------

    def tombstone(self, group_id: str, tp: TopicPartition) -> Record:
        """The record that deletes one committed offset."""
        return _tombstone(group_id, tp)


def _fetched(value: OffsetCommitValue) -> OffsetFetchPartition:
    return OffsetFetchPartition(value.offset, value.metadata, value.leader_epoch, Errors.NONE)
