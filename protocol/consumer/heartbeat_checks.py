"""The checks of a ConsumerGroupHeartbeat before it is handled: the request itself, a member's epoch and instance id.

Each failure is a HeartbeatError carrying Kafka's error code and message, answered as is and
changing nothing.
"""

from __future__ import annotations

import re

from ..errors import Errors
from .group import ConsumerGroupMember
from .messages import (
    JOIN_GROUP_MEMBER_EPOCH,
    LEAVE_GROUP_MEMBER_EPOCH,
    LEAVE_GROUP_STATIC_MEMBER_EPOCH,
    ConsumerGroupHeartbeatRequest,
    ConsumerGroupHeartbeatResponse,
)


class HeartbeatError(Exception):
    """A heartbeat refused with a Kafka error code and message."""

    def __init__(self, error: Errors, message: str) -> None:
        super().__init__(message)
        self.error = error
        self.message = message


def heartbeat_error(error: Errors, message: str | None = None) -> ConsumerGroupHeartbeatResponse:
    """A ConsumerGroupHeartbeat error response."""
    return ConsumerGroupHeartbeatResponse(error, message, None, 0, 0, None)


# What Java's String.trim() removes: every char up to and including the space (U+0000-U+0020).
_JAVA_TRIMMED = "".join(chr(c) for c in range(0x21))


def is_blank(value: str | None) -> bool:
    """Kafka's test for an empty id: not null, and nothing left once trimmed as Java trims (spaces only is empty)."""
    return value is not None and not value.strip(_JAVA_TRIMMED)


def check_request(req: ConsumerGroupHeartbeatRequest, assignors: tuple[str, ...] | list[str]) -> None:
    """Kafka's throwIfConsumerGroupHeartbeatRequestIsInvalid: INVALID_REQUEST or UNSUPPORTED_ASSIGNOR.

    As Kafka's throwIfEmptyString, an id made only of spaces (or other chars Java's trim removes) is empty.
    """
    bad = Errors.INVALID_REQUEST
    if is_blank(req.group_id):
        raise HeartbeatError(bad, "GroupId can't be empty.")
    if is_blank(req.instance_id):
        raise HeartbeatError(bad, "InstanceId can't be empty.")
    if is_blank(req.rack_id):
        raise HeartbeatError(bad, "RackId can't be empty.")
    epoch = req.member_epoch
    if epoch > 0 or epoch == LEAVE_GROUP_MEMBER_EPOCH:
        if is_blank(req.member_id):
            raise HeartbeatError(bad, "MemberId can't be empty.")
    elif epoch == JOIN_GROUP_MEMBER_EPOCH:
        if req.rebalance_timeout_ms == -1:
            raise HeartbeatError(bad, "RebalanceTimeoutMs must be provided in first request.")
        if req.topic_partitions is None or len(req.topic_partitions) > 0:
            raise HeartbeatError(bad, "TopicPartitions must be empty when (re-)joining.")
        # An empty list is a subscription (to nothing yet); only a join that sends neither field is refused.
        if req.subscribed_topic_names is None and req.subscribed_topic_regex is None:
            raise HeartbeatError(
                bad, "Either SubscribedTopicNames or SubscribedTopicRegex must be non-null when (re-)joining."
            )
    elif epoch == LEAVE_GROUP_STATIC_MEMBER_EPOCH:
        if is_blank(req.member_id):
            raise HeartbeatError(bad, "MemberId can't be empty.")
        if req.instance_id is None:
            raise HeartbeatError(bad, "InstanceId can't be null.")
    else:
        raise HeartbeatError(bad, "MemberEpoch is invalid.")
    if req.subscribed_topic_regex is not None:
        try:
            re.compile(req.subscribed_topic_regex)
        except re.error as e:
            raise HeartbeatError(
                bad, f"SubscribedTopicRegex {req.subscribed_topic_regex!r} is invalid: {e}."
            ) from e
    if req.server_assignor is not None and req.server_assignor not in assignors:
        raise HeartbeatError(
            Errors.UNSUPPORTED_ASSIGNOR,
            f"ServerAssignor {req.server_assignor} is not supported. Supported assignors: {', '.join(assignors)}.",
        )


def check_epoch(member: ConsumerGroupMember, req: ConsumerGroupHeartbeatRequest) -> None:
    """Kafka's throwIfConsumerGroupMemberEpochIsInvalid: a lagging member is accepted only one epoch back
    and only if it owns no more than its current assignment (the response with the new epoch may be lost);
    epoch 0 (a rejoin under the member's own id) is not checked."""
    received, known = req.member_epoch, member.member_epoch
    if received == JOIN_GROUP_MEMBER_EPOCH:  # Kafka 4.x: a member that rejoins under its id is not fenced
        return
    if received > known:
        raise HeartbeatError(
            Errors.FENCED_MEMBER_EPOCH,
            f"The consumer group member has a greater member epoch ({received}) than the one known by the group "
            f"coordinator ({known}). The member must abandon all its partitions and rejoin.",
        )
    if received < known:
        owned = req.topic_partitions
        subset = owned is not None and all(tp[1] in member.assigned_partitions.get(tp[0], ()) for tp in owned)
        if received != member.previous_member_epoch or not subset:
            raise HeartbeatError(
                Errors.FENCED_MEMBER_EPOCH,
                f"The consumer group member has a smaller member epoch ({received}) than the one known by the group "
                f"coordinator ({known}). The member must abandon all its partitions and rejoin.",
            )


def check_static(existing: ConsumerGroupMember | None, req: ConsumerGroupHeartbeatRequest) -> ConsumerGroupMember:
    """The instance id must be known and held by this member id (UNKNOWN_MEMBER_ID, FENCED_INSTANCE_ID);
    returns the member that holds it."""
    if existing is None:
        raise HeartbeatError(Errors.UNKNOWN_MEMBER_ID, f"Instance id {req.instance_id} is unknown.")
    if existing.member_id != req.member_id:
        raise HeartbeatError(
            Errors.FENCED_INSTANCE_ID,
            f"Static member {req.member_id} with instance id {req.instance_id} was fenced by member "
            f"{existing.member_id}.",
        )
    return existing
