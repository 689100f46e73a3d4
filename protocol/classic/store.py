"""The classic groups of one shard: lookups, member identity checks, and their GroupMetadata records.

The durable part of a group (generation, protocol, leader, members with assignments) changes only
by replaying GroupMetadata records, here; everything the membership protocol keeps in memory only
(parked requests, pending members, timers) is handled by the mixins built on `GroupStore`.
"""

from __future__ import annotations

from ..config import GroupConfig
from ..errors import Errors
from ..messages import HeartbeatRequest, SyncGroupRequest
from ..records import GroupMetadataKey, GroupMetadataValue, MemberMetadata, Record
from ..shard.registry import GroupRegistry
from ..shard.runtime import ShardRuntime
from .group import ClassicGroup, GroupState, Member

EMPTY, PREPARING, COMPLETING, STABLE, DEAD = (
    GroupState.EMPTY,
    GroupState.PREPARING_REBALANCE,
    GroupState.COMPLETING_REBALANCE,
    GroupState.STABLE,
    GroupState.DEAD,
)


class GroupStore:
    """The shard's classic groups by id (a view of the shard's one registry), and the records that persist them."""

    def __init__(self, runtime: ShardRuntime, config: GroupConfig, registry: GroupRegistry) -> None:
        self.rt = runtime
        self.config = config
        self.registry = registry
        self.groups = registry.of_type(ClassicGroup)

    # --- lookups used by the offset manager and the coordinator ---------------------------

    def get_group(self, group_id: str) -> ClassicGroup | None:
        """The group with this id, or None."""
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

    def _validate_generation(self, group: ClassicGroup, req: SyncGroupRequest | HeartbeatRequest) -> Errors:
        """Dead group, then member identity, then generation: the checks Sync and Heartbeat share."""
        if group.state is DEAD:
            return Errors.COORDINATOR_NOT_AVAILABLE
        error = self.validate_member(group, req.member_id, req.group_instance_id)
        if error != Errors.NONE:
            return error
        return Errors.ILLEGAL_GENERATION if req.generation_id != group.generation_id else Errors.NONE

    def create_simple_group(self, group_id: str) -> ClassicGroup:
        """An Empty group with no protocol type, for offsets committed outside group management."""
        group = ClassicGroup(group_id, self.rt.now())
        self.groups[group_id] = group
        return group

    def group_tombstone(self, group_id: str) -> Record:
        """The record that deletes a group."""
        return Record(GroupMetadataKey(group_id), None)

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
                group.shared_protocols(((value.protocol or "", m.subscription),)),
                bytes(m.assignment),
            )
            group.add(member)
        group.protocol_type = value.protocol_type or None
        group.leader_id = value.leader
        group.remember_subscribed_topics()
        return group
