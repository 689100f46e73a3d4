"""Reconciling a member towards its target assignment, revoking before assigning (Kafka's CurrentAssignmentBuilder).

A member first gives up the partitions its target no longer holds (UNREVOKED_PARTITIONS, at its
current epoch); only when it reports them gone does it move to the target epoch and get new
partitions, and then only those no other member still holds (the others wait in
UNRELEASED_PARTITIONS until their previous owner releases them).
"""

from __future__ import annotations

import dataclasses
from typing import Callable, Sequence

from ..values import TopicPartition
from .group import Assignment, ConsumerGroupMember, MemberState

PartitionEpoch = Callable[[TopicPartition], int]


class FencedMemberError(Exception):
    """The member must abandon its partitions and rejoin (FENCED_MEMBER_EPOCH)."""


def reconcile(
    member: ConsumerGroupMember,
    target_epoch: int,
    target: Assignment,
    partition_epoch: PartitionEpoch,
    owned: Sequence[TopicPartition] | None,
) -> ConsumerGroupMember:
    """The member's next state towards `target` at `target_epoch`; `owned` is what it reported (None: unknown)."""
    state = member.state
    if state is MemberState.STABLE:
        if member.member_epoch != target_epoch:
            return _next(member, member.member_epoch, target_epoch, target, partition_epoch, owned)
        return member
    if state is MemberState.UNREVOKED_PARTITIONS:
        if _owns_any(owned, member.partitions_pending_revocation):
            return member
        return _next(member, member.member_epoch + 1, target_epoch, target, partition_epoch, owned)
    if state is MemberState.UNRELEASED_PARTITIONS:
        return _next(member, member.member_epoch, target_epoch, target, partition_epoch, owned)
    if owned is None or owned:
        raise FencedMemberError(
            "The consumer group member is in a unknown state. The member must abandon all its partitions and rejoin."
        )
    return _next(member, target_epoch, target_epoch, target, partition_epoch, owned)


def _owns_any(owned: Sequence[TopicPartition] | None, revoking: Assignment) -> bool:
    """Whether the member still holds a partition of `revoking` (not knowing counts as holding)."""
    if owned is None:
        return True
    return any(tp[1] in revoking.get(tp[0], ()) for tp in owned)


def _next(
    member: ConsumerGroupMember,
    member_epoch: int,
    target_epoch: int,
    target: Assignment,
    partition_epoch: PartitionEpoch,
    owned: Sequence[TopicPartition] | None,
) -> ConsumerGroupMember:
    current = member.assigned_partitions
    unreleased = False
    assigned: dict[str, frozenset[int]] = {}
    revoking: dict[str, frozenset[int]] = {}
    pending: dict[str, frozenset[int]] = {}
    for topic in set(target) | set(current):
        wanted = target.get(topic, frozenset())
        held = current.get(topic, frozenset())
        kept = held & wanted
        to_revoke = held - kept
        to_assign = wanted - kept
        free = frozenset(p for p in to_assign if partition_epoch(TopicPartition(topic, p)) == -1)
        unreleased = unreleased or len(free) != len(to_assign)
        if kept:
            assigned[topic] = kept
        if to_revoke:
            revoking[topic] = to_revoke
        if free:
            pending[topic] = free
    if revoking and _owns_any(owned, revoking):
        return _with(member, MemberState.UNREVOKED_PARTITIONS, member_epoch, assigned, revoking)
    for topic, partitions in pending.items():
        assigned[topic] = assigned.get(topic, frozenset()) | partitions
    state = MemberState.UNRELEASED_PARTITIONS if unreleased else MemberState.STABLE
    return _with(member, state, target_epoch, assigned, {})


def _with(
    member: ConsumerGroupMember,
    state: MemberState,
    epoch: int,
    assigned: Assignment,
    revoking: Assignment,
) -> ConsumerGroupMember:
    """`member` in `state` at `epoch` (the previous epoch becomes the current one)."""
    return dataclasses.replace(
        member,
        state=state,
        previous_member_epoch=member.member_epoch,
        member_epoch=epoch,
        assigned_partitions=assigned,
        partitions_pending_revocation=revoking,
    )
