"""Requests and responses of the consumer group protocol (KIP-848): ConsumerGroupHeartbeat and ConsumerGroupDescribe.

Field names are Kafka's (API keys 68 and 69) in snake_case; partitions are named by topic name
and partition rather than by topic id.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Sequence

from ..errors import Errors
from ..values import TopicPartition

__all__ = [
    "ConsumerGroupDescribeRequest",
    "ConsumerGroupDescribeResponse",
    "ConsumerGroupHeartbeatRequest",
    "ConsumerGroupHeartbeatResponse",
    "DescribedConsumerGroup",
    "DescribedConsumerGroupMember",
]

# Member epochs with a meaning of their own (Kafka's ConsumerGroupHeartbeatRequest constants).
JOIN_GROUP_MEMBER_EPOCH = 0
LEAVE_GROUP_MEMBER_EPOCH = -1
LEAVE_GROUP_STATIC_MEMBER_EPOCH = -2


@dataclass(frozen=True)
class ConsumerGroupHeartbeatRequest:
    """A member joins (epoch 0), heartbeats and acknowledges its assignment, or leaves (epoch -1, static -2).

    None in an optional field means "unchanged since the last heartbeat"; topic_partitions are
    the partitions the member owns (None: not reported in this heartbeat).
    """

    group_id: str
    member_id: str = ""
    member_epoch: int = 0
    instance_id: str | None = None
    rack_id: str | None = None
    rebalance_timeout_ms: int = -1
    subscribed_topic_names: Sequence[str] | None = None
    subscribed_topic_regex: str | None = None
    server_assignor: str | None = None
    topic_partitions: Sequence[TopicPartition] | None = None
    client_id: str = ""
    client_host: str = ""


@dataclass(frozen=True)
class ConsumerGroupHeartbeatResponse:
    """The member's id and epoch, when to heartbeat next, and its assignment (None: unchanged)."""

    error: Errors
    error_message: str | None
    member_id: str | None
    member_epoch: int
    heartbeat_interval_ms: int
    assignment: list[TopicPartition] | None
    throttle_time_ms: int = 0  # how long the client waits before its next request (a quota applies)


@dataclass(frozen=True)
class ConsumerGroupDescribeRequest:
    """Describe consumer groups by id."""

    group_ids: Sequence[str]
    include_authorized_operations: bool = False


@dataclass(frozen=True)
class DescribedConsumerGroupMember:
    """One member as ConsumerGroupDescribe shows it: its subscription, current and target assignment."""

    member_id: str
    instance_id: str | None
    rack_id: str | None
    member_epoch: int
    client_id: str
    client_host: str
    subscribed_topic_names: list[str]
    subscribed_topic_regex: str | None
    assignment: list[TopicPartition]
    target_assignment: list[TopicPartition]
    member_type: int = 1  # Kafka's MemberType: 1 = consumer protocol, 0 = classic


@dataclass(frozen=True)
class DescribedConsumerGroup:
    """One consumer group: state, epochs, assignor and members (error GROUP_ID_NOT_FOUND if it is none)."""

    error: Errors
    group_id: str
    group_state: str = ""
    group_epoch: int = 0  # Kafka's DescribedGroup defaults, also in an error entry
    assignment_epoch: int = 0
    assignor_name: str = ""
    members: list[DescribedConsumerGroupMember] = field(default_factory=list)
    error_message: str | None = None
    authorized_operations: int = -2147483648


@dataclass(frozen=True)
class ConsumerGroupDescribeResponse:
    """The described groups, in request order."""

    groups: list[DescribedConsumerGroup]
    throttle_time_ms: int = 0  # how long the client waits before its next request (a quota applies)
