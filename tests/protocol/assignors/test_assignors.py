"""Range and roundrobin assignors against Kafka's RangeAssignorTest / RoundRobinAssignorTest cases,
plus the registry, the sticky user-data formats and the consumer-protocol byte helpers."""

from __future__ import annotations

import struct

import pytest

from groupcoord.protocol import TopicPartition
from groupcoord.protocol.assignors import (
    ASSIGNORS,
    Assignor,
    CooperativeStickyAssignor,
    MemberSubscription,
    RangeAssignor,
    RebalanceProtocol,
    RoundRobinAssignor,
    StickyAssignor,
    assign_metadata,
    decode_sticky_user_data,
    encode_sticky_user_data,
    get_assignor,
    to_consumer_assignments,
)
from groupcoord.protocol.assignors.consumer_protocol import (
    Assignment,
    ConsumerProtocolError,
    Subscription,
    decode_assignment,
    encode_subscription,
)

T1, T2 = "topic1", "topic2"


def tp(topic: str, partition: int) -> TopicPartition:
    return TopicPartition(topic, partition)


def sub(*topics: str, instance: str | None = None) -> MemberSubscription:
    return MemberSubscription(list(topics), group_instance_id=instance)


# --- cases shared by range and roundrobin (Kafka's tests give both the same answer) ------------


@pytest.mark.parametrize("assignor", [RangeAssignor(), RoundRobinAssignor()], ids=repr)
class TestCommonCases:
    def test_one_consumer_no_topic(self, assignor: Assignor) -> None:
        assert assignor.assign({}, {"consumer": sub()}) == {"consumer": []}

    def test_one_consumer_nonexistent_topic(self, assignor: Assignor) -> None:
        assert assignor.assign({}, {"consumer": sub("topic")}) == {"consumer": []}

    def test_one_consumer_one_topic(self, assignor: Assignor) -> None:
        result = assignor.assign({"topic": 3}, {"consumer": sub("topic")})
        assert result == {"consumer": [tp("topic", 0), tp("topic", 1), tp("topic", 2)]}

    def test_only_assigns_partitions_from_subscribed_topics(self, assignor: Assignor) -> None:
        result = assignor.assign({"topic": 3, "other": 3}, {"consumer": sub("topic")})
        assert result == {"consumer": [tp("topic", 0), tp("topic", 1), tp("topic", 2)]}

    def test_one_consumer_multiple_topics(self, assignor: Assignor) -> None:
        result = assignor.assign({T1: 1, T2: 2}, {"consumer": sub(T1, T2)})
        assert result == {"consumer": [tp(T1, 0), tp(T2, 0), tp(T2, 1)]}

    def test_two_consumers_one_topic_one_partition(self, assignor: Assignor) -> None:
        result = assignor.assign({"topic": 1}, {"consumer1": sub("topic"), "consumer2": sub("topic")})
        assert result == {"consumer1": [tp("topic", 0)], "consumer2": []}

    def test_two_consumers_one_topic_two_partitions(self, assignor: Assignor) -> None:
        result = assignor.assign({"topic": 2}, {"consumer1": sub("topic"), "consumer2": sub("topic")})
        assert result == {"consumer1": [tp("topic", 0)], "consumer2": [tp("topic", 1)]}

    def test_multiple_consumers_mixed_topics(self, assignor: Assignor) -> None:
        subs = {"consumer1": sub(T1), "consumer2": sub(T1, T2), "consumer3": sub(T1)}
        assert assignor.assign({T1: 3, T2: 2}, subs) == {
            "consumer1": [tp(T1, 0)],
            "consumer2": [tp(T1, 1), tp(T2, 0), tp(T2, 1)],
            "consumer3": [tp(T1, 2)],
        }

    def test_more_consumers_than_partitions(self, assignor: Assignor) -> None:
        subs = {f"consumer{i}": sub("topic") for i in range(1, 5)}
        result = assignor.assign({"topic": 2}, subs)
        assert result == {
            "consumer1": [tp("topic", 0)],
            "consumer2": [tp("topic", 1)],
            "consumer3": [],
            "consumer4": [],
        }

    def test_topic_with_no_partitions_is_skipped(self, assignor: Assignor) -> None:
        assert assignor.assign({"empty": 0}, {"c": sub("empty")}) == {"c": []}

    def test_no_members(self, assignor: Assignor) -> None:
        assert assignor.assign({"topic": 3}, {}) == {}

    def test_accepts_plain_tuples_and_consumer_protocol_subscriptions(self, assignor: Assignor) -> None:
        subs = {"consumer1": (["topic"], [], -1, None), "consumer2": Subscription(("topic",))}
        assert assignor.assign({"topic": 2}, subs) == {
            "consumer1": [tp("topic", 0)],
            "consumer2": [tp("topic", 1)],
        }

    def test_eager_only(self, assignor: Assignor) -> None:
        assert assignor.supported_protocols == (RebalanceProtocol.EAGER,)


# --- range --------------------------------------------------------------------------------------


def test_range_two_consumers_two_topics_six_partitions() -> None:
    result = RangeAssignor().assign({T1: 3, T2: 3}, {"consumer1": sub(T1, T2), "consumer2": sub(T1, T2)})
    assert result == {
        "consumer1": [tp(T1, 0), tp(T1, 1), tp(T2, 0), tp(T2, 1)],
        "consumer2": [tp(T1, 2), tp(T2, 2)],
    }


def test_range_static_members_ordered_by_instance_id() -> None:
    # consumer-a sorts first by member id, but consumer-b's instance id sorts first.
    subs = {
        "consumer-b": sub(T1, T2, instance="instance1"),
        "consumer-a": sub(T1, T2, instance="instance2"),
    }
    assert RangeAssignor().assign({T1: 3, T2: 3}, subs) == {
        "consumer-b": [tp(T1, 0), tp(T1, 1), tp(T2, 0), tp(T2, 1)],
        "consumer-a": [tp(T1, 2), tp(T2, 2)],
    }


def test_range_static_member_sorts_before_dynamic_member() -> None:
    subs = {"consumer-b": sub(T1, T2, instance="instance1"), "consumer-a": sub(T1, T2)}
    assert RangeAssignor().assign({T1: 3, T2: 3}, subs) == {
        "consumer-b": [tp(T1, 0), tp(T1, 1), tp(T2, 0), tp(T2, 1)],
        "consumer-a": [tp(T1, 2), tp(T2, 2)],
    }


def test_range_static_member_assignment_persistent() -> None:
    subs = {f"consumer{i}": sub(T1, T2, instance=f"instance{i}") for i in (1, 2, 3)}
    subs["consumer4"] = sub(T1, T2)
    expected = {
        "consumer1": [tp(T1, 0), tp(T1, 1), tp(T2, 0)],
        "consumer2": [tp(T1, 2), tp(T2, 1)],
        "consumer3": [tp(T1, 3), tp(T2, 2)],
        "consumer4": [tp(T1, 4), tp(T2, 3)],
    }
    assert RangeAssignor().assign({T1: 5, T2: 4}, subs) == expected
    # Replacing the dynamic member keeps the static members' partitions.
    del subs["consumer4"], expected["consumer4"]
    subs["consumer5"] = sub(T1, T2)
    expected["consumer5"] = [tp(T1, 4), tp(T2, 3)]
    assert RangeAssignor().assign({T1: 5, T2: 4}, subs) == expected


def test_range_first_members_get_the_extra_partition() -> None:
    subs = {c: sub("t") for c in ("c", "a", "b")}
    assert RangeAssignor().assign({"t": 8}, subs) == {
        "a": [tp("t", 0), tp("t", 1), tp("t", 2)],
        "b": [tp("t", 3), tp("t", 4), tp("t", 5)],
        "c": [tp("t", 6), tp("t", 7)],
    }


# --- roundrobin ---------------------------------------------------------------------------------


def test_roundrobin_two_dynamic_consumers_two_topics_six_partitions() -> None:
    result = RoundRobinAssignor().assign({T1: 3, T2: 3}, {"consumer1": sub(T1, T2), "consumer2": sub(T1, T2)})
    assert result == {
        "consumer1": [tp(T1, 0), tp(T1, 2), tp(T2, 1)],
        "consumer2": [tp(T1, 1), tp(T2, 0), tp(T2, 2)],
    }


def test_roundrobin_static_members_ordered_by_instance_id() -> None:
    subs = {
        "consumer-b": sub(T1, T2, instance="instance1"),
        "consumer-a": sub(T1, T2, instance="instance2"),
    }
    assert RoundRobinAssignor().assign({T1: 3, T2: 3}, subs) == {
        "consumer-b": [tp(T1, 0), tp(T1, 2), tp(T2, 1)],
        "consumer-a": [tp(T1, 1), tp(T2, 0), tp(T2, 2)],
    }


def test_roundrobin_static_member_sorts_before_dynamic_member() -> None:
    subs = {"consumer-b": sub(T1, T2, instance="instance1"), "consumer-a": sub(T1, T2)}
    assert RoundRobinAssignor().assign({T1: 3, T2: 3}, subs) == {
        "consumer-b": [tp(T1, 0), tp(T1, 2), tp(T2, 1)],
        "consumer-a": [tp(T1, 1), tp(T2, 0), tp(T2, 2)],
    }


def test_roundrobin_static_member_assignment_persistent() -> None:
    subs = {f"consumer{i}": sub(T1, T2, instance=f"instance{i}") for i in (1, 2, 3)}
    subs["consumer4"] = sub(T1, T2)
    expected = {
        "consumer1": [tp(T1, 0), tp(T2, 1)],
        "consumer2": [tp(T1, 1), tp(T2, 2)],
        "consumer3": [tp(T1, 2)],
        "consumer4": [tp(T2, 0)],
    }
    assert RoundRobinAssignor().assign({T1: 3, T2: 3}, subs) == expected
    del subs["consumer4"], expected["consumer4"]
    subs["consumer5"] = sub(T1, T2)
    expected["consumer5"] = [tp(T2, 0)]
    assert RoundRobinAssignor().assign({T1: 3, T2: 3}, subs) == expected


def test_roundrobin_static_assignment_follows_instance_not_member_id() -> None:
    def by_instance(members: dict[str, str]) -> dict[str, list[TopicPartition]]:
        subs = {m: sub(T1, T2, instance=i) for m, i in members.items()}
        result = RoundRobinAssignor().assign({T1: 3, T2: 3}, subs)
        return {members[m]: parts for m, parts in result.items()}

    before = by_instance({"consumer1": "instance1", "consumer2": "instance2", "consumer3": "instance3"})
    after = by_instance({"consumer4": "instance1", "consumer5": "instance2", "consumer1": "instance3"})
    assert before == after == {f"instance{i + 1}": [tp(T1, i), tp(T2, i)] for i in range(3)}


def test_roundrobin_skips_members_not_subscribed_to_the_topic() -> None:
    subs = {"a": sub("x", "y"), "b": sub("y"), "c": sub("x")}
    # x-0 a, x-1 (b skipped) c, x-2 a, y-0 b, y-1 (c skipped) a, y-2 b
    assert RoundRobinAssignor().assign({"x": 3, "y": 3}, subs) == {
        "a": [tp("x", 0), tp("x", 2), tp("y", 1)],
        "b": [tp("y", 0), tp("y", 2)],
        "c": [tp("x", 1)],
    }


# --- registry ------------------------------------------------------------------------------------


def test_registry_uses_kafkas_names() -> None:
    assert list(ASSIGNORS) == ["range", "roundrobin", "sticky", "cooperative-sticky"]
    for name, cls in ASSIGNORS.items():
        assignor = get_assignor(name)
        assert isinstance(assignor, cls) and assignor.name == name


def test_get_assignor_unknown_name_lists_known_assignors() -> None:
    known = "known assignors: range, roundrobin, sticky, cooperative-sticky"
    with pytest.raises(ValueError, match=r"unknown assignor 'uniform'; " + known):
        get_assignor("uniform")


def test_rebalance_protocols() -> None:
    assert RebalanceProtocol.EAGER == 0 and RebalanceProtocol.COOPERATIVE == 1
    assert StickyAssignor.supported_protocols == (RebalanceProtocol.EAGER,)
    assert CooperativeStickyAssignor.supported_protocols[0] == RebalanceProtocol.COOPERATIVE
    assert RebalanceProtocol.EAGER in CooperativeStickyAssignor.supported_protocols


# --- user data formats ------------------------------------------------------------------------


def test_sticky_user_data_matches_kafkas_v1_layout() -> None:
    data = encode_sticky_user_data([tp("b", 1), tp("a", 0)], 7)
    expected = b"".join(
        [
            struct.pack(">i", 2),  # previous_assignment: two topics
            struct.pack(">h", 1) + b"a" + struct.pack(">ii", 1, 0),  # topic "a": [0]
            struct.pack(">h", 1) + b"b" + struct.pack(">ii", 1, 1),  # topic "b": [1]
            struct.pack(">i", 7),  # generation
        ]
    )
    assert data == expected
    assert decode_sticky_user_data(data) == ([tp("a", 0), tp("b", 1)], 7)


def test_sticky_user_data_v0_has_no_generation() -> None:
    data = encode_sticky_user_data([tp("t", 2)], None)
    assert decode_sticky_user_data(data) == ([tp("t", 2)], None)
    assert decode_sticky_user_data(StickyAssignor().subscription_user_data([tp("t", 2)], 3)) == (
        [tp("t", 2)],
        3,
    )


def test_sticky_user_data_malformed() -> None:
    with pytest.raises(ValueError):
        decode_sticky_user_data(struct.pack(">i", 1) + struct.pack(">h", 9) + b"ab")


def test_cooperative_user_data_is_the_generation() -> None:
    assert CooperativeStickyAssignor().subscription_user_data([tp("t", 0)], 5) == struct.pack(">i", 5)
    assert RangeAssignor().subscription_user_data([tp("t", 0)], 5) is None


# --- consumer-protocol adapters --------------------------------------------------------------


def test_to_consumer_assignments() -> None:
    assert to_consumer_assignments({"a": [tp("t", 0), tp("t", 1)], "b": []}) == {
        "a": Assignment((tp("t", 0), tp("t", 1))),
        "b": Assignment(()),
    }


def test_assign_metadata_decodes_assigns_and_encodes() -> None:
    metadata = {
        "consumer1": encode_subscription(Subscription((T1,)), version=0),
        "consumer2": encode_subscription(Subscription((T1, T2)), version=3),
        "consumer3": encode_subscription(Subscription((T1,), rack_id="r1"), version=1),
    }
    encoded = assign_metadata("range", {T1: 3, T2: 2}, metadata)
    decoded = {m: decode_assignment(b) for m, b in encoded.items()}
    assert decoded == {
        "consumer1": Assignment((tp(T1, 0),)),
        "consumer2": Assignment((tp(T1, 1), tp(T2, 0), tp(T2, 1))),
        "consumer3": Assignment((tp(T1, 2),)),
    }


def test_assign_metadata_passes_owned_partitions_and_instance_ids() -> None:
    owned = Subscription((T1,), owned_partitions=(tp(T1, 2), tp(T1, 3)), generation_id=4)
    metadata = {"a": encode_subscription(owned), "b": encode_subscription(Subscription((T1,)))}
    encoded = assign_metadata(CooperativeStickyAssignor(), {T1: 4}, metadata)
    assert decode_assignment(encoded["a"]).partitions == (tp(T1, 2), tp(T1, 3))
    assert decode_assignment(encoded["b"]).partitions == (tp(T1, 0), tp(T1, 1))

    metadata = {"consumer-a": encode_subscription(Subscription((T1,))), "consumer-b": metadata["b"]}
    encoded = assign_metadata("range", {T1: 2}, metadata, group_instance_ids={"consumer-b": "i1"})
    assert decode_assignment(encoded["consumer-b"]).partitions == (tp(T1, 0),)


def test_assign_metadata_rejects_malformed_member_metadata() -> None:
    with pytest.raises(ConsumerProtocolError, match="member 'bad'"):
        assign_metadata("range", {T1: 1}, {"bad": b"\x00"})
    with pytest.raises(ValueError, match="known assignors"):
        assign_metadata("nope", {T1: 1}, {})
