"""A consumer group of the KIP-848 protocol: its members, epochs and assignments, as Kafka's ConsumerGroup keeps them.

The group's durable state changes only by replaying the consumer group records
(consumer/store.py replays them here); what is derived from it (the group state, who holds
which partition at which epoch, static members by instance id) is kept up to date by the
mutators below.
"""

from __future__ import annotations

import enum
import re
from dataclasses import dataclass, field
from typing import Iterable, Mapping

from ..values import GroupType, TopicPartition
from .records import (
    ConsumerGroupCurrentMemberAssignmentValue,
    ConsumerGroupMemberMetadataValue,
    to_stored,
)

# topic -> partitions
Assignment = Mapping[str, frozenset[int]]
NO_ASSIGNMENT: Assignment = {}
# The group and target assignment epochs of a group without epoch records.
INITIAL_GROUP_EPOCH = 1


class MemberState(enum.IntEnum):
    """Where a member's reconciliation stands (Kafka's MemberState, with its stored byte)."""

    STABLE = 0
    UNREVOKED_PARTITIONS = 1
    UNRELEASED_PARTITIONS = 2
    UNKNOWN = 127


class ConsumerGroupState(enum.StrEnum):
    """The state of a consumer group, derived from its epochs and members (Kafka's names)."""

    EMPTY = "Empty"
    ASSIGNING = "Assigning"
    RECONCILING = "Reconciling"
    STABLE = "Stable"
    DEAD = "Dead"


@dataclass(frozen=True)
class ConsumerGroupMember:
    """One member: its subscription (member metadata record) and its reconciliation (current assignment record)."""

    member_id: str
    instance_id: str | None = None
    rack_id: str | None = None
    client_id: str = ""
    client_host: str = ""
    subscribed_topic_names: tuple[str, ...] = ()
    subscribed_topic_regex: str | None = None
    server_assignor: str | None = None
    rebalance_timeout_ms: int = -1
    member_epoch: int = 0
    previous_member_epoch: int = -1
    state: MemberState = MemberState.STABLE
    assigned_partitions: Assignment = field(default_factory=dict)
    partitions_pending_revocation: Assignment = field(default_factory=dict)

    def is_reconciled_to(self, target_epoch: int) -> bool:
        """Whether the member is STABLE at `target_epoch`."""
        return self.state is MemberState.STABLE and self.member_epoch == target_epoch

    def subscription_value(self) -> ConsumerGroupMemberMetadataValue:
        """The member metadata record's value."""
        return ConsumerGroupMemberMetadataValue(
            self.instance_id,
            self.rack_id,
            self.client_id,
            self.client_host,
            tuple(self.subscribed_topic_names),
            self.subscribed_topic_regex,
            self.server_assignor,
            self.rebalance_timeout_ms,
        )

    def assignment_value(self) -> ConsumerGroupCurrentMemberAssignmentValue:
        """The current member assignment record's value."""
        return ConsumerGroupCurrentMemberAssignmentValue(
            self.member_epoch,
            self.previous_member_epoch,
            int(self.state),
            to_stored(self.assigned_partitions),
            to_stored(self.partitions_pending_revocation),
        )

    def owned_partitions(self) -> list[TopicPartition]:
        """The assigned partitions as a sorted list (what the heartbeat response carries)."""
        return [TopicPartition(t, p) for t, ps in sorted(self.assigned_partitions.items()) for p in sorted(ps)]


def member_from_subscription(member: ConsumerGroupMember, v: ConsumerGroupMemberMetadataValue) -> ConsumerGroupMember:
    """`member` with the subscription of a member metadata record."""
    return ConsumerGroupMember(
        member.member_id,
        v.instance_id,
        v.rack_id,
        v.client_id,
        v.client_host,
        tuple(v.subscribed_topic_names),
        v.subscribed_topic_regex,
        v.server_assignor,
        v.rebalance_timeout_ms,
        member.member_epoch,
        member.previous_member_epoch,
        member.state,
        member.assigned_partitions,
        member.partitions_pending_revocation,
    )


class ConsumerGroup:
    """The members, epochs, subscription metadata and target assignment of one consumer group."""

    group_type = GroupType.CONSUMER
    protocol_type = "consumer"

    def __init__(self, group_id: str) -> None:
        self.group_id = group_id
        # Kafka 4.4 starts a new group at epoch 1 (ModernGroup and TargetAssignmentMetadata.INITIAL): a first
        # member that subscribes to topics bumps it to 2, one with an empty subscription stays at 1.
        self.group_epoch = INITIAL_GROUP_EPOCH
        self.assignment_epoch = INITIAL_GROUP_EPOCH
        self.subscription_metadata: dict[str, int] = {}
        self.members: dict[str, ConsumerGroupMember] = {}
        self.static_members: dict[str, str] = {}  # instance id -> member id
        self.target_assignment: dict[str, Assignment] = {}
        # Who holds each partition (assigned or pending revocation), and at which member epoch.
        self.partition_owners: dict[TopicPartition, tuple[str, int]] = {}
        self.metadata_refresh_needed = False
        self.dead = False

    # --- derived views -------------------------------------------------------------------------

    @property
    def state(self) -> ConsumerGroupState:
        """Kafka's ConsumerGroup.maybeUpdateGroupState, computed on demand."""
        if self.dead:
            return ConsumerGroupState.DEAD
        if not self.members:
            return ConsumerGroupState.EMPTY
        if self.group_epoch > self.assignment_epoch:
            return ConsumerGroupState.ASSIGNING
        epoch = self.assignment_epoch
        if any(not m.is_reconciled_to(epoch) for m in self.members.values()):
            return ConsumerGroupState.RECONCILING
        return ConsumerGroupState.STABLE

    def is_empty(self) -> bool:
        """Whether the group has no members."""
        return not self.members

    def static_member(self, instance_id: str) -> ConsumerGroupMember | None:
        """The member holding `instance_id`, or None."""
        member_id = self.static_members.get(instance_id)
        return None if member_id is None else self.members.get(member_id)

    def partition_epoch(self, tp: TopicPartition) -> int:
        """The epoch of the member that holds `tp` (assigned or pending revocation), or -1 if it is free."""
        owner = self.partition_owners.get(tp)
        return -1 if owner is None else owner[1]

    def target_of(self, member_id: str) -> Assignment:
        """The member's target assignment (empty if it has none)."""
        return self.target_assignment.get(member_id, NO_ASSIGNMENT)

    def subscribed_topics(self, topics: Mapping[str, int] | None = None) -> set[str]:
        """The topics some member subscribes to, by name or (given the known topics) by regex."""
        out: set[str] = set()
        for m in self.members.values():
            out.update(m.subscribed_topic_names)
        if topics is not None:
            regexes = {m.subscribed_topic_regex for m in self.members.values()}
            for regex in regexes:
                if regex is None:
                    continue
                out.update(resolve_regex(regex, topics))
        return out

    # --- mutators used by replay ---------------------------------------------------------------

    def put_member(self, member: ConsumerGroupMember) -> None:
        """Add or replace a member, keeping the instance-id index and the partition epochs consistent."""
        old = self.members.get(member.member_id)
        if old is not None:
            self._release(old)
            if old.instance_id is not None and self.static_members.get(old.instance_id) == old.member_id:
                del self.static_members[old.instance_id]
        self.members[member.member_id] = member
        if member.instance_id is not None:
            self.static_members[member.instance_id] = member.member_id
        for tp in _partitions(member.assigned_partitions, member.partitions_pending_revocation):
            self.partition_owners[tp] = (member.member_id, member.member_epoch)

    def remove_member(self, member_id: str) -> None:
        """Drop a member and release what it held."""
        old = self.members.pop(member_id, None)
        if old is None:
            return
        self._release(old)
        if old.instance_id is not None and self.static_members.get(old.instance_id) == member_id:
            del self.static_members[old.instance_id]

    def _release(self, member: ConsumerGroupMember) -> None:
        for tp in _partitions(member.assigned_partitions, member.partitions_pending_revocation):
            owner = self.partition_owners.get(tp)
            if owner is not None and owner[0] == member.member_id:
                del self.partition_owners[tp]


def _partitions(*assignments: Assignment) -> Iterable[TopicPartition]:
    for a in assignments:
        for topic, partitions in a.items():
            for p in partitions:
                yield TopicPartition(topic, p)


_REGEX_CACHE: dict[str, re.Pattern[str]] = {}


def resolve_regex(regex: str, topics: Iterable[str]) -> set[str]:
    """The topics whose whole name matches `regex` (Python's re syntax; Kafka uses RE2/J, nearly the same)."""
    pattern = _REGEX_CACHE.get(regex)
    if pattern is None:
        pattern = _REGEX_CACHE[regex] = re.compile(regex)
    return {t for t in topics if pattern.fullmatch(t)}
