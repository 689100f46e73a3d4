"""The assignors by Kafka name, and the leader's step from subscription bytes to assignment bytes."""

from __future__ import annotations

from typing import Iterable, Mapping

from ..values import TopicPartition
from .base import Assignor, MemberSubscription, coerce_subscription
from .consumer_protocol import (
    ASSIGNMENT_HIGHEST_VERSION,
    ConsumerProtocolError,
    decode_subscription,
    encode_assignment,
)
from .consumer_protocol import Assignment as ConsumerAssignment
from .cooperative_sticky import CooperativeStickyAssignor
from .range import RangeAssignor
from .roundrobin import RoundRobinAssignor
from .sticky import StickyAssignor

__all__ = ["ASSIGNORS", "assign_metadata", "get_assignor", "to_consumer_assignments"]

ASSIGNORS: dict[str, type[Assignor]] = {
    cls.name: cls for cls in (RangeAssignor, RoundRobinAssignor, StickyAssignor, CooperativeStickyAssignor)
}


def get_assignor(name: str) -> Assignor:
    """A new assignor for Kafka's name (``partition.assignment.strategy``); ValueError if unknown."""
    try:
        return ASSIGNORS[name]()
    except KeyError:
        raise ValueError(f"unknown assignor {name!r}; known assignors: {', '.join(ASSIGNORS)}") from None


def to_consumer_assignments(
    assignment: Mapping[str, Iterable[TopicPartition]],
) -> dict[str, ConsumerAssignment]:
    """Each member's partitions as a consumer-protocol Assignment (no user data, as Kafka's assignors)."""
    return {m: ConsumerAssignment(tuple(tps)) for m, tps in assignment.items()}


def assign_metadata(
    assignor: Assignor | str,
    partitions_per_topic: Mapping[str, int],
    member_metadata: Mapping[str, bytes],
    group_instance_ids: Mapping[str, str | None] | None = None,
    version: int = ASSIGNMENT_HIGHEST_VERSION,
) -> dict[str, bytes]:
    """The leader's step: decode each member's subscription bytes, assign, and encode the assignments.

    Raises ConsumerProtocolError naming the member whose metadata cannot be parsed.
    """
    if isinstance(assignor, str):
        assignor = get_assignor(assignor)
    subs: dict[str, MemberSubscription] = {}
    for member, metadata in member_metadata.items():
        try:
            decoded = decode_subscription(metadata)
        except ConsumerProtocolError as e:
            raise ConsumerProtocolError(f"member {member!r}: {e}") from e
        instance = (group_instance_ids or {}).get(member)
        subs[member] = coerce_subscription(decoded)._replace(group_instance_id=instance)
    result = assignor.assign(partitions_per_topic, subs)
    return {m: encode_assignment(a, version) for m, a in to_consumer_assignments(result).items()}
