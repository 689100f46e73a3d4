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
expires once now >= expire_timestamp, in every case above where offsets expire at all, as Kafka's
OffsetExpirationConditionImpl decides; where nothing expires, it does not either.
"""

from __future__ import annotations

import logging
from typing import Callable, Mapping

from ..classic.group import CONSUMER_PROTOCOL_TYPE, ClassicGroup, GroupState
from ..records import OffsetCommitValue
from ..values import TopicPartition

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


def is_expired(
    condition: tuple[BaseTimestamp, set[str]], tp: TopicPartition, value: OffsetCommitValue, now_ms: int,
    retention_ms: int,
) -> bool:
    """Whether one offset has expired under a group's `condition` (from expiration_condition)."""
    base, subscribed = condition
    if tp.topic in subscribed:
        return False
    if value.expire_timestamp != -1:
        return now_ms >= value.expire_timestamp
    return now_ms - base(value) >= retention_ms


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
    return [tp for tp, value in offsets.items() if is_expired(condition, tp, value, now_ms, retention_ms)]
