"""ConsumerProtocolSubscription / ConsumerProtocolAssignment: round trips and Kafka's byte layouts."""

from __future__ import annotations

import struct

import pytest
from hypothesis import given
from hypothesis import strategies as st

from groupcoord.protocol.assignors.consumer_protocol import (
    Assignment,
    ConsumerProtocolError,
    Subscription,
    _Reader,
    decode_assignment,
    decode_subscription,
    encode_assignment,
    encode_subscription,
    subscribed_topics,
)
from groupcoord.protocol.values import TopicPartition as TP


def i16(v: int) -> bytes:
    return struct.pack(">h", v)


def i32(v: int) -> bytes:
    return struct.pack(">i", v)


def s(text: str) -> bytes:
    raw = text.encode()
    return i16(len(raw)) + raw


# Hand-built bytes, field by field as in ConsumerProtocolSubscription.json.
V0_BODY = i32(2) + s("a") + s("bc") + i32(1) + b"\x01"
OWNED = i32(2) + s("a") + i32(2) + i32(0) + i32(1) + s("bc") + i32(1) + i32(4)
V1_BODY = V0_BODY + OWNED
V2_BODY = V1_BODY + i32(7)
V3_BODY = V2_BODY + s("rack-1")

FULL = Subscription(("a", "bc"), b"\x01", (TP("a", 0), TP("a", 1), TP("bc", 4)), 7, "rack-1")


@pytest.mark.parametrize(
    "version, body, expected",
    [
        (0, V0_BODY, Subscription(("a", "bc"), b"\x01")),
        (1, V1_BODY, Subscription(("a", "bc"), b"\x01", FULL.owned_partitions)),
        (2, V2_BODY, Subscription(("a", "bc"), b"\x01", FULL.owned_partitions, 7)),
        (3, V3_BODY, FULL),
    ],
)
def test_subscription_matches_hand_built_bytes(version, body, expected):
    data = i16(version) + body
    assert decode_subscription(data) == expected
    assert encode_subscription(FULL, version) == data
    assert FULL.encode(version) == data
    assert Subscription.decode(data) == expected


def test_subscription_v3_null_rack_and_null_user_data():
    sub = Subscription(["t"], None, [], -1, None)
    data = i16(3) + i32(1) + s("t") + i32(-1) + i32(0) + i32(-1) + i16(-1)
    assert encode_subscription(sub) == data
    assert decode_subscription(data) == sub
    assert decode_subscription(data).user_data is None


def test_newer_subscription_version_reads_known_fields():
    # A version-4 subscription must keep the version-3 prefix; extra fields are ignored.
    data = i16(4) + V3_BODY + i32(99) + s("future field")
    assert decode_subscription(data) == FULL


def test_trailing_bytes_after_a_known_version_are_ignored():
    assert decode_subscription(i16(0) + V0_BODY + b"junk") == Subscription(("a", "bc"), b"\x01")


def test_encoding_drops_fields_that_the_version_lacks():
    assert decode_subscription(encode_subscription(FULL, 0)) == Subscription(("a", "bc"), b"\x01")
    assert decode_subscription(encode_subscription(FULL, 2)).rack_id is None


def test_unknown_write_version_is_refused():
    with pytest.raises(ConsumerProtocolError):
        encode_subscription(FULL, 4)
    with pytest.raises(ConsumerProtocolError):
        encode_assignment(Assignment([]), -1)


@pytest.mark.parametrize("version", [0, 1, 2, 3])
def test_assignment_matches_hand_built_bytes(version):
    data = i16(version) + i32(2) + s("t") + i32(2) + i32(0) + i32(3) + s("u") + i32(1) + i32(9) + i32(2) + b"ud"
    expected = Assignment([TP("t", 0), TP("t", 3), TP("u", 9)], b"ud")
    assert decode_assignment(data) == expected
    assert encode_assignment(expected, version) == data
    assert Assignment.decode(data) == expected == decode_assignment(expected.encode(version))


def test_assignment_null_user_data_and_newer_version():
    data = i16(0) + i32(0) + i32(-1)
    assert decode_assignment(data) == Assignment((), None)
    assert decode_assignment(i16(7) + i32(1) + s("t") + i32(1) + i32(0) + i32(-1) + b"more") == Assignment([TP("t", 0)])


def test_partitions_are_grouped_by_topic_so_round_trips_are_exact():
    a = Assignment([TP("x", 1), TP("y", 0), TP("x", 0)])
    assert a.partitions == (TP("x", 1), TP("x", 0), TP("y", 0))
    assert decode_assignment(encode_assignment(a)) == a
    sub = Subscription(["x"], owned_partitions=[TP("y", 2), TP("x", 0), TP("y", 1)])
    assert decode_subscription(encode_subscription(sub)) == sub


def test_dataclasses_are_frozen_and_hashable():
    sub = Subscription(["a"], bytearray(b"u"))
    assert sub.user_data == b"u" and isinstance(sub.user_data, bytes)
    assert hash(sub) == hash(Subscription(("a",), b"u"))
    with pytest.raises(AttributeError):
        sub.topics = ()  # type: ignore[misc]


names = st.text(min_size=0, max_size=20)
tps = st.lists(st.builds(TP, names, st.integers(0, 2**31 - 1)), max_size=8)
user_data = st.none() | st.binary(max_size=50)


@given(
    st.lists(names, max_size=8),
    user_data,
    tps,
    st.integers(-(2**31), 2**31 - 1),
    st.none() | names,
)
def test_subscription_round_trip(topics, ud, owned, generation, rack):
    sub = Subscription(topics, ud, owned, generation, rack)
    assert decode_subscription(encode_subscription(sub)) == sub
    assert subscribed_topics(encode_subscription(sub, 0)) == set(topics)


@given(tps, user_data, st.integers(0, 3))
def test_assignment_round_trip(partitions, ud, version):
    a = Assignment(partitions, ud)
    assert decode_assignment(encode_assignment(a, version)) == a


# --- malformed input ------------------------------------------------------------------------

MALFORMED = [
    b"",
    b"\x00",
    i16(-1) + V0_BODY,  # negative version
    i16(0) + i32(2) + s("a"),  # truncated topic list
    i16(0) + i32(-1) + i32(-1),  # null topic array
    i16(0) + i32(1) + i16(-1) + i32(-1),  # null topic
    i16(0) + i32(1) + i16(5) + b"ab",  # string shorter than its length
    i16(0) + i32(1) + s("a"),  # user data missing
    i16(0) + i32(1) + s("a") + i32(-2),  # bad bytes length
    i16(0) + i32(1) + s("a") + i32(10) + b"x",  # user data truncated
    i16(0) + i32(2**31 - 1) + s("a"),  # absurd count
    i16(0) + i32(1) + i16(2) + b"\xff\xfe" + i32(-1),  # not UTF-8
]


@pytest.mark.parametrize("data", MALFORMED)
def test_malformed_subscription(data):
    assert subscribed_topics(data) is None
    with pytest.raises(ConsumerProtocolError):
        decode_subscription(data)


def _topics_read_field_by_field(data: bytes) -> set[str] | None:
    """subscribed_topics as the field reader reads the version-0 prefix: the reference for its fast path."""
    try:
        r = _Reader(data)
        r.version()
        topics = r.topics()
        r.nullable_bytes()
    except (ConsumerProtocolError, struct.error):
        return None
    return set(topics)


@given(st.lists(names, max_size=6), user_data, st.integers(0, 3), st.data())
def test_subscribed_topics_reads_what_the_field_reader_reads_of_any_bytes(topics, ud, version, data):
    encoded = encode_subscription(Subscription(topics, ud), version)
    cut = data.draw(st.integers(0, len(encoded)))
    flips = data.draw(st.lists(st.tuples(st.integers(0, max(0, len(encoded) - 1)), st.integers(0, 255)), max_size=3))
    mutated = bytearray(encoded[:cut] + data.draw(st.binary(max_size=8)))
    for at, value in flips:
        if at < len(mutated):
            mutated[at] = value
    for candidate in (encoded, bytes(mutated), data.draw(st.binary(max_size=40))):
        assert subscribed_topics(candidate) == _topics_read_field_by_field(candidate)


def test_malformed_later_fields_still_give_topics_but_do_not_decode():
    data = i16(1) + V0_BODY + i32(1) + s("a")  # owned partitions truncated
    assert subscribed_topics(data) == {"a", "bc"}
    with pytest.raises(ConsumerProtocolError):
        decode_subscription(data)


@pytest.mark.parametrize("data", [b"", i16(0), i16(0) + i32(1) + s("t"), i16(-3) + i32(0) + i32(-1)])
def test_malformed_assignment(data):
    with pytest.raises(ConsumerProtocolError):
        decode_assignment(data)


@pytest.mark.parametrize("value", [None, "text", 42, [1, 2]])
def test_subscribed_topics_never_raises_on_non_bytes(value):
    assert subscribed_topics(value) is None  # type: ignore[arg-type]


@given(st.binary(max_size=64))
def test_subscribed_topics_never_raises(data):
    result = subscribed_topics(data)
    assert result is None or isinstance(result, set)


def test_subscribed_topics_accepts_bytearray_and_memoryview():
    data = encode_subscription(Subscription(["x", "y", "x"]))
    assert subscribed_topics(bytearray(data)) == {"x", "y"}
    assert subscribed_topics(memoryview(data)) == {"x", "y"}
