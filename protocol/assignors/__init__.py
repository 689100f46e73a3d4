"""Kafka's client-side partition assignors: range, roundrobin, sticky and cooperative-sticky.

A consumer group's leader runs one of these over every member's subscription and the partition
counts of the subscribed topics, and sends the result in SyncGroup. Names, member ordering and
results follow Kafka's RangeAssignor, RoundRobinAssignor, StickyAssignor and
CooperativeStickyAssignor; the sticky pair reaches the same kind of result with simpler code.
One module per assignor, as in Kafka's clients; `registry` maps Kafka's names to them.
"""

from .base import DEFAULT_GENERATION, Assignor, MemberSubscription, RebalanceProtocol
from .base import GroupAssignment as GroupAssignment  # type aliases, importable as before
from .base import SubscriptionLike as SubscriptionLike
from .cooperative_sticky import CooperativeStickyAssignor
from .range import RangeAssignor
from .registry import ASSIGNORS, assign_metadata, get_assignor, to_consumer_assignments
from .roundrobin import RoundRobinAssignor
from .sticky import StickyAssignor, decode_sticky_user_data, encode_sticky_user_data

__all__ = [
    "ASSIGNORS",
    "DEFAULT_GENERATION",
    "Assignor",
    "CooperativeStickyAssignor",
    "MemberSubscription",
    "RangeAssignor",
    "RebalanceProtocol",
    "RoundRobinAssignor",
    "StickyAssignor",
    "assign_metadata",
    "decode_sticky_user_data",
    "encode_sticky_user_data",
    "get_assignor",
    "to_consumer_assignments",
]
