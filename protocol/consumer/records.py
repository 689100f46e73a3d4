"""The consumer group records of Kafka's group coordinator (KIP-848), and their msgpack form.

Key types are Kafka's record types 3 to 8. Assignments are stored as tuples of
`(topic, (partition, ...))`, sorted, so that equal assignments encode to equal bytes. Like the
classic records, a record is `[key_type, *key_fields, value]` with value nil (a tombstone) or
`[value_version, *value_fields]`.
"""

from __future__ import annotations

from typing import Any, Iterable, Mapping, NamedTuple

from ..values import TopicPartition

CONSUMER_GROUP_METADATA_KEY_TYPE = 3
CONSUMER_GROUP_PARTITION_METADATA_KEY_TYPE = 4
CONSUMER_GROUP_MEMBER_METADATA_KEY_TYPE = 5
CONSUMER_GROUP_TARGET_ASSIGNMENT_METADATA_KEY_TYPE = 6
CONSUMER_GROUP_TARGET_ASSIGNMENT_MEMBER_KEY_TYPE = 7
CONSUMER_GROUP_CURRENT_MEMBER_ASSIGNMENT_KEY_TYPE = 8
CONSUMER_VALUE_VERSION = 0

# An assignment as stored: ((topic, (partition, ...)), ...), both levels sorted.
StoredAssignment = tuple[tuple[str, tuple[int, ...]], ...]


def to_stored(assignment: Mapping[str, Iterable[int]]) -> StoredAssignment:
    """The stored form of a topic -> partitions mapping (empty topics left out)."""
    return tuple((t, tuple(sorted(ps))) for t, ps in sorted(assignment.items()) if ps)


def from_stored(stored: Iterable[Any]) -> dict[str, frozenset[int]]:
    """The topic -> partitions mapping of a stored assignment."""
    return {t: frozenset(ps) for t, ps in stored}


def stored_partitions(stored: StoredAssignment) -> list[TopicPartition]:
    """The partitions of a stored assignment, as a sorted list."""
    return [TopicPartition(t, p) for t, ps in stored for p in ps]


class ConsumerGroupMetadataKey(NamedTuple):
    """Key of a consumer group's epoch record."""

    group: str


class ConsumerGroupMetadataValue(NamedTuple):
    """The group epoch: bumped whenever membership, subscriptions or subscribed topics change."""

    epoch: int


class ConsumerGroupPartitionMetadataKey(NamedTuple):
    """Key of a consumer group's subscription metadata."""

    group: str


class ConsumerGroupPartitionMetadataValue(NamedTuple):
    """The partition counts of the topics the group subscribes to: ((topic, num_partitions), ...)."""

    topics: tuple[tuple[str, int], ...]


class ConsumerGroupMemberMetadataKey(NamedTuple):
    """Key of one member's subscription."""

    group: str
    member_id: str


class ConsumerGroupMemberMetadataValue(NamedTuple):
    """A member's identity and subscription as it last reported them."""

    instance_id: str | None
    rack_id: str | None
    client_id: str
    client_host: str
    subscribed_topic_names: tuple[str, ...]
    subscribed_topic_regex: str | None
    server_assignor: str | None
    rebalance_timeout_ms: int


class ConsumerGroupTargetAssignmentMetadataKey(NamedTuple):
    """Key of the target assignment's epoch."""

    group: str


class ConsumerGroupTargetAssignmentMetadataValue(NamedTuple):
    """The group epoch the target assignment was computed for."""

    assignment_epoch: int


class ConsumerGroupTargetAssignmentMemberKey(NamedTuple):
    """Key of one member's target assignment."""

    group: str
    member_id: str


class ConsumerGroupTargetAssignmentMemberValue(NamedTuple):
    """The partitions the assignor gives the member."""

    topic_partitions: StoredAssignment


class ConsumerGroupCurrentMemberAssignmentKey(NamedTuple):
    """Key of one member's current assignment."""

    group: str
    member_id: str


class ConsumerGroupCurrentMemberAssignmentValue(NamedTuple):
    """Where the member's reconciliation stands: epochs, state, owned and to-be-revoked partitions."""

    member_epoch: int
    previous_member_epoch: int
    state: int
    assigned_partitions: StoredAssignment
    partitions_pending_revocation: StoredAssignment


CONSUMER_KEY_TYPES: dict[type, int] = {
    ConsumerGroupMetadataKey: CONSUMER_GROUP_METADATA_KEY_TYPE,
    ConsumerGroupPartitionMetadataKey: CONSUMER_GROUP_PARTITION_METADATA_KEY_TYPE,
    ConsumerGroupMemberMetadataKey: CONSUMER_GROUP_MEMBER_METADATA_KEY_TYPE,
    ConsumerGroupTargetAssignmentMetadataKey: CONSUMER_GROUP_TARGET_ASSIGNMENT_METADATA_KEY_TYPE,
    ConsumerGroupTargetAssignmentMemberKey: CONSUMER_GROUP_TARGET_ASSIGNMENT_MEMBER_KEY_TYPE,
    ConsumerGroupCurrentMemberAssignmentKey: CONSUMER_GROUP_CURRENT_MEMBER_ASSIGNMENT_KEY_TYPE,
}


def _assignment_obj(a: StoredAssignment) -> list:
    return [[t, list(ps)] for t, ps in a]


def _assignment_from(obj: list) -> StoredAssignment:
    return tuple((t, tuple(ps)) for t, ps in obj)


def _value_obj(value: Any) -> list:
    if type(value) is ConsumerGroupPartitionMetadataValue:
        return [[[t, n] for t, n in value.topics]]
    if type(value) is ConsumerGroupMemberMetadataValue:
        return [*value[:4], list(value.subscribed_topic_names), *value[5:]]
    if type(value) is ConsumerGroupTargetAssignmentMemberValue:
        return [_assignment_obj(value.topic_partitions)]
    if type(value) is ConsumerGroupCurrentMemberAssignmentValue:
        return [*value[:3], _assignment_obj(value[3]), _assignment_obj(value[4])]
    return list(value)


_VALUE_FROM: dict[int, Any] = {
    CONSUMER_GROUP_METADATA_KEY_TYPE: lambda v: ConsumerGroupMetadataValue(*v),
    CONSUMER_GROUP_PARTITION_METADATA_KEY_TYPE: lambda v: ConsumerGroupPartitionMetadataValue(
        tuple((t, n) for t, n in v[0])
    ),
    CONSUMER_GROUP_MEMBER_METADATA_KEY_TYPE: lambda v: ConsumerGroupMemberMetadataValue(*v[:4], tuple(v[4]), *v[5:8]),
    CONSUMER_GROUP_TARGET_ASSIGNMENT_METADATA_KEY_TYPE: lambda v: ConsumerGroupTargetAssignmentMetadataValue(*v),
    CONSUMER_GROUP_TARGET_ASSIGNMENT_MEMBER_KEY_TYPE: lambda v: ConsumerGroupTargetAssignmentMemberValue(
        _assignment_from(v[0])
    ),
    CONSUMER_GROUP_CURRENT_MEMBER_ASSIGNMENT_KEY_TYPE: lambda v: ConsumerGroupCurrentMemberAssignmentValue(
        *v[:3], _assignment_from(v[3]), _assignment_from(v[4])
    ),
}
_KEY_CLASSES = {kind: cls for cls, kind in CONSUMER_KEY_TYPES.items()}
_NUM_VALUE_FIELDS = {1: 1, 2: 1, 3: 8, 4: 1, 5: 1, 6: 5}


def consumer_record_obj(key: Any, value: Any) -> list:
    """The msgpack-ready form of a consumer group record."""
    kind = CONSUMER_KEY_TYPES[type(key)]
    return [kind, *key, None if value is None else [CONSUMER_VALUE_VERSION, *_value_obj(value)]]


def consumer_record_from_obj(obj: list) -> tuple[Any, Any] | None:
    """(key, value) of an unpacked consumer group record, or None if obj is not one.

    Raises ValueError for a value version this code does not know, IndexError/TypeError if malformed.
    """
    cls = _KEY_CLASSES.get(obj[0])
    if cls is None:
        return None
    n = len(cls._fields)
    if len(obj) != n + 2:
        raise IndexError(f"a {cls.__name__} record has {n} key fields")
    key = cls(*obj[1 : n + 1])
    v = obj[n + 1]
    if v is None:
        return key, None
    if v[0] != CONSUMER_VALUE_VERSION:
        raise ValueError(f"{cls.__name__} value version {v[0]} is not supported")
    if len(v) - 1 != _NUM_VALUE_FIELDS[obj[0] - 2]:
        raise IndexError(f"{cls.__name__} value has {len(v) - 1} fields")
    return key, _VALUE_FROM[obj[0]](v[1:])
