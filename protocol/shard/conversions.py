"""Turning a group of one protocol into a group of the other: the one place that knows both kinds.

Classic and consumer groups share Kafka's group-id space. As here Kafka converts only empty groups
(no online migration of members): an empty classic group (say, one that only holds offsets) becomes a
consumer group when a member joins it with ConsumerGroupHeartbeat, and an empty consumer group becomes a
classic group on a JoinGroup. Either way the conversion is records, appended in one batch with the
change that asks for it: the old group's tombstones, then what creates the new one.
"""

from __future__ import annotations

from typing import Any

from ..classic.group import ClassicGroup
from ..classic.manager import GroupMetadataManager
from ..consumer.group import ConsumerGroup
from ..consumer.manager import ConsumerGroupManager
from ..records import Record
from ..values import GroupState, GroupType


class GroupConversions:
    """The records that convert an empty group of one protocol into one of the other (the registry's converter)."""

    def __init__(self, classic: GroupMetadataManager, consumer: ConsumerGroupManager) -> None:
        self.classic = classic
        self.consumer = consumer

    def __call__(self, group: Any, to: GroupType) -> list[Record] | None:
        """The records that turn `group` into an empty group of type `to`, or None if it may not become one."""
        if to is GroupType.CONSUMER and isinstance(group, ClassicGroup):
            if not group.in_state(GroupState.EMPTY):
                return None
            # The consumer group's own records, which follow in the same batch, create it when replayed.
            return [self.classic.group_tombstone(group.group_id)]
        if to is GroupType.CLASSIC and isinstance(group, ConsumerGroup):
            if not group.is_empty():
                return None
            classic = ClassicGroup(group.group_id, self.classic.rt.now())
            return [*self.consumer.delete_records(group), self.classic.group_record(classic)]
        return None
