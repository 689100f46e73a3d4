"""Kafka's consumer-protocol payloads: ConsumerProtocolSubscription and ConsumerProtocolAssignment.

These are the member metadata (JoinGroup) and assignment (SyncGroup) bytes of groups whose
protocol type is "consumer". Both are an int16 version followed by the struct in Kafka's classic
(non-flexible) encoding, big-endian: strings are an int16 length and UTF-8, nullable bytes an int32
length (-1 = null), arrays an int32 count. Versions 0-3 are known; as in Kafka, a newer version is
read with the newest known layout (later versions only append fields), and trailing bytes are ignored.

Subscription fields by version: topics and user_data (0+), owned_partitions (1+),
generation_id (2+, default -1), rack_id (3+, nullable). Assignment versions 0-3 all carry
assigned partitions and user_data.
"""

from __future__ import annotations

import logging
import struct
from dataclasses import dataclass, field
from typing import Iterable

from ..values import TopicPartition

log = logging.getLogger(__name__)

PROTOCOL_TYPE = "consumer"
SUBSCRIPTION_HIGHEST_VERSION = 3
ASSIGNMENT_HIGHEST_VERSION = 3

_INT16 = struct.Struct(">h")
_INT32 = struct.Struct(">i")
_VERSION_COUNT = struct.Struct(">hi")  # a version, then an array's length


class ConsumerProtocolError(ValueError):
    """Bytes that are not a valid consumer-protocol subscription or assignment."""


def _grouped(partitions: Iterable[TopicPartition]) -> tuple[TopicPartition, ...]:
    """Partitions grouped by topic (topics in order of first appearance), as the wire format stores them."""
    by_topic: dict[str, list[int]] = {}
    for topic, partition in partitions:
        by_topic.setdefault(topic, []).append(partition)
    return tuple(TopicPartition(t, p) for t, ps in by_topic.items() for p in ps)


@dataclass(frozen=True)
class Subscription:
    """A consumer's JoinGroup metadata: its topics, user data, owned partitions, generation and rack.

    Sequences are stored as tuples, and owned partitions grouped by topic, so that a decoded
    subscription equals the one that was encoded.
    """

    topics: tuple[str, ...]
    user_data: bytes | None = None
    owned_partitions: tuple[TopicPartition, ...] = field(default=())
    generation_id: int = -1
    rack_id: str | None = None

    def __post_init__(self) -> None:
        object.__setattr__(self, "topics", tuple(self.topics))
        object.__setattr__(self, "owned_partitions", _grouped(self.owned_partitions))
        if self.user_data is not None:
            object.__setattr__(self, "user_data", bytes(self.user_data))

    def encode(self, version: int = SUBSCRIPTION_HIGHEST_VERSION) -> bytes:
        """These fields as bytes of the given version (fields the version lacks are left out)."""
        return encode_subscription(self, version)

    @classmethod
    def decode(cls, data: bytes) -> Subscription:
        """Parse subscription bytes; raises ConsumerProtocolError if they are malformed."""
        return decode_subscription(data)


@dataclass(frozen=True)
class Assignment:
    """A consumer's SyncGroup assignment: its partitions (grouped by topic) and the assignor's user data."""

    partitions: tuple[TopicPartition, ...]
    user_data: bytes | None = None

    def __post_init__(self) -> None:
        object.__setattr__(self, "partitions", _grouped(self.partitions))
        if self.user_data is not None:
            object.__setattr__(self, "user_data", bytes(self.user_data))

    def encode(self, version: int = ASSIGNMENT_HIGHEST_VERSION) -> bytes:
        """These fields as assignment bytes of the given version."""
        return encode_assignment(self, version)

    @classmethod
    def decode(cls, data: bytes) -> Assignment:
        """Parse assignment bytes; raises ConsumerProtocolError if they are malformed."""
        return decode_assignment(data)


# --- writing ---------------------------------------------------------------------------------


class _Writer:
    def __init__(self) -> None:
        self.parts: list[bytes] = []

    def int16(self, v: int) -> None:
        self.parts.append(_INT16.pack(v))

    def int32(self, v: int) -> None:
        self.parts.append(_INT32.pack(v))

    def string(self, s: str | None) -> None:
        if s is None:
            self.int16(-1)
            return
        raw = s.encode("utf-8")
        if len(raw) > 0x7FFF:
            raise ConsumerProtocolError(f"string of {len(raw)} bytes is too long for an int16 length")
        self.int16(len(raw))
        self.parts.append(raw)

    def nullable_bytes(self, b: bytes | None) -> None:
        if b is None:
            self.int32(-1)
        else:
            self.int32(len(b))
            self.parts.append(bytes(b))

    def partitions(self, partitions: tuple[TopicPartition, ...]) -> None:
        by_topic: dict[str, list[int]] = {}
        for topic, partition in partitions:
            by_topic.setdefault(topic, []).append(partition)
        self.int32(len(by_topic))
        for topic, indexes in by_topic.items():
            self.string(topic)
            self.int32(len(indexes))
            for p in indexes:
                self.int32(p)

    def value(self) -> bytes:
        return b"".join(self.parts)


def _check_version(version: int, highest: int) -> None:
    if not 0 <= version <= highest:
        raise ConsumerProtocolError(f"cannot write version {version}; known versions are 0-{highest}")


def encode_subscription(sub: Subscription, version: int = SUBSCRIPTION_HIGHEST_VERSION) -> bytes:
    """ConsumerProtocolSubscription bytes (int16 version header, then the fields of that version)."""
    _check_version(version, SUBSCRIPTION_HIGHEST_VERSION)
    w = _Writer()
    w.int16(version)
    w.int32(len(sub.topics))
    for topic in sub.topics:
        w.string(topic)
    w.nullable_bytes(sub.user_data)
    if version >= 1:
        w.partitions(sub.owned_partitions)
    if version >= 2:
        w.int32(sub.generation_id)
    if version >= 3:
        w.string(sub.rack_id)
    return w.value()


def encode_assignment(assignment: Assignment, version: int = ASSIGNMENT_HIGHEST_VERSION) -> bytes:
    """ConsumerProtocolAssignment bytes (int16 version header, assigned partitions, user data)."""
    _check_version(version, ASSIGNMENT_HIGHEST_VERSION)
    w = _Writer()
    w.int16(version)
    w.partitions(assignment.partitions)
    w.nullable_bytes(assignment.user_data)
    return w.value()


# --- reading ---------------------------------------------------------------------------------


class _Reader:
    def __init__(self, data: bytes) -> None:
        if not isinstance(data, (bytes, bytearray, memoryview)):
            raise ConsumerProtocolError(f"expected bytes, got {type(data).__name__}")
        self.data = bytes(data)
        self.pos = 0

    def _take(self, n: int) -> bytes:
        end = self.pos + n
        if end > len(self.data):
            raise ConsumerProtocolError(f"buffer underflow: need {n} bytes at position {self.pos}")
        chunk = self.data[self.pos : end]
        self.pos = end
        return chunk

    def int16(self) -> int:
        return _INT16.unpack(self._take(2))[0]

    def int32(self) -> int:
        return _INT32.unpack(self._take(4))[0]

    def name(self) -> str:
        """A string that may not be null (a topic name)."""
        s = self.string()
        if s is None:
            raise ConsumerProtocolError("a null string where a name must be")
        return s

    def string(self, nullable: bool = False) -> str | None:
        n = self.int16()
        if n < 0:
            if nullable and n == -1:
                return None
            raise ConsumerProtocolError(f"invalid string length {n} at position {self.pos - 2}")
        try:
            return self._take(n).decode("utf-8")
        except UnicodeDecodeError as e:
            raise ConsumerProtocolError(f"string is not UTF-8: {e}") from e

    def nullable_bytes(self) -> bytes | None:
        n = self.int32()
        if n == -1:
            return None
        if n < 0:
            raise ConsumerProtocolError(f"invalid bytes length {n} at position {self.pos - 4}")
        return self._take(n)

    def count(self) -> int:
        n = self.int32()
        if n < 0:
            raise ConsumerProtocolError(f"invalid array length {n} at position {self.pos - 4}")
        # Every element takes at least 2 bytes, so a count beyond that is malformed.
        if n > (len(self.data) - self.pos) // 2:
            raise ConsumerProtocolError(f"array length {n} exceeds the remaining bytes")
        return n

    def topics(self) -> tuple[str, ...]:
        return tuple(self.name() for _ in range(self.count()))

    def partitions(self) -> tuple[TopicPartition, ...]:
        out: list[TopicPartition] = []
        for _ in range(self.count()):
            topic = self.name()
            out.extend(TopicPartition(topic, self.int32()) for _ in range(self.count()))
        return tuple(out)

    def version(self) -> int:
        v = self.int16()
        if v < 0:
            raise ConsumerProtocolError(f"invalid consumer protocol version {v}")
        return v


def decode_subscription(data: bytes) -> Subscription:
    """Parse ConsumerProtocolSubscription bytes; a newer version is read with the version-3 layout."""
    r = _Reader(data)
    version = r.version()
    topics = r.topics()
    user_data = r.nullable_bytes()
    owned = r.partitions() if version >= 1 else ()
    generation_id = r.int32() if version >= 2 else -1
    rack_id = r.string(nullable=True) if version >= 3 else None
    return Subscription(topics, user_data, owned, generation_id, rack_id)


def decode_assignment(data: bytes) -> Assignment:
    """Parse ConsumerProtocolAssignment bytes (any version: the layout has not changed since 0)."""
    r = _Reader(data)
    r.version()
    partitions = r.partitions()
    return Assignment(partitions, r.nullable_bytes())


def subscribed_topics(metadata: bytes) -> set[str] | None:
    """The topics in a member's subscription, or None if the bytes cannot be parsed; never raises.

    Like Kafka's ClassicGroup.computeSubscribedTopics, only the version-0 prefix (topics and
    user data) is read, so that any later version is understood.
    """
    topics = _prefix_topics(bytes(metadata)) if isinstance(metadata, (bytes, bytearray, memoryview)) else None
    if topics is None:
        log.debug("unparsable consumer subscription")
    return topics


def _prefix_topics(data: bytes) -> set[str] | None:
    # What _Reader reads of the version-0 prefix, read in place without a call per field: a restart
    # computes this for every member of every group it loads.
    size = len(data)
    if size < 6:
        return None
    version, count = _VERSION_COUNT.unpack_from(data)
    if version < 0 or count < 0 or count > (size - 6) // 2:
        return None
    topics = set()
    pos = 6
    for _ in range(count):
        if pos + 2 > size:
            return None
        n = _INT16.unpack_from(data, pos)[0]
        pos += 2
        if n < 0 or pos + n > size:
            return None
        try:
            topics.add(data[pos : pos + n].decode("utf-8"))
        except UnicodeDecodeError:
            return None
        pos += n
    if pos + 4 > size:
        return None
    n = _INT32.unpack_from(data, pos)[0]
    return topics if n >= -1 and pos + 4 + n <= size else None
