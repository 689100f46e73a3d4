"""The server assignors: uniform (balanced and sticky, homogeneous or not) and range (Kafka's ranges)."""

from __future__ import annotations

import random

import pytest

from groupcoord.protocol.consumer.assignors import MemberSpec, RangeAssignor, UniformAssignor, server_assignor


def spec(*topics: str, target=None, instance_id=None) -> MemberSpec:
    return MemberSpec(frozenset(topics), instance_id, target or {})


def counts(result) -> list[int]:
    return sorted(sum(len(ps) for ps in a.values()) for a in result.values())


def all_partitions(result) -> list[tuple[str, int]]:
    return sorted((t, p) for a in result.values() for t, ps in a.items() for p in ps)


def test_uniform_balances_a_homogeneous_group_and_keeps_previous_partitions():
    topics = {"t": 10, "u": 5}
    first = UniformAssignor().assign({m: spec("t", "u") for m in "abc"}, topics)
    assert counts(first) == [5, 5, 5]
    assert all_partitions(first) == sorted([("t", p) for p in range(10)] + [("u", p) for p in range(5)])
    grown = {m: spec("t", "u", target=first[m]) for m in "abc"} | {"d": spec("t", "u")}
    second = UniformAssignor().assign(grown, topics)
    assert counts(second) == [3, 4, 4, 4]
    moved = sum(len(ps - second[m].get(t, frozenset())) for m in "abc" for t, ps in first[m].items())
    assert moved == 3  # exactly what d needs, nothing shuffled between the others
    assert all_partitions(second) == all_partitions(first)


def test_uniform_respects_different_subscriptions_and_balances_what_it_can():
    topics = {"t": 6, "u": 6}
    members = {"a": spec("t"), "b": spec("t", "u"), "c": spec("u")}
    result = UniformAssignor().assign(members, topics)
    assert set(result["a"]) <= {"t"} and set(result["c"]) <= {"u"}
    assert counts(result) == [4, 4, 4]
    again = UniformAssignor().assign(
        {m: spec(*s.subscribed_topics, target=result[m]) for m, s in members.items()}, topics
    )
    assert again == result  # nothing changed: nothing moves


@pytest.mark.parametrize("seed", range(5))
def test_uniform_general_assigns_every_subscribed_partition_once(seed):
    rng = random.Random(seed)
    topics = {f"t{i}": rng.randint(1, 8) for i in range(5)}
    members = {f"m{i}": spec(*rng.sample(sorted(topics), rng.randint(1, 3))) for i in range(7)}
    result = UniformAssignor().assign(members, topics)
    wanted = sorted(
        (t, p) for t in set().union(*(s.subscribed_topics for s in members.values())) for p in range(topics[t])
    )
    assert all_partitions(result) == wanted
    for m, a in result.items():
        assert set(a) <= members[m].subscribed_topics


def test_range_gives_consecutive_ranges_and_lines_up_co_partitioned_topics():
    topics = {"t": 5, "u": 5}
    result = RangeAssignor().assign({m: spec("t", "u") for m in "bac"}, topics)
    assert result["a"] == {"t": frozenset({0, 1}), "u": frozenset({0, 1})}
    assert result["b"] == {"t": frozenset({2, 3}), "u": frozenset({2, 3})}
    assert result["c"] == {"t": frozenset({4}), "u": frozenset({4})}


def test_range_orders_static_members_by_instance_id_first():
    result = RangeAssignor().assign({"a": spec("t"), "z": spec("t", instance_id="i-0")}, {"t": 2})
    assert result == {"z": {"t": frozenset({0})}, "a": {"t": frozenset({1})}}


def test_assignors_by_name_and_unknown_topics_are_left_out():
    assert server_assignor("uniform").name == "uniform" and server_assignor("range").name == "range"
    assert UniformAssignor().assign({"a": spec("missing")}, {"t": 1}) == {"a": {}}
    assert UniformAssignor().assign({}, {"t": 1}) == {}
