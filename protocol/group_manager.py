"""Classic group membership: JoinGroup, SyncGroup, Heartbeat and LeaveGroup with Kafka's semantics.

Follows the Java group coordinator (GroupMetadataManager's classic-group paths). The durable
part of a group (generation, protocol, leader, members with assignments) changes only by
replaying GroupMetadata records; the in-flight part of a rebalance (parked requests, pending
members, timers) lives in memory only, as in Kafka, and is lost with a restart.
"""

from __future__ import annotations

import logging

from .config import GroupConfig
from .deferred import Deferred
from .errors import Errors
from .group import ClassicGroup, GroupState, Member, generate_member_id
from .log import RecordBatchTooLarge
from .messages import (
    DescribedGroup,
    DescribedMember,
    DescribeGroupsRequest,
    DescribeGroupsResponse,
    HeartbeatRequest,
    HeartbeatResponse,
    JoinGroupMember,
    JoinGroupRequest,
    JoinGroupResponse,
    LeaveGroupRequest,
    LeaveGroupResponse,
    LeaveMemberResponse,
    ListedGroup,
    ListGroupsRequest,
    ListGroupsResponse,
    SyncGroupRequest,
    SyncGroupResponse,
)
from .records import GroupMetadataKey, GroupMetadataValue, MemberMetadata, Record
from .runtime import ShardRuntime

log = logging.getLogger(__name__)

EMPTY, PREPARING, COMPLETING, STABLE, DEAD = (
    GroupState.EMPTY,
    GroupState.PREPARING_REBALANCE,
    GroupState.COMPLETING_REBALANCE,
    GroupState.STABLE,
    GroupState.DEAD,
)


def join_error(error: Errors, member_id: str = "") -> JoinGroupResponse:
    """A JoinGroup error response (generation -1, no protocol, no leader, no members)."""
    return JoinGroupResponse(error, -1, None, None, "", member_id, [])


def sync_error(error: Errors) -> SyncGroupResponse:
    """A SyncGroup error response."""
    return SyncGroupResponse(error, None, None, b"")


def _heartbeat_key(group_id: str, member_id: str) -> tuple:
    return ("heartbeat", group_id, member_id)


def _join_key(group_id: str) -> tuple:
    return ("join", group_id)


def _sync_key(group_id: str) -> tuple:
    return ("sync", group_id)


class GroupMetadataManager:
    """Owns the classic groups of one shard and the membership protocol that changes them."""

    def __init__(self, runtime: ShardRuntime, config: GroupConfig) -> None:
        self.rt = runtime
        self.config = config
        self.groups: dict[str, ClassicGroup] = {}

    # --- lookups used by the offset manager and the coordinator ---------------------------

    def get_group(self, group_id: str) -> ClassicGroup | None:
        return self.groups.get(group_id)

    def validate_member(self, group: ClassicGroup, member_id: str, instance_id: str | None) -> Errors:
        """Kafka's identity check: FENCED_INSTANCE_ID or UNKNOWN_MEMBER_ID, else NONE."""
        if instance_id is not None:
            existing = group.static_member_id(instance_id)
            if existing is None:
                return Errors.UNKNOWN_MEMBER_ID
            if existing != member_id:
                return Errors.FENCED_INSTANCE_ID
            return Errors.NONE
        return Errors.NONE if group.has_member(member_id) else Errors.UNKNOWN_MEMBER_ID

    def refresh_session(self, group: ClassicGroup, member_id: str) -> None:
        """Restart a member's session timer, as a heartbeat does."""
        member = group.members.get(member_id)
        if member is not None:
            self._schedule_heartbeat(group, member, member.session_timeout_ms)

    def create_simple_group(self, group_id: str) -> ClassicGroup:
        """An Empty group with no protocol type, for offsets committed outside group management."""
        group = ClassicGroup(group_id, self.rt.now())
        self.groups[group_id] = group
        return group

    def group_tombstone(self, group_id: str) -> Record:
        """The record that deletes a group."""
        return Record(GroupMetadataKey(group_id), None)

    def mark_dead(self, group: ClassicGroup) -> None:
        """Move a group to Dead and drop its timers, before its tombstone is appended."""
        group.transition_to(DEAD, self.rt.now())
        self._cancel_group_timers(group)

    # --- records and replay --------------------------------------------------------------

    def group_record(self, group: ClassicGroup, assignments: dict[str, bytes] | None = None) -> Record:
        """A GroupMetadata record of the group's durable state, with the given assignments."""
        protocol = group.protocol_name
        members: tuple[MemberMetadata, ...] = ()
        if protocol is not None:
            assignments = assignments if assignments is not None else {}
            members = tuple(
                MemberMetadata(
                    m.member_id,
                    m.group_instance_id,
                    m.client_id,
                    m.client_host,
                    m.rebalance_timeout_ms,
                    m.session_timeout_ms,
                    m.metadata(protocol),
                    assignments.get(m.member_id, b""),
                )
                for m in group.members.values()
            )
        ts = group.state_timestamp_ms
        value = GroupMetadataValue(
            group.protocol_type or "",
            group.generation_id,
            protocol,
            group.leader_id,
            -1 if ts is None else ts,
            members,
        )
        return Record(GroupMetadataKey(group.group_id), value)

    def replay(self, key: GroupMetadataKey, value: GroupMetadataValue | None, loading: bool) -> None:
        """Apply a GroupMetadata record: a tombstone deletes the group; a value sets its durable state.

        While loading, the record replaces the group wholesale (members included). On a live
        group it sets the durable fields the in-memory group already agrees with, plus the
        assignments of the current generation.
        """
        group_id = key.group
        if value is None:
            self.groups.pop(group_id, None)
            return
        group = self.groups.get(group_id)
        if loading or group is None:
            self.groups[group_id] = self._group_from_record(group_id, value)
            return
        group.protocol_type = value.protocol_type or None
        group.protocol_name = value.protocol
        if value.generation == group.generation_id:
            for m in value.members:
                member = group.members.get(m.member_id)
                if member is not None:
                    member.assignment = m.assignment

    def _group_from_record(self, group_id: str, value: GroupMetadataValue) -> ClassicGroup:
        ts = None if value.current_state_timestamp < 0 else value.current_state_timestamp
        group = ClassicGroup(group_id, self.rt.now(), STABLE if value.members else EMPTY)
        group.state_timestamp_ms = ts
        group.generation_id = value.generation
        group.protocol_type = value.protocol_type or None
        group.protocol_name = value.protocol
        for m in value.members:
            rebalance = m.rebalance_timeout if m.rebalance_timeout >= 0 else m.session_timeout
            member = Member(
                m.member_id,
                m.group_instance_id,
                m.client_id,
                m.client_host,
                rebalance,
                m.session_timeout,
                group.protocol_type or "",
                [(value.protocol or "", bytes(m.subscription))],
                bytes(m.assignment),
            )
            group.add(member)
        group.protocol_type = value.protocol_type or None
        group.leader_id = value.leader
        return group

    def on_loaded(self) -> None:
        """After replaying a log: every member must heartbeat within its session; oversize groups rebalance."""
        for group in list(self.groups.values()):
            for member in group.members.values():
                self._schedule_heartbeat(group, member, member.session_timeout_ms)
            if len(group.members) > self.config.max_size:
                self._prepare_rebalance(group, "loaded group exceeds group.max.size")

    # --- JoinGroup -----------------------------------------------------------------------

    def join_group(self, req: JoinGroupRequest) -> Deferred[JoinGroupResponse]:
        """Handle a JoinGroup: the first or second phase of a join, or a rejoin."""
        cfg = self.config
        if not cfg.min_session_timeout_ms <= req.session_timeout_ms <= cfg.max_session_timeout_ms:
            return self.rt.respond(join_error(Errors.INVALID_SESSION_TIMEOUT, req.member_id))
        group = self.groups.get(req.group_id)
        if group is None:
            if req.member_id:
                return self.rt.respond(join_error(Errors.UNKNOWN_MEMBER_ID, req.member_id))
            group = ClassicGroup(req.group_id, self.rt.now())
            # Java writes an empty group record so that a new group survives a restart.
            self.rt.append([self.group_record(group)])
            group = self.groups[req.group_id]
        result: Deferred[JoinGroupResponse] = Deferred()
        if not self._accept_joining_member(group, req.member_id):
            member = group.members.get(req.member_id)
            group.remove(req.member_id)
            if member is not None:
                self.rt.timers.cancel(_heartbeat_key(group.group_id, member.member_id))
            self.rt.complete(result, join_error(Errors.GROUP_MAX_SIZE_REACHED))
        elif req.member_id == "":
            self._join_new_member(group, req, result)
        else:
            self._join_existing_member(group, req, result)
        return result

    def _accept_joining_member(self, group: ClassicGroup, member_id: str) -> bool:
        max_size = self.config.max_size
        if group.in_state(EMPTY, DEAD):
            return True
        member = group.members.get(member_id)
        if group.in_state(PREPARING):
            return (member is not None and member.is_awaiting_join) or group.num_awaiting_join < max_size
        return member is not None or len(group.members) < max_size

    def _join_new_member(self, group: ClassicGroup, req: JoinGroupRequest, result: Deferred) -> None:
        if group.in_state(DEAD):
            return self.rt.complete(result, join_error(Errors.COORDINATOR_NOT_AVAILABLE))
        if not group.supports_protocols(req.protocol_type, (n for n, _ in req.protocols)):
            return self.rt.complete(result, join_error(Errors.INCONSISTENT_GROUP_PROTOCOL))
        new_id = generate_member_id(req.client_id, req.group_instance_id)
        if req.group_instance_id is not None:
            existing = group.static_member_id(req.group_instance_id)
            if existing is not None:
                return self._replace_static_member(group, req, existing, new_id, result)
            return self._add_member_and_rebalance(group, req, new_id, result)
        if req.require_known_member_id:
            group.pending_members.add(new_id)
            self.rt.timers.schedule(
                _heartbeat_key(group.group_id, new_id),
                self.rt.now() + req.session_timeout_ms,
                lambda: self._expire_heartbeat(group.group_id, new_id),
            )
            return self.rt.complete(result, join_error(Errors.MEMBER_ID_REQUIRED, new_id))
        return self._add_member_and_rebalance(group, req, new_id, result)

    def _join_existing_member(self, group: ClassicGroup, req: JoinGroupRequest, result: Deferred) -> None:
        member_id = req.member_id
        if group.in_state(DEAD):
            return self.rt.complete(result, join_error(Errors.COORDINATOR_NOT_AVAILABLE, member_id))
        if not group.supports_protocols(req.protocol_type, (n for n, _ in req.protocols)):
            return self.rt.complete(result, join_error(Errors.INCONSISTENT_GROUP_PROTOCOL, member_id))
        if group.is_pending_member(member_id):
            if req.group_instance_id is not None:
                # A pending member id was handed out to a dynamic member; a static one cannot use it.
                return self.rt.complete(result, join_error(Errors.UNKNOWN_MEMBER_ID, member_id))
            return self._add_member_and_rebalance(group, req, member_id, result)
        error = self.validate_member(group, member_id, req.group_instance_id)
        if error != Errors.NONE:
            return self.rt.complete(result, join_error(error, member_id))
        member = group.members[member_id]
        if group.in_state(PREPARING):
            return self._update_member_and_rebalance(group, member, req, result)
        if group.in_state(COMPLETING):
            if member.matches(req.protocols):
                return self.rt.complete(result, self._join_response(group, member))
            return self._update_member_and_rebalance(group, member, req, result)
        if group.in_state(STABLE):
            if group.is_leader(member_id) or not member.matches(req.protocols):
                return self._update_member_and_rebalance(group, member, req, result)
            return self.rt.complete(result, self._join_response(group, member))
        return self.rt.complete(result, join_error(Errors.UNKNOWN_MEMBER_ID, member_id))

    def _join_response(self, group: ClassicGroup, member: Member, skip: bool = False) -> JoinGroupResponse:
        """The current generation as `member` sees it; the leader also gets the members."""
        members: list[JoinGroupMember] = []
        if group.is_leader(member.member_id):
            protocol = group.protocol_name or ""
            members = [
                JoinGroupMember(m.member_id, m.group_instance_id, m.metadata(protocol)) for m in group.members.values()
            ]
        return JoinGroupResponse(
            Errors.NONE,
            group.generation_id,
            group.protocol_type,
            group.protocol_name,
            group.leader_id or "",
            member.member_id,
            members,
            skip,
        )

    @staticmethod
    def _rebalance_timeout(req: JoinGroupRequest) -> int:
        return req.session_timeout_ms if req.rebalance_timeout_ms == -1 else req.rebalance_timeout_ms

    def _add_member_and_rebalance(
        self, group: ClassicGroup, req: JoinGroupRequest, member_id: str, result: Deferred
    ) -> None:
        member = Member(
            member_id,
            req.group_instance_id,
            req.client_id,
            req.client_host,
            self._rebalance_timeout(req),
            req.session_timeout_ms,
            req.protocol_type,
            [(n, bytes(m)) for n, m in req.protocols],
        )
        member.is_new = True
        if group.in_state(PREPARING) and group.previous_state == EMPTY:
            group.new_member_added = True
        group.add(member, result)
        # New members cannot heartbeat while parked, so they get the new-member join timeout.
        self._schedule_heartbeat(group, member, self.config.new_member_join_timeout_ms)
        self._maybe_prepare_rebalance_or_complete_join(group, f"adding new member {member_id}")

    def _update_member_and_rebalance(
        self, group: ClassicGroup, member: Member, req: JoinGroupRequest, result: Deferred
    ) -> None:
        replaced = group.update_member(
            member,
            [(n, bytes(m)) for n, m in req.protocols],
            self._rebalance_timeout(req),
            req.session_timeout_ms,
            result,
        )
        if replaced is not None:
            # Kafka drops the earlier parked JoinGroup unanswered; a Ray caller would hang on it.
            self.rt.complete(replaced, join_error(Errors.REBALANCE_IN_PROGRESS, member.member_id))
        self._maybe_prepare_rebalance_or_complete_join(group, f"member {member.member_id} rejoined")

    def _replace_static_member(
        self, group: ClassicGroup, req: JoinGroupRequest, old_id: str, new_id: str, result: Deferred
    ) -> None:
        instance_id = req.group_instance_id
        assert instance_id is not None
        old, member = group.replace_static_member(instance_id, old_id, new_id)
        self._fence(group, old)
        self.rt.timers.cancel(_heartbeat_key(group.group_id, old_id))
        self._schedule_heartbeat(group, member, member.session_timeout_ms)
        group.update_member(
            member,
            [(n, bytes(m)) for n, m in req.protocols],
            self._rebalance_timeout(req),
            req.session_timeout_ms,
            result,
        )
        if group.in_state(STABLE):
            if group.protocol_name == group.select_protocol():
                # The group's protocol does not change: persist the new member id, no rebalance.
                assignments = {m.member_id: m.assignment for m in group.members.values()}
                try:
                    self.rt.append([self.group_record(group, assignments)])
                except RecordBatchTooLarge as e:
                    log.error("group %s: static member %s cannot be stored: %s", group.group_id, instance_id, e)
                    self._revert_static_replacement(group, instance_id, old, member, Errors.UNKNOWN_SERVER_ERROR)
                    return
                self.rt.when_durable(lambda: self._complete_static_rejoin(group, member))
            else:
                self._maybe_prepare_rebalance_or_complete_join(group, f"static member {instance_id} changed")
        elif group.in_state(COMPLETING):
            # The leader may be assigning for the old member id: rebalance again.
            self._prepare_rebalance(group, f"static member {instance_id} rejoined during sync")
        else:
            self._maybe_complete_join_phase(group)

    def _revert_static_replacement(
        self, group: ClassicGroup, instance_id: str, old: Member, member: Member, error: Errors
    ) -> None:
        """The replacement could not be stored: the old member id is valid again (Java's revert)."""
        join = group.update_member(member, old.protocols, old.rebalance_timeout_ms, old.session_timeout_ms, None)
        self.rt.timers.cancel(_heartbeat_key(group.group_id, member.member_id))
        _, restored = group.replace_static_member(instance_id, member.member_id, old.member_id)
        self._schedule_heartbeat(group, restored, restored.session_timeout_ms)
        if join is not None:
            response = JoinGroupResponse(
                error, group.generation_id, group.protocol_type, group.protocol_name, group.leader_id or "", "", []
            )
            self.rt.complete(join, response)

    def _complete_static_rejoin(self, group: ClassicGroup, member: Member) -> None:
        if self.groups.get(group.group_id) is not group or group.members.get(member.member_id) is not member:
            return
        join = group.take_join(member)
        if join is None:
            return
        join.complete(self._join_response(group, member, skip=group.is_leader(member.member_id)))

    def _fence(self, group: ClassicGroup, old: Member) -> None:
        """Answer the parked requests of a replaced static member with FENCED_INSTANCE_ID."""
        join = group.take_join(old)
        if join is not None:
            self.rt.complete(join, join_error(Errors.FENCED_INSTANCE_ID, old.member_id))
        sync = group.take_sync(old)
        if sync is not None:
            self.rt.complete(sync, sync_error(Errors.FENCED_INSTANCE_ID))

    # --- rebalance machinery ---------------------------------------------------------------

    def _maybe_prepare_rebalance_or_complete_join(self, group: ClassicGroup, reason: str) -> None:
        if group.can_rebalance():
            self._prepare_rebalance(group, reason)
        else:
            self._maybe_complete_join_phase(group)

    def _maybe_complete_join_phase(self, group: ClassicGroup) -> None:
        """Complete the join phase early once everyone has joined (never during the initial delay)."""
        if group.in_state(PREPARING) and group.previous_state != EMPTY and group.has_all_members_joined():
            self._complete_join(group)

    def _prepare_rebalance(self, group: ClassicGroup, reason: str) -> None:
        if group.in_state(COMPLETING):
            self._reset_and_propagate_assignment(group, Errors.REBALANCE_IN_PROGRESS)
        group.pending_sync_members.clear()
        self.rt.timers.cancel(_sync_key(group.group_id))
        initial = group.in_state(EMPTY)
        group.transition_to(PREPARING, self.rt.now())
        log.info("preparing to rebalance group %s (generation %d): %s", group.group_id, group.generation_id, reason)
        group_id = group.group_id
        if initial:
            delay = self.config.initial_rebalance_delay_ms
            remaining = max(group.rebalance_timeout_ms() - delay, 0)
            self._schedule_initial_join(group_id, delay, remaining)
        elif group.has_all_members_joined():
            self._complete_join(group)
        else:
            self.rt.timers.schedule(
                _join_key(group_id),
                self.rt.now() + group.rebalance_timeout_ms(),
                lambda: self._complete_join_by_id(group_id),
            )

    def _schedule_initial_join(self, group_id: str, delay: int, remaining: int) -> None:
        self.rt.timers.schedule(
            _join_key(group_id),
            self.rt.now() + delay,
            lambda: self._initial_join_expired(group_id, delay, remaining),
        )

    def _initial_join_expired(self, group_id: str, delay: int, remaining: int) -> None:
        """KIP-134: wait while new members keep arriving, but never past the rebalance timeout."""
        group = self.groups.get(group_id)
        if group is None:
            return
        if group.new_member_added and remaining != 0:
            group.new_member_added = False
            new_delay = min(self.config.initial_rebalance_delay_ms, remaining)
            self._schedule_initial_join(group_id, new_delay, max(remaining - delay, 0))
        else:
            self._complete_join(group)

    def _complete_join_by_id(self, group_id: str) -> None:
        group = self.groups.get(group_id)
        if group is not None:
            self._complete_join(group)

    def _complete_join(self, group: ClassicGroup) -> None:
        """End the join phase: drop dynamic members that did not rejoin and start the next generation."""
        group_id = group.group_id
        self.rt.timers.cancel(_join_key(group_id))
        for m in group.not_yet_rejoined():
            if not m.is_static:
                self._drop_member(group, m, answer=Errors.UNKNOWN_MEMBER_ID)
        if group.in_state(DEAD) or group.state != PREPARING:
            return
        if not group.maybe_elect_new_joined_leader() and group.members:
            # Only static members that have not rejoined remain: wait another rebalance timeout.
            log.warning("group %s could not complete its rebalance: no member rejoined", group_id)
            self.rt.timers.schedule(
                _join_key(group_id),
                self.rt.now() + group.rebalance_timeout_ms(),
                lambda: self._complete_join_by_id(group_id),
            )
            return
        group.init_next_generation(self.rt.now())
        if group.in_state(EMPTY):
            log.info("group %s with generation %d is now empty", group_id, group.generation_id)
            self.rt.append([self.group_record(group)])
            return
        log.info(
            "stabilized group %s generation %d with %d members",
            group_id,
            group.generation_id,
            len(group.members),
        )
        for member in group.members.values():
            join = group.take_join(member)
            if join is not None:
                self.rt.complete(join, self._join_response(group, member))
            self._schedule_heartbeat(group, member, member.session_timeout_ms)
            member.is_new = False
            group.pending_sync_members.add(member.member_id)
        generation = group.generation_id
        self.rt.timers.schedule(
            _sync_key(group_id),
            self.rt.now() + group.rebalance_timeout_ms(),
            lambda: self._expire_pending_sync(group_id, generation),
        )

    def _expire_pending_sync(self, group_id: str, generation: int) -> None:
        group = self.groups.get(group_id)
        if group is None or group.generation_id != generation:
            return
        if group.in_state(COMPLETING, STABLE) and group.pending_sync_members:
            late = list(group.pending_sync_members)
            for member_id in late:
                member = group.members.get(member_id)
                if member is not None:
                    self._drop_member(group, member, answer=Errors.UNKNOWN_MEMBER_ID)
            log.info("group %s removed members that did not sync in time: %s", group_id, late)
            self._prepare_rebalance(group, "pending sync expired")

    def _reset_and_propagate_assignment(self, group: ClassicGroup, error: Errors) -> None:
        for m in group.members.values():
            m.assignment = b""
        self._propagate_assignment(group, error)

    def _propagate_assignment(self, group: ClassicGroup, error: Errors) -> None:
        """Answer every parked SyncGroup; members that got an assignment restart their session."""
        for member in group.members.values():
            sync = group.take_sync(member)
            if sync is None:
                continue
            if error == Errors.NONE:
                response = SyncGroupResponse(Errors.NONE, group.protocol_type, group.protocol_name, member.assignment)
            else:
                response = SyncGroupResponse(error, None, None, member.assignment)
            self.rt.complete(sync, response)
            self._schedule_heartbeat(group, member, member.session_timeout_ms)

    def _drop_member(self, group: ClassicGroup, member: Member, answer: Errors) -> None:
        """Remove a member, answering its parked requests and cancelling its session timer."""
        join = group.take_join(member)
        if join is not None:
            self.rt.complete(join, join_error(answer))
        sync = group.take_sync(member)
        if sync is not None:
            self.rt.complete(sync, sync_error(answer))
        group.remove(member.member_id)
        self.rt.timers.cancel(_heartbeat_key(group.group_id, member.member_id))

    def _remove_member_and_update_group(self, group: ClassicGroup, member: Member, reason: str) -> None:
        self._drop_member(group, member, answer=Errors.UNKNOWN_MEMBER_ID)
        if group.in_state(STABLE, COMPLETING):
            self._maybe_prepare_rebalance_or_complete_join(group, reason)
        elif group.in_state(PREPARING) and group.has_all_members_joined():
            self._complete_join(group)

    # --- session timers --------------------------------------------------------------------

    def _schedule_heartbeat(self, group: ClassicGroup, member: Member, timeout_ms: int) -> None:
        group_id, member_id = group.group_id, member.member_id
        self.rt.timers.schedule(
            _heartbeat_key(group_id, member_id),
            self.rt.now() + timeout_ms,
            lambda: self._expire_heartbeat(group_id, member_id),
        )

    def _expire_heartbeat(self, group_id: str, member_id: str) -> None:
        group = self.groups.get(group_id)
        if group is None or group.in_state(DEAD):
            return
        if group.is_pending_member(member_id):
            log.info("pending member %s of group %s expired", member_id, group_id)
            group.remove(member_id)
            if group.in_state(PREPARING) and group.has_all_members_joined():
                self._complete_join(group)
            return
        member = group.members.get(member_id)
        if member is None or member.has_satisfied_heartbeat():
            return
        log.info("member %s of group %s failed its session; removing it", member_id, group_id)
        self._remove_member_and_update_group(group, member, f"session of {member_id} expired")

    def _cancel_group_timers(self, group: ClassicGroup) -> None:
        timers = self.rt.timers
        timers.cancel(_join_key(group.group_id))
        timers.cancel(_sync_key(group.group_id))
        for member_id in list(group.members) + list(group.pending_members):
            timers.cancel(_heartbeat_key(group.group_id, member_id))

    # --- SyncGroup -------------------------------------------------------------------------

    def sync_group(self, req: SyncGroupRequest) -> Deferred[SyncGroupResponse]:
        """Handle a SyncGroup: park until the leader's assignment is durable, or answer at once."""
        group = self.groups.get(req.group_id)
        if group is None:
            return self.rt.respond(sync_error(Errors.UNKNOWN_MEMBER_ID))
        error = self._validate_sync(group, req)
        if error != Errors.NONE:
            return self.rt.respond(sync_error(error))
        if group.in_state(PREPARING):
            return self.rt.respond(sync_error(Errors.REBALANCE_IN_PROGRESS))
        member = group.members[req.member_id]
        group.pending_sync_members.discard(req.member_id)
        if group.in_state(STABLE):
            return self.rt.respond(
                SyncGroupResponse(Errors.NONE, group.protocol_type, group.protocol_name, member.assignment)
            )
        # CompletingRebalance: park; the leader's assignment completes everyone once durable.
        result: Deferred[SyncGroupResponse] = Deferred()
        previous = member.awaiting_sync
        member.awaiting_sync = result
        if previous is not None:
            self.rt.complete(previous, sync_error(Errors.REBALANCE_IN_PROGRESS))
        if group.is_leader(req.member_id):
            assignments = {mid: bytes(req.assignments.get(mid, b"")) for mid in group.members}
            missing = [mid for mid in group.members if mid not in req.assignments]
            if missing:
                log.warning("leader of %s sent no assignment for %s; they get empty ones", group.group_id, missing)
            generation = group.generation_id
            try:
                self.rt.append([self.group_record(group, assignments)])
            except RecordBatchTooLarge as e:
                # Java: every parked SyncGroup gets the error, and the group rebalances.
                log.error("group %s: the assignment of generation %d cannot be stored: %s", group.group_id,
                          generation, e)
                self._reset_and_propagate_assignment(group, Errors.UNKNOWN_SERVER_ERROR)
                self._maybe_prepare_rebalance_or_complete_join(group, "the group's assignment is too large to store")
                return result
            self.rt.when_durable(lambda: self._on_assignment_durable(group, generation, assignments))
        return result

    def _validate_generation(self, group: ClassicGroup, req: SyncGroupRequest | HeartbeatRequest) -> Errors:
        """Dead group, then member identity, then generation: the checks Sync and Heartbeat share."""
        if group.in_state(DEAD):
            return Errors.COORDINATOR_NOT_AVAILABLE
        error = self.validate_member(group, req.member_id, req.group_instance_id)
        if error != Errors.NONE:
            return error
        return Errors.ILLEGAL_GENERATION if req.generation_id != group.generation_id else Errors.NONE

    def _validate_sync(self, group: ClassicGroup, req: SyncGroupRequest) -> Errors:
        error = self._validate_generation(group, req)
        if error != Errors.NONE:
            return error
        if _inconsistent(req.protocol_type, group.protocol_type) or _inconsistent(
            req.protocol_name, group.protocol_name
        ):
            return Errors.INCONSISTENT_GROUP_PROTOCOL
        return Errors.NONE

    def _on_assignment_durable(self, group: ClassicGroup, generation: int, assignments: dict[str, bytes]) -> None:
        """The leader's assignment is on disk: hand it out and become Stable, if nothing changed since."""
        if self.groups.get(group.group_id) is not group:
            return
        if not group.in_state(COMPLETING) or group.generation_id != generation:
            return
        for mid, member in group.members.items():
            member.assignment = assignments.get(mid, b"")
        group.transition_to(STABLE, self.rt.now())
        self._propagate_assignment(group, Errors.NONE)

    # --- Heartbeat -------------------------------------------------------------------------

    def heartbeat(self, req: HeartbeatRequest) -> Deferred[HeartbeatResponse]:
        """Handle a Heartbeat: refresh the member's session and tell it whether to rejoin."""
        return self.rt.respond(HeartbeatResponse(self._heartbeat(req)))

    def _heartbeat(self, req: HeartbeatRequest) -> Errors:
        group = self.groups.get(req.group_id)
        if group is None:
            return Errors.UNKNOWN_MEMBER_ID
        error = self._validate_generation(group, req)
        if error != Errors.NONE:
            return error
        if group.in_state(EMPTY):
            return Errors.UNKNOWN_MEMBER_ID
        self.refresh_session(group, req.member_id)
        return Errors.REBALANCE_IN_PROGRESS if group.in_state(PREPARING) else Errors.NONE

    # --- LeaveGroup ------------------------------------------------------------------------

    def leave_group(self, req: LeaveGroupRequest) -> Deferred[LeaveGroupResponse]:
        """Handle a (batch) LeaveGroup by member id and/or static instance id."""
        group = self.groups.get(req.group_id)
        if group is None:
            responses = [
                LeaveMemberResponse(m.member_id, m.group_instance_id, Errors.UNKNOWN_MEMBER_ID) for m in req.members
            ]
            return self.rt.respond(LeaveGroupResponse(Errors.NONE, responses))
        if group.in_state(DEAD):
            return self.rt.respond(LeaveGroupResponse(Errors.COORDINATOR_NOT_AVAILABLE, []))
        responses = []
        removed = []
        for identity in req.members:
            error = self._leave_one(group, identity.member_id, identity.group_instance_id)
            responses.append(LeaveMemberResponse(identity.member_id, identity.group_instance_id, error))
            if error == Errors.NONE:
                removed.append(identity.member_id or identity.group_instance_id)
        if removed:
            reason = f"members left: {removed}"
            if group.in_state(STABLE, COMPLETING):
                self._maybe_prepare_rebalance_or_complete_join(group, reason)
            else:
                # Java: a leave never cuts the initial rebalance delay short (unlike an expiry).
                self._maybe_complete_join_phase(group)
        return self.rt.respond(LeaveGroupResponse(Errors.NONE, responses))

    def _leave_one(self, group: ClassicGroup, member_id: str, instance_id: str | None) -> Errors:
        if member_id == "":
            existing = group.static_member_id(instance_id)
            if existing is None:
                return Errors.UNKNOWN_MEMBER_ID
            self._drop_member(group, group.members[existing], answer=Errors.UNKNOWN_MEMBER_ID)
            return Errors.NONE
        if group.is_pending_member(member_id):
            group.remove(member_id)
            self.rt.timers.cancel(_heartbeat_key(group.group_id, member_id))
            return Errors.NONE
        error = self.validate_member(group, member_id, instance_id)
        if error == Errors.NONE:
            self._drop_member(group, group.members[member_id], answer=Errors.UNKNOWN_MEMBER_ID)
        return error

    # --- ListGroups / DescribeGroups ---------------------------------------------------------

    def list_groups(self, req: ListGroupsRequest) -> Deferred[ListGroupsResponse]:
        """List this shard's groups, filtered by state and type (case-insensitive, as Java)."""
        states = {s.strip().lower() for s in req.states_filter}
        types = {t.strip().lower() for t in req.types_filter}
        listed = [
            ListedGroup(g.group_id, g.protocol_type or "", g.state.value, "classic")
            for g in self.groups.values()
            if (not states or g.state.value.lower() in states) and (not types or "classic" in types)
        ]
        return self.rt.respond(ListGroupsResponse(Errors.NONE, listed))

    def describe_groups(self, req: DescribeGroupsRequest) -> Deferred[DescribeGroupsResponse]:
        """Describe groups in request order; an unknown group is NONE with state "Dead"."""
        return self.rt.respond(DescribeGroupsResponse([self.describe(gid) for gid in req.group_ids]))

    def describe(self, group_id: str) -> DescribedGroup:
        """One group's description (Stable: with member metadata; otherwise assignments only)."""
        group = self.groups.get(group_id)
        if group is None:
            return DescribedGroup(Errors.NONE, group_id, DEAD.value, "", "", [])
        stable = group.in_state(STABLE)
        protocol = group.protocol_name or ""
        members = [
            DescribedMember(
                m.member_id,
                m.group_instance_id,
                m.client_id,
                m.client_host,
                m.metadata(protocol) if stable else b"",
                m.assignment,
            )
            for m in group.members.values()
        ]
        return DescribedGroup(
            Errors.NONE,
            group_id,
            group.state.value,
            group.protocol_type or "",
            protocol if stable else "",
            members,
        )


def _inconsistent(requested: str | None, current: str | None) -> bool:
    return requested is not None and current is not None and requested != current
