"""Which committed offsets have expired (KIP-211), as Kafka's ClassicGroup.offsetExpirationCondition decides.

* a group with a protocol type that is Empty: every offset; the base time is when the group
  became Empty (or the offset's commit time if that is unknown);
* a "consumer" group that is Stable and whose subscription is known: only offsets of topics no
  member subscribes to; the base time is the commit time;
* a group without a protocol type (a "simple" group that only stores offsets): every offset;
  the base time is the commit time;
* any other group (rebalancing, another protocol type while it has members, an unknown
  subscription): nothing expires.

An eligible offset expires when now - base >= offsets.retention.ms. An offset committed with an
explicit retention (an old OffsetCommit v2-v4 RetentionTimeMs, stored as expire_timestamp) instead
expires once now >= expire_timestamp, but only while its group is Empty: while the group has
members the explicit timestamp is not honoured and the retention rule above applies.
"""

from __future__ import annotations

import logging
from typing import Callable, Mapping

from .group import CONSUMER_PROTOCOL_TYPE, ClassicGroup, GroupState
from .records import OffsetCommitValue
from .values import TopicPartition

log = logging.getLogger(__name__)

BaseTimestamp = Callable[[OffsetCommitValue], int]


def _commit_timestamp(value: OffsetCommitValue) -> int:
    return value.commit_timestamp


def expiration_condition(group: ClassicGroup) -> tuple[BaseTimestamp, set[str]] | None:
    """The base-time function and the topics exempt from expiry for `group`, or None if nothing expires."""
    if group.protocol_type is None:
        return _commit_timestamp, set()
    if group.state == GroupState.EMPTY:
        became_empty = group.state_timestamp_ms
        if became_empty is None:
            return _commit_timestamp, set()
        return (lambda _value: became_empty), set()
    if group.protocol_type == CONSUMER_PROTOCOL_TYPE and group.state == GroupState.STABLE:
        subscribed = group.subscribed_topics()
        if subscribed is not None:
            return _commit_timestamp, subscribed
    return None


def expired_partitions(
    group: ClassicGroup,
    offsets: Mapping[TopicPartition, OffsetCommitValue],
    now_ms: int,
    retention_ms: int,
) -> list[TopicPartition]:
    """The partitions of `offsets` (the group's committed offsets) that have expired at `now_ms`."""
    condition = expiration_condition(group)
    if condition is None:
        return []
    base, subscribed = condition
    honour_explicit = group.state == GroupState.EMPTY
    expired = []
    for tp, value in offsets.items():
        if tp.topic in subscribed:
            continue
        if honour_explicit and value.expire_timestamp != -1:
            if now_ms >= value.expire_timestamp:
                expired.append(tp)
        elif now_ms - base(value) >= retention_ms:
            expired.append(tp)
    return expired
