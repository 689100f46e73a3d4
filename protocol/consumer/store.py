"""The consumer groups of one shard: their records, the replay that applies them, and the views others read.

Every change to a consumer group is one of the six consumer group records, applied here by
`replay` — on a live shard right after it is appended, on recovery while the log is read — so
both paths end in the same groups. A record of a group that does not exist creates it, because
compaction may leave a member's records before the group's epoch record.
"""

from __future__ import annotations

import logging
from typing import Any, Callable

from ..config import GroupConfig
from ..records import Record
from ..shard.runtime import ShardRuntime
from ..shard.views import ClassicGroups
from ..values import GroupState
from .group import (
    ConsumerGroup,
    ConsumerGroupMember,
    ConsumerGroupState,
    MemberState,
    member_from_subscription,
)
from .records import (
    ConsumerGroupCurrentMemberAssignmentKey,
    ConsumerGroupMemberMetadataKey,
    ConsumerGroupMetadataKey,
    ConsumerGroupMetadataValue,
    ConsumerGroupPartitionMetadataKey,
    ConsumerGroupPartitionMetadataValue,
    ConsumerGroupTargetAssignmentMemberKey,
    ConsumerGroupTargetAssignmentMemberValue,
    ConsumerGroupTargetAssignmentMetadataKey,
    ConsumerGroupTargetAssignmentMetadataValue,
    from_stored,
    to_stored,
)

log = logging.getLogger(__name__)


def member_tombstones(group_id: str, member_id: str) -> list[Record]:
    """The records that remove a member: current assignment, target assignment, then subscription."""
    return [
        Record(ConsumerGroupCurrentMemberAssignmentKey(group_id, member_id), None),
        Record(ConsumerGroupTargetAssignmentMemberKey(group_id, member_id), None),
        Record(ConsumerGroupMemberMetadataKey(group_id, member_id), None),
    ]


def epoch_record(group_id: str, epoch: int) -> Record:
    """The group epoch record."""
    return Record(ConsumerGroupMetadataKey(group_id), ConsumerGroupMetadataValue(epoch))


def subscription_metadata_record(group_id: str, topics: dict[str, int]) -> Record:
    """The subscription metadata record: partition counts of the subscribed topics."""
    return Record(
        ConsumerGroupPartitionMetadataKey(group_id), ConsumerGroupPartitionMetadataValue(tuple(sorted(topics.items())))
    )


def subscription_record(group_id: str, member: ConsumerGroupMember) -> Record:
    """The member metadata record of `member`."""
    return Record(ConsumerGroupMemberMetadataKey(group_id, member.member_id), member.subscription_value())


def current_assignment_record(group_id: str, member: ConsumerGroupMember) -> Record:
    """The current member assignment record of `member`."""
    return Record(ConsumerGroupCurrentMemberAssignmentKey(group_id, member.member_id), member.assignment_value())


def target_member_record(group_id: str, member_id: str, assignment: Any) -> Record:
    """A member's target assignment record."""
    return Record(
        ConsumerGroupTargetAssignmentMemberKey(group_id, member_id),
        ConsumerGroupTargetAssignmentMemberValue(to_stored(assignment)),
    )


def target_epoch_record(group_id: str, epoch: int) -> Record:
    """The target assignment metadata record."""
    return Record(ConsumerGroupTargetAssignmentMetadataKey(group_id), ConsumerGroupTargetAssignmentMetadataValue(epoch))


class ConsumerGroupStore:
    """The shard's consumer groups by id, replayed from their records; shares the group-id space with classic groups."""

    def __init__(self, runtime: ShardRuntime, config: GroupConfig, classic: ClassicGroups) -> None:
        self.rt = runtime
        self.config = config
        self.classic = classic
        self.groups: dict[str, ConsumerGroup] = {}
        self.topics: dict[str, int] = {}  # topic -> partition count, as the service last told us

    def get(self, group_id: str) -> ConsumerGroup | None:
        """The consumer group with this id, or None."""
        return self.groups.get(group_id)

    # --- replay ----------------------------------------------------------------------------------

    def _group(self, group_id: str) -> ConsumerGroup:
        group = self.groups.get(group_id)
        if group is None:
            classic = self.classic.get_group(group_id)
            if classic is not None and classic.in_state(GroupState.EMPTY):
                # An empty classic group (say, one that only held offsets) becomes this consumer group.
                del self.classic.groups[group_id]
            group = self.groups[group_id] = ConsumerGroup(group_id)
        return group

    def replay(self, key: Any, value: Any) -> None:
        """Apply one consumer group record (a tombstone removes what its key names)."""
        handler: Callable[[Any, Any], None] = _REPLAY[type(key)]
        handler(self, key, value)  # type: ignore[call-arg]

    def _replay_metadata(self, key: ConsumerGroupMetadataKey, value: ConsumerGroupMetadataValue | None) -> None:
        if value is None:
            group = self.groups.pop(key.group, None)
            if group is not None:
                group.dead = True
            return
        self._group(key.group).group_epoch = value.epoch

    def _replay_partition_metadata(self, key: ConsumerGroupPartitionMetadataKey, value: Any) -> None:
        if value is None:
            group = self.groups.get(key.group)
            if group is not None:
                group.subscription_metadata = {}
            return
        self._group(key.group).subscription_metadata = dict(value.topics)

    def _replay_member(self, key: ConsumerGroupMemberMetadataKey, value: Any) -> None:
        if value is None:
            group = self.groups.get(key.group)
            if group is not None:
                group.remove_member(key.member_id)
            return
        group = self._group(key.group)
        old = group.members.get(key.member_id) or ConsumerGroupMember(key.member_id)
        group.put_member(member_from_subscription(old, value))

    def _replay_target_metadata(self, key: ConsumerGroupTargetAssignmentMetadataKey, value: Any) -> None:
        if value is None:
            group = self.groups.get(key.group)
            if group is not None:
                group.assignment_epoch = 0
            return
        self._group(key.group).assignment_epoch = value.assignment_epoch

    def _replay_target_member(self, key: ConsumerGroupTargetAssignmentMemberKey, value: Any) -> None:
        if value is None:
            group = self.groups.get(key.group)
            if group is not None:
                group.target_assignment.pop(key.member_id, None)
            return
        self._group(key.group).target_assignment[key.member_id] = from_stored(value.topic_partitions)

    def _replay_current(self, key: ConsumerGroupCurrentMemberAssignmentKey, value: Any) -> None:
        group = self.groups.get(key.group) if value is None else self._group(key.group)
        if group is None:
            return
        old = group.members.get(key.member_id)
        if value is None:
            if old is not None:
                group.put_member(_reset(old))
            return
        old = old or ConsumerGroupMember(key.member_id)
        try:
            state = MemberState(value.state)
        except ValueError:
            state = MemberState.UNKNOWN
        group.put_member(
            ConsumerGroupMember(
                old.member_id,
                old.instance_id,
                old.rack_id,
                old.client_id,
                old.client_host,
                old.subscribed_topic_names,
                old.subscribed_topic_regex,
                old.server_assignor,
                old.rebalance_timeout_ms,
                value.member_epoch,
                value.previous_member_epoch,
                state,
                from_stored(value.assigned_partitions),
                from_stored(value.partitions_pending_revocation),
            )
        )

    # --- deletion (DeleteGroups, offset expiry, a classic JoinGroup on an empty group) ----------------

    def delete_records(self, group: ConsumerGroup) -> list[Record]:
        """The tombstones of an empty group: target assignment epoch, subscription metadata, then the group epoch."""
        records = [r for m in group.members for r in member_tombstones(group.group_id, m)]
        records.append(Record(ConsumerGroupTargetAssignmentMetadataKey(group.group_id), None))
        records.append(Record(ConsumerGroupPartitionMetadataKey(group.group_id), None))
        records.append(Record(ConsumerGroupMetadataKey(group.group_id), None))
        return records

    def is_empty(self, group_id: str) -> bool:
        """Whether `group_id` is a consumer group without members."""
        group = self.groups.get(group_id)
        return group is not None and group.state is ConsumerGroupState.EMPTY


def _reset(member: ConsumerGroupMember) -> ConsumerGroupMember:
    """A member whose current assignment record was deleted: no epoch, nothing held."""
    return ConsumerGroupMember(
        member.member_id,
        member.instance_id,
        member.rack_id,
        member.client_id,
        member.client_host,
        member.subscribed_topic_names,
        member.subscribed_topic_regex,
        member.server_assignor,
        member.rebalance_timeout_ms,
        -1,
        -1,
        MemberState.STABLE,
        {},
        {},
    )


_REPLAY: dict[type, Callable[..., None]] = {
    ConsumerGroupMetadataKey: ConsumerGroupStore._replay_metadata,
    ConsumerGroupPartitionMetadataKey: ConsumerGroupStore._replay_partition_metadata,
    ConsumerGroupMemberMetadataKey: ConsumerGroupStore._replay_member,
    ConsumerGroupTargetAssignmentMetadataKey: ConsumerGroupStore._replay_target_metadata,
    ConsumerGroupTargetAssignmentMemberKey: ConsumerGroupStore._replay_target_member,
    ConsumerGroupCurrentMemberAssignmentKey: ConsumerGroupStore._replay_current,
}
