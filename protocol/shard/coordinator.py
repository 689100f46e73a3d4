"""GroupCoordinator: one shard of the group coordinator, i.e. one offsets partition.

It takes requests, changes state only by appending records that it replays into memory (the
same replay that `load` runs on recovery), and hands back Deferred responses that complete once
their records are durable. It does no I/O and reads no clock of its own.
"""

from __future__ import annotations

import logging
from collections import Counter
from typing import Any, Callable, Hashable, Iterable, Mapping, TypeVar

from .. import validation
from ..apis import Api
from ..classic.group import ClassicGroup
from ..classic.manager import GroupMetadataManager
from ..classic.snapshot import GroupSnapshot
from ..commit_run import OffsetCommitRun
from ..config import GroupConfig
from ..consumer.group import ConsumerGroupState
from ..consumer.manager import ConsumerGroupManager
from ..consumer.messages import (
    ConsumerGroupDescribeRequest,
    ConsumerGroupDescribeResponse,
    ConsumerGroupHeartbeatRequest,
    ConsumerGroupHeartbeatResponse,
)
from ..errors import Errors
from ..messages import (
    DeleteGroupsRequest,
    DeleteGroupsResponse,
    DescribeGroupsRequest,
    DescribeGroupsResponse,
    HeartbeatRequest,
    HeartbeatResponse,
    JoinGroupRequest,
    JoinGroupResponse,
    LeaveGroupRequest,
    LeaveGroupResponse,
    LeaveMemberResponse,
    ListedRow,
    ListGroupsRequest,
    ListGroupsResponse,
    OffsetCommitRequest,
    OffsetCommitResponse,
    OffsetDeleteRequest,
    OffsetDeleteResponse,
    OffsetFetchRequest,
    OffsetFetchResponse,
    SyncGroupRequest,
    SyncGroupResponse,
    list_response_from_rows,
)
from ..offsets.columns import BulkLoad
from ..offsets.manager import OffsetMetadataManager
from ..offsets.retention_sweep import RetentionSweep
from ..records import GroupMetadataKey, OffsetCommitKey, Record
from ..responses import error_response, join_error
from ..values import GroupState, GroupType
from .clock import Clock, SystemClock
from .conversions import GroupConversions
from .deferred import Deferred
from .log import MemoryLog, RecordBatchTooLarge, RecordLog
from .registry import GroupRegistry
from .runtime import ShardRuntime
from .stats import ShardGauges, ShardStats

log = logging.getLogger(__name__)

# An enum member's access costs about 150 ns on Python 3.11 (a descriptor); the hottest handlers use these.
_HEARTBEAT, _LEAVE_GROUP, _OFFSET_COMMIT = Api.HEARTBEAT, Api.LEAVE_GROUP, Api.OFFSET_COMMIT

T = TypeVar("T")

_RETENTION_KEY = ("offsets-retention",)
_RETENTION_STEP_KEY = ("offsets-retention-step",)

# How long a timer whose records the log refused waits before it runs again.
TIMER_RETRY_MS = 1000


class GroupCoordinator:
    """A pure, single-threaded shard of Kafka's group coordinator: classic groups and consumer groups (KIP-848)."""

    def __init__(
        self,
        config: GroupConfig | None = None,
        clock: Clock | None = None,
        log: RecordLog | None = None,
    ) -> None:
        self.config = config if config is not None else GroupConfig()
        self.clock = clock if clock is not None else SystemClock()
        self.log = log if log is not None else MemoryLog()
        self._loading = False
        self.runtime = ShardRuntime(self.clock, self.log, self._replay)
        # Every group of the shard, classic and consumer: one group-id space, as in Kafka.
        self.registry = GroupRegistry()
        self.groups = GroupMetadataManager(self.runtime, self.config, self.registry)
        self.consumer = ConsumerGroupManager(self.runtime, self.config, self.registry)
        self.registry.set_converter(GroupConversions(self.groups, self.consumer))
        self.offsets = OffsetMetadataManager(self.runtime, self.config, self.registry, self.groups, self.consumer)
        self.retention = RetentionSweep(self.runtime, self.offsets, self.config, self.groups.mark_dead)
        self._schedule_retention_check()

    # --- replay and recovery -------------------------------------------------------------

    def _replay(self, records: Iterable[Record]) -> None:
        """Apply records to memory: the one replay that appends, loads and a standby's copies all go through.

        The dispatch is inlined, without a call per record: most records are offset commits, and this loop runs
        for every one of them.
        """
        if type(records) is OffsetCommitRun:  # a commit's records, by column
            self.offsets.replay_run(records)
            return
        replay_offset, replay_group, loading = self.offsets.replay, self.groups.replay, self._loading
        replay_consumer = self.consumer.replay
        value: Any  # the value type that goes with the key's: the log's records are well formed
        for key, value in records:
            if type(key) is OffsetCommitKey:
                replay_offset(key, value)
            elif type(key) is GroupMetadataKey:
                replay_group(key, value, loading)
            else:
                replay_consumer(key, value)

    def load(self, records: Iterable[Record]) -> None:
        """Replay a log into this fresh shard, then re-arm every member's session and the retention check."""
        self._loading = True
        try:
            self._replay(records)
        finally:
            self._loading = False
        self.groups.on_loaded()
        self.consumer.on_loaded()
        self._schedule_retention_check()

    def load_bulk(self, plan: BulkLoad) -> None:
        """Load a log decoded in bulk (storage.bulk_replay) into this fresh shard: the state `load` of the
        same records would leave, with only the live offsets built, then re-arm sessions and retention."""
        self._loading = True
        replay_group, replay_consumer = self.groups.replay, self.consumer.replay
        ensure_group = self.offsets.ensure_group
        value: Any
        try:
            for event in plan.events:
                if isinstance(event, str):
                    ensure_group(event)
                    continue
                key, value = event
                if type(key) is GroupMetadataKey:
                    replay_group(key, value, True)
                elif type(key) is OffsetCommitKey:
                    raise ValueError("a bulk load's offset commits come as columns, not as events")
                else:
                    replay_consumer(key, value)
            self.offsets.install(plan.offsets)
        finally:
            self._loading = False
        self.groups.on_loaded()
        self.consumer.on_loaded()
        self._schedule_retention_check()

    def replay_replicated(self, records: Iterable[Record]) -> None:
        """Apply records a leader replicated to this standby shard, as loading does (no timers armed)."""
        self._loading = True
        try:
            self._replay(records)
        finally:
            self._loading = False

    def take_over(self, end_offset: int, durable_offset: int) -> None:
        """This standby becomes the serving shard of a log ending at `end_offset`, durable up to `durable_offset`."""
        self.runtime.resume_at(end_offset, durable_offset)
        self.groups.on_loaded()
        self.consumer.on_loaded()  # the KIP-848 members' sessions too, as a load arms them
        self._schedule_retention_check()

    def on_durable(self, offset: int) -> None:
        """The log is durable up to `offset`: complete the responses waiting for it."""
        self.runtime.on_durable(offset)

    # --- facts for metrics -------------------------------------------------------------------

    @property
    def stats(self) -> ShardStats:
        """The shard's cumulative counters (commits, rebalances, expirations)."""
        return self.runtime.stats

    @property
    def timer_failures(self) -> int:
        """Timer callbacks that raised so far (each logged; the other timers went on)."""
        return self.runtime.stats.timer_failures

    def gauges(self) -> ShardGauges:
        """Groups per state, members, offsets and purgatory sizes right now (O(groups + members))."""
        by_state: Counter[str] = Counter({s.value: 0 for s in (*GroupState, *ConsumerGroupState)})
        members = joins = syncs = 0
        for group in self.registry.values():
            by_state[group.state.value] += 1
            members += len(group.members)
            if type(group) is ClassicGroup:
                joins += group.num_awaiting_join
                syncs += sum(1 for m in group.members.values() if m.awaiting_sync is not None)
        return ShardGauges(
            groups_by_state=dict(by_state),
            members=members,
            offsets=self.offsets.total_offsets(),
            timers=self.runtime.timers.count_by_kind(),
            parked={Api.JOIN_GROUP: joins, Api.SYNC_GROUP: syncs},
            awaiting_durability=self.runtime.waiting(),
        )

    # --- timers --------------------------------------------------------------------------

    def tick(self) -> None:
        """Fire every timer due by now, in deadline order, including timers that firing arms."""
        self.runtime.timers.fire_due(self.runtime.due(), runner=self._run_timer)

    def fire_timers(self, max_timers: int) -> bool:
        """Fire at most `max_timers` due timers (the actor yields between calls); True if more are due."""
        timers = self.runtime.timers
        now = self.runtime.due()
        timers.fire_due(now, limit=max_timers, runner=self._run_timer)
        return timers.has_due(now)

    def next_deadline(self, exact_until: int | None = None) -> int | None:
        """When the next timer is due, in ms of the clock's monotonic time, or None; the actor sleeps until then.
        Past `exact_until` the answer may be early (see Purgatory.next_deadline)."""
        return self.runtime.timers.next_deadline(exact_until)

    def _run_timer(self, key: Hashable, callback: Callable[[], None]) -> None:
        """Run one timer so that its failure stays its own: logged with its group, counted, state put back.

        A timer whose records the log refuses leaves its group as it was and runs again after
        TIMER_RETRY_MS; any other exception is logged and counted, and the other timers go on.
        """
        group_id = snapshot = None
        if isinstance(key, tuple) and len(key) > 1 and isinstance(key[1], str):
            group_id = key[1]
            if key[0] == "session" and self.groups.session_timer_early(group_id, callback):
                return
            if self._may_empty(key[0], group_id):
                snapshot = GroupSnapshot(self.groups.groups, group_id, self.runtime.timers)
        try:
            callback()
        except RecordBatchTooLarge as e:
            self.runtime.stats.timer_failures += 1
            log.error("timer %s of group %s: its records were refused (%s); retrying", key, group_id, e)
            if snapshot is not None:
                snapshot.restore()
            self.runtime.timers.schedule(key, self.runtime.deadline_in(TIMER_RETRY_MS), callback)
        except Exception:
            self.runtime.stats.timer_failures += 1
            log.exception("timer %s of group %s failed; the other timers go on", key, group_id)

    def _may_empty(self, kind: Any, group_id: str) -> bool:
        """Whether a timer of `kind` ("session", ...) on `group_id` may end with its group Empty (the one timer
        path that writes records).

        Only then is its group copied before it runs: a session timer empties a group only when every
        member's session has ended, a pending member id's only when it has at most one member;
        completing a join or expiring pending syncs may always.
        """
        group = self.groups.get_group(group_id)
        if group is None:
            return False
        if kind == "session" and isinstance(group, ClassicGroup):
            return group.all_sessions_ended(self.runtime.due())
        return kind != "heartbeat" or len(group.members) <= 1

    def schedule_retention_check(self, delay_ms: int) -> None:
        """Run the offset-retention check `delay_ms` from now, instead of when its interval ends."""
        self.runtime.timers.schedule(_RETENTION_KEY, self.runtime.deadline_in(delay_ms), self._run_retention_check)

    def _schedule_retention_check(self) -> None:
        self.schedule_retention_check(self.config.offsets_retention_check_interval_ms)

    def _run_retention_check(self) -> None:
        self._schedule_retention_check()
        self.retention.start()
        self._run_retention_step()

    def _run_retention_step(self) -> None:
        """One bounded step of the retention pass; the next is a timer due once this step's records are durable.

        So the actor yields between steps, and a sweep never has more than one step of tombstones
        waiting for the disk ahead of the requests that come in meanwhile.
        """
        if self.retention.step():
            self.runtime.when_durable(
                lambda: self.runtime.timers.schedule(
                    _RETENTION_STEP_KEY, self.runtime.monotonic(), self._run_retention_step
                )
            )

    def expire_offsets_now(self) -> None:
        """Run a whole offset-expiry pass at once (KIP-211), as the retention check does in steps."""
        self.retention.start()
        while self.retention.step():
            pass

    # --- requests --------------------------------------------------------------------------

    def _handle(self, api: str, req: Any, handler: Callable[[Any], Deferred[T]]) -> Deferred[T]:
        """Validate, then handle; bad input is answered with its error code and changes nothing.

        This is the one place where a write the log refuses (RecordBatchTooLarge) becomes an answer: the
        handler's records were not staged, so nothing persisted changed; what the handler changed in memory
        only is put back from a snapshot, and the request gets UNKNOWN_SERVER_ERROR (as Kafka maps
        MESSAGE_TOO_LARGE and RECORD_LIST_TOO_LARGE on a coordinator write).
        """
        error = validation.check(api, req, self.config)
        if error is not None:
            return self.runtime.respond(error_response(api, req, error))
        snapshot = self._restore_point(api, req)
        try:
            return handler(req)
        except RecordBatchTooLarge as e:
            self.runtime.stats.refused_writes += 1
            log.error("%s of group %s: its records were refused (%s); nothing changed", api,
                      getattr(req, "group_id", None), e)
            if snapshot is not None:
                snapshot.restore()
            return self.runtime.respond(error_response(api, req, Errors.UNKNOWN_SERVER_ERROR))

    def _restore_point(self, api: str, req: Any) -> GroupSnapshot | None:
        """A copy of the group a request may change in memory before its records are refused, else None.

        Only a LeaveGroup that may empty its classic group does both (it removes members, then writes the
        Empty group); every other handler writes first, or puts its own state back (SyncGroup, a static
        member's replacement), as Kafka's coordinator does.
        """
        if api != _LEAVE_GROUP:
            return None
        group = self.groups.get_group(req.group_id)
        if group is None or len(req.members) < len(group.members):
            return None
        return GroupSnapshot(self.groups.groups, req.group_id, self.runtime.timers)

    def join_group(self, req: JoinGroupRequest) -> Deferred[JoinGroupResponse]:
        """JoinGroup (API key 11); INCONSISTENT_GROUP_PROTOCOL on a consumer group unless it is empty."""
        return self._handle(Api.JOIN_GROUP, req, self._classic_join)

    def _classic_join(self, req: JoinGroupRequest) -> Deferred[JoinGroupResponse]:
        cfg = self.config
        timeout_ok = cfg.min_session_timeout_ms <= req.session_timeout_ms <= cfg.max_session_timeout_ms
        if timeout_ok and self.consumer.get(req.group_id) is not None:  # Kafka checks the session timeout first
            records = self.registry.conversion_records(req.group_id, GroupType.CLASSIC)
            if records is None:
                # Kafka with group.consumer.migration.policy=disabled: a classic member cannot join a non-empty
                # consumer group (an error raised in the coordinator: the answer carries no member id).
                return self.runtime.respond(join_error(Errors.INCONSISTENT_GROUP_PROTOCOL))
            if not req.member_id:
                # The empty consumer group becomes an empty classic group in one batch, or not at all.
                self.runtime.append(records)
        return self.groups.join_group(req)

    def sync_group(self, req: SyncGroupRequest) -> Deferred[SyncGroupResponse]:
        """SyncGroup (API key 14); UNKNOWN_MEMBER_ID on a consumer group, whose members are no classic members."""
        return self._handle(Api.SYNC_GROUP, req, self._classic(self.groups.sync_group, Api.SYNC_GROUP))

    def heartbeat(self, req: HeartbeatRequest) -> Deferred[HeartbeatResponse]:
        """Heartbeat (API key 12); UNKNOWN_MEMBER_ID on a consumer group."""
        if validation.plain_heartbeat(req, self.config) and self.consumer.get(req.group_id) is None:
            # The hot path, with what _handle and _classic would do for it done here: a plain heartbeat needs no
            # other check, and writes no record that the log could refuse.
            return self.groups.heartbeat(req)
        return self._handle(_HEARTBEAT, req, self._classic(self.groups.heartbeat, _HEARTBEAT))

    def leave_group(self, req: LeaveGroupRequest) -> Deferred[LeaveGroupResponse]:
        """LeaveGroup (API key 13), by member id and/or instance id; on a consumer group every member is unknown."""
        return self._handle(Api.LEAVE_GROUP, req, self._leave_group)

    def _leave_group(self, req: LeaveGroupRequest) -> Deferred[LeaveGroupResponse]:
        """A leave writes a record only when it empties the group (see _restore_point for a refused one)."""
        if self.consumer.get(req.group_id) is not None:
            unknown = Errors.UNKNOWN_MEMBER_ID
            members = [LeaveMemberResponse(m.member_id, m.group_instance_id, unknown) for m in req.members]
            return self.runtime.respond(LeaveGroupResponse(Errors.NONE, members))
        return self.groups.leave_group(req)

    def _classic(self, handler: Callable[[Any], Deferred[T]], api: str) -> Callable[[Any], Deferred[T]]:
        """`handler`, or UNKNOWN_MEMBER_ID when the request names a consumer group (as Kafka answers a
        classic request from a member that does not use the classic protocol)."""

        def handle(req: Any) -> Deferred[T]:
            if self.consumer.get(req.group_id) is not None:
                return self.runtime.respond(error_response(api, req, Errors.UNKNOWN_MEMBER_ID))
            return handler(req)

        return handle

    def commit_offsets(self, req: OffsetCommitRequest) -> Deferred[OffsetCommitResponse]:
        """OffsetCommit (API key 8)."""
        return self._handle(_OFFSET_COMMIT, req, self.offsets.commit_offsets)

    def fetch_offsets(self, req: OffsetFetchRequest) -> Deferred[OffsetFetchResponse]:
        """OffsetFetch (API key 9)."""
        return self._handle(Api.OFFSET_FETCH, req, self.offsets.fetch_offsets)

    def list_groups(self, req: ListGroupsRequest | None = None) -> Deferred[ListGroupsResponse]:
        """ListGroups (API key 16)."""
        return self._handle(Api.LIST_GROUPS, req if req is not None else ListGroupsRequest(), self._list_groups)

    def list_groups_rows(self, req: ListGroupsRequest) -> Deferred[Any]:
        """ListGroups answered as the flat rows its response pickles to (built without the ListedGroups), for a
        fan-out that passes them on; a request refused as a whole is answered by its ListGroupsResponse."""
        return self._handle(Api.LIST_GROUPS, req, self._list_groups_rows)

    def _list_groups(self, req: ListGroupsRequest) -> Deferred[ListGroupsResponse]:
        return self.runtime.respond(list_response_from_rows(Errors.NONE.value, self._listed_rows(req)))

    def _list_groups_rows(self, req: ListGroupsRequest) -> Deferred[list[ListedRow]]:
        return self.runtime.respond(self._listed_rows(req))

    def _listed_rows(self, req: ListGroupsRequest) -> list[ListedRow]:
        """Classic groups (group_type "classic"), then consumer groups (group_type "consumer")."""
        states = {s.strip().lower() for s in req.states_filter}
        types = {t.lower() for t in req.types_filter}  # Kafka's GroupType.parse: lower-cased, not trimmed
        return self.groups.listed_rows(states, types) + self.consumer.listed_rows(states, types)

    def describe_groups(self, req: DescribeGroupsRequest) -> Deferred[DescribeGroupsResponse]:
        """DescribeGroups (API key 15)."""
        return self._handle(Api.DESCRIBE_GROUPS, req, self.groups.describe_groups)

    def describe_groups_rows(self, req: DescribeGroupsRequest) -> Deferred[Any]:
        """DescribeGroups answered as the flat rows its response pickles to (built without the objects), for a
        fan-out that passes them on; a request refused as a whole is answered by its DescribeGroupsResponse."""
        return self._handle(Api.DESCRIBE_GROUPS, req, self.groups.describe_groups_rows)

    def delete_groups(self, req: DeleteGroupsRequest) -> Deferred[DeleteGroupsResponse]:
        """DeleteGroups (API key 42): Empty groups are deleted with their offsets."""
        return self._handle(Api.DELETE_GROUPS, req, self.offsets.delete_groups)

    def delete_offsets(self, req: OffsetDeleteRequest) -> Deferred[OffsetDeleteResponse]:
        """OffsetDelete (API key 47)."""
        return self._handle(Api.OFFSET_DELETE, req, self.offsets.delete_offsets)

    # --- the consumer group protocol (KIP-848) ---------------------------------------------------

    def consumer_group_heartbeat(self, req: ConsumerGroupHeartbeatRequest) -> Deferred[ConsumerGroupHeartbeatResponse]:
        """ConsumerGroupHeartbeat (API key 68): join (epoch 0), heartbeat, acknowledge revocations, leave (-1, -2)."""
        return self._handle(Api.CONSUMER_GROUP_HEARTBEAT, req, self.consumer.consumer_group_heartbeat)

    def consumer_group_describe(self, req: ConsumerGroupDescribeRequest) -> Deferred[ConsumerGroupDescribeResponse]:
        """ConsumerGroupDescribe (API key 69)."""
        return self._handle(Api.CONSUMER_GROUP_DESCRIBE, req, self.consumer.consumer_group_describe)

    def update_topic_metadata(self, partitions: Mapping[str, int]) -> None:
        """Topic -> partition count, as the service's topic registry has it (the shard's view of the cluster)."""
        self.consumer.update_topic_metadata(dict(partitions))
