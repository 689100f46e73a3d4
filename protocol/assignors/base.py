"""What every client-side assignor shares: the Assignor base class, its input and Kafka's member order.

A consumer group's leader runs an assignor over every member's subscription and the partition
counts of the subscribed topics, and sends the result in SyncGroup. The concrete assignors live in
their own modules (range, roundrobin, sticky, cooperative_sticky), as in Kafka's clients.
"""

from __future__ import annotations

import enum
from collections import defaultdict
from typing import ClassVar, Iterable, Mapping, NamedTuple, Sequence

from ..values import TopicPartition
from .consumer_protocol import Subscription as ConsumerSubscription

__all__ = [
    "DEFAULT_GENERATION",
    "Assignor",
    "GroupAssignment",
    "MemberSubscription",
    "RebalanceProtocol",
    "SubscriptionLike",
    "coerce_subscription",
    "member_order_key",
    "subscribers_by_topic",
]

DEFAULT_GENERATION = -1


class RebalanceProtocol(enum.IntEnum):
    """Kafka's ConsumerPartitionAssignor.RebalanceProtocol, with Kafka's ids."""

    EAGER = 0
    COOPERATIVE = 1


class MemberSubscription(NamedTuple):
    """One member's input to an assignor: its topics, the partitions it owns and its generation.

    A plain tuple ``(topics, owned_partitions, generation_id, rack_id)`` is accepted wherever this is.
    """

    topics: Sequence[str]
    owned_partitions: Sequence[TopicPartition] = ()
    generation_id: int = DEFAULT_GENERATION
    rack_id: str | None = None
    user_data: bytes | None = None
    group_instance_id: str | None = None


SubscriptionLike = MemberSubscription | ConsumerSubscription | tuple
GroupAssignment = dict[str, list[TopicPartition]]


def coerce_subscription(sub: SubscriptionLike) -> MemberSubscription:
    """Any accepted input form (MemberSubscription, consumer-protocol Subscription or tuple) as a MemberSubscription."""
    if isinstance(sub, MemberSubscription):
        return sub
    if isinstance(sub, ConsumerSubscription):
        return MemberSubscription(sub.topics, sub.owned_partitions, sub.generation_id, sub.rack_id, sub.user_data)
    return MemberSubscription(*sub)


def member_order_key(member_id: str, sub: MemberSubscription) -> tuple[bool, str, str]:
    """Kafka's MemberInfo order: static members (by group instance id) first, then by member id."""
    return (sub.group_instance_id is None, sub.group_instance_id or "", member_id)


def subscribers_by_topic(counts: Mapping[str, int], subs: Mapping[str, MemberSubscription]) -> dict[str, list[str]]:
    """Topic -> its subscribed members in Kafka's member order, for topics that have partitions."""
    by_topic: dict[str, list[str]] = defaultdict(list)
    for m in sorted(subs, key=lambda m: member_order_key(m, subs[m])):
        for topic in dict.fromkeys(subs[m].topics):
            if topic in counts:
                by_topic[topic].append(m)
    return dict(by_topic)


class Assignor:
    """A client-side partition assignor: a Kafka name, the rebalance protocols it supports and ``assign``."""

    name: ClassVar[str] = ""
    supported_protocols: ClassVar[tuple[RebalanceProtocol, ...]] = (RebalanceProtocol.EAGER,)

    def assign(
        self, partitions_per_topic: Mapping[str, int], subscriptions: Mapping[str, SubscriptionLike]
    ) -> GroupAssignment:
        """Each member's partitions (sorted); topics missing from ``partitions_per_topic`` are skipped."""
        subs = {m: coerce_subscription(s) for m, s in subscriptions.items()}
        counts = {t: n for t, n in partitions_per_topic.items() if n > 0}
        result = self._assign(counts, subs)
        return {m: sorted(result.get(m, ())) for m in subs}

    def subscription_user_data(self, assigned: Iterable[TopicPartition], generation_id: int) -> bytes | None:
        """The user data a member puts in its next subscription (none for most assignors)."""
        return None

    def _assign(self, counts: Mapping[str, int], subs: Mapping[str, MemberSubscription]) -> GroupAssignment:
        raise NotImplementedError

    def __repr__(self) -> str:
        return f"{type(self).__name__}()"
