"""Kafka's RoundRobinAssignor ("roundrobin"): all subscribed partitions dealt to the members in turn."""

from __future__ import annotations

from typing import Mapping

from ..values import TopicPartition
from .base import Assignor, GroupAssignment, MemberSubscription, member_order_key, subscribers_by_topic

__all__ = ["RoundRobinAssignor"]


class RoundRobinAssignor(Assignor):
    """Deal all subscribed partitions (sorted) to the sorted members in turn, skipping unsubscribed ones."""

    name = "roundrobin"

    def _assign(self, counts: Mapping[str, int], subs: Mapping[str, MemberSubscription]) -> GroupAssignment:
        out: GroupAssignment = {m: [] for m in subs}
        members = sorted(subs, key=lambda m: member_order_key(m, subs[m]))
        topics_of = {m: set(subs[m].topics) for m in members}
        turn = 0
        for topic in sorted(subscribers_by_topic(counts, subs)):
            for p in range(counts[topic]):
                while topic not in topics_of[members[turn % len(members)]]:
                    turn += 1
                out[members[turn % len(members)]].append(TopicPartition(topic, p))
                turn += 1
        return out
