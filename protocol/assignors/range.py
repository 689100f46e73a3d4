"""Kafka's RangeAssignor ("range"): contiguous ranges of each topic's partitions per member."""

from __future__ import annotations

from typing import Mapping

from ..values import TopicPartition
from .base import Assignor, GroupAssignment, MemberSubscription, subscribers_by_topic

__all__ = ["RangeAssignor"]


class RangeAssignor(Assignor):
    """Per topic, split the partitions into contiguous ranges over the sorted subscribed members."""

    name = "range"

    def _assign(self, counts: Mapping[str, int], subs: Mapping[str, MemberSubscription]) -> GroupAssignment:
        out: GroupAssignment = {m: [] for m in subs}
        for topic, members in subscribers_by_topic(counts, subs).items():
            per_member, extra = divmod(counts[topic], len(members))
            for i, m in enumerate(members):
                start = per_member * i + min(i, extra)
                end = start + per_member + (1 if i < extra else 0)
                out[m].extend(TopicPartition(topic, p) for p in range(start, end))
        return out
