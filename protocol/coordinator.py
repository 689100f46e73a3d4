"""GroupCoordinator: one shard of the group coordinator, i.e. one offsets partition.

It takes requests, changes state only by appending records that it replays into memory (the
same replay that `load` runs on recovery), and hands back Deferred responses that complete once
their records are durable. It does no I/O and reads no clock of its own.
"""

from __future__ import annotations

import logging
from typing import Any, Callable, Iterable, TypeVar

from . import validation
from .clock import Clock, SystemClock
from .config import GroupConfig
from .deferred import Deferred
from .group_manager import GroupMetadataManager
from .log import MemoryLog, RecordLog
from .messages import (
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
)
from .offset_manager import OffsetMetadataManager
from .records import OffsetCommitKey, Record
from .responses import error_response
from .runtime import ShardRuntime

log = logging.getLogger(__name__)

T = TypeVar("T")

_RETENTION_KEY = ("offsets-retention",)


class GroupCoordinator:
    """A pure, single-threaded shard of Kafka's classic group coordinator."""

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
        self.groups = GroupMetadataManager(self.runtime, self.config)
        self.offsets = OffsetMetadataManager(self.runtime, self.groups, self.config)
        self._schedule_retention_check()

    # --- replay and recovery -------------------------------------------------------------

    def _replay(self, record: Record) -> None:
        key, value = record
        if type(key) is OffsetCommitKey:
            self.offsets.replay(key, value)  # type: ignore[arg-type]
        else:
            self.groups.replay(key, value, self._loading)  # type: ignore[arg-type]

    def load(self, records: Iterable[Record]) -> None:
        """Replay a log into this fresh shard, then re-arm every member's session and the retention check."""
        self._loading = True
        # _replay's dispatch, inlined: most of a log is offset commits, and this loop runs per record.
        replay_offset, replay_group, loading = self.offsets.replay, self.groups.replay, True
        try:
            for key, value in records:
                if type(key) is OffsetCommitKey:
                    replay_offset(key, value)
                else:
                    replay_group(key, value, loading)
        finally:
            self._loading = False
        self.groups.on_loaded()
        self._schedule_retention_check()

    def replay_replicated(self, records: Iterable[Record]) -> None:
        """Apply records a leader replicated to this standby shard, as loading does (no timers armed)."""
        self._loading = True
        try:
            for record in records:
                self._replay(record)
        finally:
            self._loading = False

    def take_over(self, end_offset: int, durable_offset: int) -> None:
        """This standby becomes the serving shard of a log ending at `end_offset`, durable up to `durable_offset`."""
        self.runtime.resume_at(end_offset, durable_offset)
        self.groups.on_loaded()
        self._schedule_retention_check()

    def on_durable(self, offset: int) -> None:
        """The log is durable up to `offset`: complete the responses waiting for it."""
        self.runtime.on_durable(offset)

    # --- timers --------------------------------------------------------------------------

    def tick(self) -> None:
        """Fire every timer due by now, in deadline order, including timers that firing arms."""
        self.runtime.timers.fire_due(self.clock.now_ms())

    def next_deadline(self) -> int | None:
        """When the next timer is due (ms), or None; the actor sleeps until then."""
        return self.runtime.timers.next_deadline()

    def _schedule_retention_check(self) -> None:
        self.runtime.timers.schedule(
            _RETENTION_KEY,
            self.clock.now_ms() + self.config.offsets_retention_check_interval_ms,
            self._run_retention_check,
        )

    def _run_retention_check(self) -> None:
        self._schedule_retention_check()
        self.offsets.cleanup_expired_offsets()

    # --- requests --------------------------------------------------------------------------

    def _handle(self, api: str, req: Any, handler: Callable[[Any], Deferred[T]]) -> Deferred[T]:
        """Validate, then handle; bad input is answered with its error code and changes nothing."""
        error = validation.check(api, req, self.config)
        if error is not None:
            return self.runtime.respond(error_response(api, req, error))
        return handler(req)

    def join_group(self, req: JoinGroupRequest) -> Deferred[JoinGroupResponse]:
        """JoinGroup (API key 11)."""
        return self._handle("join_group", req, self.groups.join_group)

    def sync_group(self, req: SyncGroupRequest) -> Deferred[SyncGroupResponse]:
        """SyncGroup (API key 14)."""
        return self._handle("sync_group", req, self.groups.sync_group)

    def heartbeat(self, req: HeartbeatRequest) -> Deferred[HeartbeatResponse]:
        """Heartbeat (API key 12)."""
        return self._handle("heartbeat", req, self.groups.heartbeat)

    def leave_group(self, req: LeaveGroupRequest) -> Deferred[LeaveGroupResponse]:
        """LeaveGroup (API key 13), by member id and/or instance id."""
        return self._handle("leave_group", req, self.groups.leave_group)

    def commit_offsets(self, req: OffsetCommitRequest) -> Deferred[OffsetCommitResponse]:
        """OffsetCommit (API key 8)."""
        return self._handle("commit_offsets", req, self.offsets.commit_offsets)

    def fetch_offsets(self, req: OffsetFetchRequest) -> Deferred[OffsetFetchResponse]:
        """OffsetFetch (API key 9)."""
        return self._handle("fetch_offsets", req, self.offsets.fetch_offsets)

    def list_groups(self, req: ListGroupsRequest | None = None) -> Deferred[ListGroupsResponse]:
        """ListGroups (API key 16)."""
        return self._handle(
            "list_groups", req if req is not None else ListGroupsRequest(), self.groups.list_groups
        )

    def describe_groups(self, req: DescribeGroupsRequest) -> Deferred[DescribeGroupsResponse]:
        """DescribeGroups (API key 15)."""
        return self._handle("describe_groups", req, self.groups.describe_groups)

    def delete_groups(self, req: DeleteGroupsRequest) -> Deferred[DeleteGroupsResponse]:
        """DeleteGroups (API key 42): Empty groups are deleted with their offsets."""
        return self._handle("delete_groups", req, self.offsets.delete_groups)

    def delete_offsets(self, req: OffsetDeleteRequest) -> Deferred[OffsetDeleteResponse]:
        """OffsetDelete (API key 47)."""
        return self._handle("delete_offsets", req, self.offsets.delete_offsets)
