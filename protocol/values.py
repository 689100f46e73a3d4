"""Small value types shared by requests, records and clients."""

from __future__ import annotations

import enum
from typing import NamedTuple


class TopicPartition(NamedTuple):
    """A partition of a topic; hashable, so it keys offset maps."""

    topic: str
    partition: int


class OffsetAndMetadata(NamedTuple):
    """An offset to commit, with the consumer's metadata string and the leader epoch it saw."""

    offset: int
    metadata: str = ""
    leader_epoch: int = -1


class GroupState(enum.StrEnum):
    """A classic group's state; values are Kafka's state names."""

    EMPTY = "Empty"
    PREPARING_REBALANCE = "PreparingRebalance"
    COMPLETING_REBALANCE = "CompletingRebalance"
    STABLE = "Stable"
    DEAD = "Dead"


NO_GENERATION = -1
UNKNOWN_MEMBER_ID = ""
