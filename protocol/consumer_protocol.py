"""Kept at the old path API.md names; the codec lives in `groupcoord.protocol.assignors.consumer_protocol`."""

from .assignors.consumer_protocol import (
    ASSIGNMENT_HIGHEST_VERSION,
    PROTOCOL_TYPE,
    SUBSCRIPTION_HIGHEST_VERSION,
    Assignment,
    ConsumerProtocolError,
    Subscription,
    decode_assignment,
    decode_subscription,
    encode_assignment,
    encode_subscription,
    subscribed_topics,
)

__all__ = [
    "ASSIGNMENT_HIGHEST_VERSION",
    "PROTOCOL_TYPE",
    "SUBSCRIPTION_HIGHEST_VERSION",
    "Assignment",
    "ConsumerProtocolError",
    "Subscription",
    "decode_assignment",
    "decode_subscription",
    "encode_assignment",
    "encode_subscription",
    "subscribed_topics",
]
