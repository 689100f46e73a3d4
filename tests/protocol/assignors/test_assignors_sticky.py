"""Sticky and cooperative-sticky assignors: validity, balance and stickiness over randomized membership
changes (fixed seeds), Kafka's generation-conflict cases, and KIP-429's two-step partition moves."""

from __future__ import annotations

import itertools
import os
import random
import subprocess
import sys
from collections import deque
from collections.abc import Mapping, Sequence

import pytest

from groupcoord.protocol import TopicPartition
from groupcoord.protocol.assignors import (
    CooperativeStickyAssignor,
    MemberSubscription,
    StickyAssignor,
    encode_sticky_user_data,
)

Result = dict[str, list[TopicPartition]]
Subs = dict[str, MemberSubscription]


def tp(topic: str, partition: int) -> TopicPartition:
    return TopicPartition(topic, partition)


def owning(topics: Sequence[str], owned: Sequence[TopicPartition], generation: int) -> MemberSubscription:
    """A member that held `owned` in `generation`: as owned partitions (cooperative) and as sticky user data (eager)."""
    user_data = encode_sticky_user_data(owned, generation)
    return MemberSubscription(list(topics), list(owned), generation, user_data=user_data)


def subscribed_partitions(counts: Mapping[str, int], subs: Subs) -> set[TopicPartition]:
    topics = {t for s in subs.values() for t in s.topics if t in counts}
    return {tp(t, p) for t in topics for p in range(counts[t])}


def assert_valid(result: Result, counts: Mapping[str, int], subs: Subs) -> None:
    """Every subscribed partition goes to exactly one member, and only to a member subscribed to it."""
    assert set(result) == set(subs)
    given = [p for parts in result.values() for p in parts]
    assert len(given) == len(set(given)), "a partition was assigned twice"
    assert set(given) == subscribed_partitions(counts, subs)
    for member, parts in result.items():
        assert all(p.topic in subs[member].topics for p in parts), member


def assert_fully_balanced(result: Result) -> None:
    sizes = [len(parts) for parts in result.values()]
    assert not sizes or max(sizes) - min(sizes) <= 1, sizes


def assert_no_cost_reducing_path(result: Result, subs: Subs) -> None:
    """No chain of hand-overs (each to a member subscribed to the topic) could take a partition from
    a member with L partitions to one with L-2 or fewer: as balanced as the subscriptions allow."""
    load = {m: len(parts) for m, parts in result.items()}
    for source in result:
        seen, queue = {source}, deque([source])
        while queue:
            x = queue.popleft()
            assert load[x] > load[source] - 2, f"{source} ({load[source]}) could hand over to {x} ({load[x]})"
            for p in result[x]:
                for y in result:
                    if y not in seen and p.topic in subs[y].topics:
                        seen.add(y)
                        queue.append(y)


def holders(result: Mapping[str, Sequence[TopicPartition]]) -> dict[TopicPartition, str]:
    return {p: m for m, parts in result.items() for p in parts}


def moved(before: Mapping[TopicPartition, str], after: Result) -> int:
    """Partitions whose previous holder is still in the group but which now sit elsewhere."""
    now = holders(after)
    return sum(1 for p, m in before.items() if m in after and p in now and now[p] != m)


def fewest_moves_identical(before: Mapping[TopicPartition, str], members: Sequence[str], total: int) -> int:
    """With identical subscriptions: each member can keep min_quota, and `extra` of them one more."""
    quota, extra = divmod(total, len(members))
    owned = [sum(1 for m in before.values() if m == member) for member in members]
    keep = sum(min(n, quota) for n in owned) + min(extra, sum(1 for n in owned if n > quota))
    return sum(owned) - keep


def random_topics(rng: random.Random, max_topics: int, max_partitions: int) -> dict[str, int]:
    return {f"t{i}": rng.randint(1, max_partitions) for i in range(rng.randint(1, max_topics))}


def random_subscription(rng: random.Random, topics: Sequence[str]) -> list[str]:
    return [t for t in topics if rng.random() < 0.5] or [rng.choice(topics)]


# --- identical subscriptions --------------------------------------------------------------------


def test_identical_subscriptions_churn_is_balanced_and_moves_only_what_must_move() -> None:
    rng = random.Random(20240611)
    assignor = StickyAssignor()
    for _ in range(60):
        counts = random_topics(rng, 4, 12)
        topics = sorted(counts)
        members = [f"m{i}" for i in range(rng.randint(1, 7))]
        result = assignor.assign(counts, {m: MemberSubscription(topics) for m in members})
        next_id = len(members)
        for generation in range(1, 6):
            leaving = rng.sample(members, rng.randint(0, len(members) - 1))
            joining = [f"m{next_id + i}" for i in range(rng.randint(0, 3))]
            next_id += len(joining)
            if rng.random() < 0.2:  # partitions added to a topic
                counts[rng.choice(topics)] += rng.randint(1, 4)
            members = [m for m in members if m not in leaving] + joining
            subs = {m: owning(topics, result.get(m, []), generation) for m in members}
            before = {p: m for p, m in holders(result).items() if m in members}

            result = assignor.assign(counts, subs)

            assert_valid(result, counts, subs)
            assert_fully_balanced(result)
            assert moved(before, result) == fewest_moves_identical(before, members, sum(counts.values()))


def test_identical_subscriptions_fresh_assignment_spreads_topics() -> None:
    subs = {m: MemberSubscription(["a", "b"]) for m in ("c1", "c2", "c3")}
    result = StickyAssignor().assign({"a": 3, "b": 4}, subs)
    assert_valid(result, {"a": 3, "b": 4}, subs)
    assert [len(parts) for parts in result.values()] == [3, 2, 2]
    assert all(any(p.topic == "a" for p in parts) for parts in result.values())


def test_add_and_remove_consumer_one_topic() -> None:
    """Kafka's testAddRemoveConsumerOneTopic: the first member keeps what it can, then gets everything."""
    assignor = StickyAssignor()
    first = assignor.assign({"t": 3}, {"c1": MemberSubscription(["t"])})
    assert first == {"c1": [tp("t", 0), tp("t", 1), tp("t", 2)]}

    second = assignor.assign({"t": 3}, {"c1": owning(["t"], first["c1"], 1), "c2": MemberSubscription(["t"])})
    assert set(second["c1"]) < set(first["c1"]) and len(second["c1"]) == 2
    assert second["c2"] == [p for p in first["c1"] if p not in second["c1"]]

    third = assignor.assign({"t": 3}, {"c2": owning(["t"], second["c2"], 2)})
    assert third == {"c2": [tp("t", 0), tp("t", 1), tp("t", 2)]}


def test_already_balanced_assignment_is_kept() -> None:
    previous = {"a": [tp("t", 4), tp("t", 5)], "b": [tp("t", 0), tp("t", 3)], "c": [tp("t", 1), tp("t", 2)]}
    subs = {m: owning(["t"], parts, 7) for m, parts in previous.items()}
    assert StickyAssignor().assign({"t": 6}, subs) == previous


# --- differing subscriptions ---------------------------------------------------------------------


def brute_force(
    counts: Mapping[str, int], subs: Subs, before: Mapping[TopicPartition, str]
) -> tuple[int, int]:
    """(sum of squared loads, moves) of the best assignment: most balanced first, then fewest moves."""
    parts = sorted(subscribed_partitions(counts, subs))
    choices = [[m for m in subs if p.topic in subs[m].topics] for p in parts]
    best = None
    for choice in itertools.product(*choices):
        load = dict.fromkeys(subs, 0)
        for m in choice:
            load[m] += 1
        moves = sum(1 for p, m in zip(parts, choice, strict=True) if p in before and before[p] != m)
        key = (sum(n * n for n in load.values()), moves)
        best = key if best is None or key < best else best
    assert best is not None
    return best


def test_differing_subscriptions_match_brute_force_balance_and_stickiness() -> None:
    rng = random.Random(7)
    checked = 0
    while checked < 300:
        counts = random_topics(rng, 3, 5)
        topics = sorted(counts)
        members = [f"m{i}" for i in range(rng.randint(2, 4))]
        topics_of = {m: random_subscription(rng, topics) for m in members}
        subs = {m: MemberSubscription(topics_of[m]) for m in members}
        parts = sorted(subscribed_partitions(counts, subs))
        if not 5 <= len(parts) <= 9 or len(members) ** len(parts) > 50_000:
            continue
        before = {}
        for p in parts:
            owners = [m for m in members if p.topic in topics_of[m]]
            if rng.random() < 0.8:
                before[p] = rng.choice(owners)
        subs = {m: owning(topics_of[m], [p for p, o in before.items() if o == m], 3) for m in members}

        result = StickyAssignor().assign(counts, subs)

        assert_valid(result, counts, subs)
        balance, fewest = brute_force(counts, subs, before)
        assert sum(len(v) ** 2 for v in result.values()) == balance, (counts, topics_of, before, result)
        assert moved(before, result) == fewest, (counts, topics_of, before, result)
        checked += 1


def test_differing_subscriptions_churn_stays_valid_and_balanced() -> None:
    rng = random.Random(99)
    assignor = StickyAssignor()
    for _ in range(40):
        counts = random_topics(rng, 6, 10)
        topics = sorted(counts)
        topics_of = {f"m{i}": random_subscription(rng, topics) for i in range(rng.randint(2, 8))}
        result = assignor.assign(counts, {m: MemberSubscription(t) for m, t in topics_of.items()})
        for generation in range(1, 5):
            for m in rng.sample(sorted(topics_of), rng.randint(0, len(topics_of) - 1)):
                del topics_of[m]
            for _ in range(rng.randint(0, 2)):
                topics_of[f"n{generation}-{rng.randrange(1000)}"] = random_subscription(rng, topics)
            if rng.random() < 0.3:  # a member changes its subscription
                changed = rng.choice(sorted(topics_of))
                topics_of[changed] = random_subscription(rng, topics)
            subs = {m: owning(t, result.get(m, []), generation) for m, t in topics_of.items()}

            result = assignor.assign(counts, subs)

            assert_valid(result, counts, subs)
            assert_no_cost_reducing_path(result, subs)
            again = {m: owning(t, result[m], generation + 1) for m, t in topics_of.items()}
            assert assignor.assign(counts, again) == result, "a balanced assignment must not move"


def test_partitions_only_one_member_can_take_stay_there() -> None:
    subs = {
        "a": owning(["x", "y"], [tp("x", 0), tp("x", 1), tp("y", 0), tp("y", 1)], 2),
        "b": MemberSubscription(["x"]),
    }
    result = StickyAssignor().assign({"x": 2, "y": 2}, subs)
    # Only a can take y, so balancing moves x (all of it: 2/2 beats 3/1) and leaves y alone.
    assert result == {"a": [tp("y", 0), tp("y", 1)], "b": [tp("x", 0), tp("x", 1)]}


def test_dropped_subscription_and_shrunk_topic_claims_are_ignored() -> None:
    subs = {
        "a": owning(["x"], [tp("x", 0), tp("gone", 0), tp("y", 0)], 4),  # no longer subscribed to y
        "b": owning(["x", "y"], [tp("x", 5)], 4),  # x now has 2 partitions
    }
    result = StickyAssignor().assign({"x": 2, "y": 1}, subs)
    assert_valid(result, {"x": 2, "y": 1}, subs)
    assert tp("x", 0) in result["a"]


# --- generations and user data --------------------------------------------------------------------


def test_conflicting_previous_generations() -> None:
    """Kafka's testAssignmentWithConflictingPreviousGenerations: the higher generation's claims win."""
    c1, c2, c3 = (
        [tp("t", 0), tp("t", 1), tp("t", 4)],
        [tp("t", 0), tp("t", 1), tp("t", 2)],
        [tp("t", 3), tp("t", 4), tp("t", 5)],
    )
    subs = {
        "consumer1": owning(["t"], c1, 1),
        "consumer2": owning(["t"], c2, 2),
        "consumer3": owning(["t"], c3, 2),
    }
    result = StickyAssignor().assign({"t": 6}, subs)
    assert_valid(result, {"t": 6}, subs)
    assert [len(v) for v in result.values()] == [2, 2, 2]
    assert set(result["consumer2"]) <= set(c2) and set(result["consumer3"]) <= set(c3)
    assert not set(result["consumer1"]) & {tp("t", 0), tp("t", 1), tp("t", 4)}


def test_conflicting_previous_generations_with_differing_subscriptions() -> None:
    subs = {
        "consumer1": owning(["t", "u"], [tp("t", 0), tp("t", 1)], 1),
        "consumer2": owning(["t"], [tp("t", 1), tp("t", 2)], 2),
        "consumer3": owning(["u"], [tp("u", 0)], 2),
    }
    result = StickyAssignor().assign({"t": 3, "u": 2}, subs)
    assert_valid(result, {"t": 3, "u": 2}, subs)
    assert set(result["consumer2"]) == {tp("t", 1), tp("t", 2)}
    assert tp("t", 0) in result["consumer1"] and tp("u", 0) in result["consumer3"]


def test_same_generation_claims_are_void() -> None:
    subs = {
        "a": owning(["t"], [tp("t", 0), tp("t", 1)], 3),
        "b": owning(["t"], [tp("t", 1), tp("t", 2)], 3),
        "c": MemberSubscription(["t"]),
    }
    assert StickyAssignor().assign({"t": 3}, subs) == {
        "a": [tp("t", 0)],
        "b": [tp("t", 2)],
        "c": [tp("t", 1)],
    }


def test_eager_sticky_reads_previous_assignment_from_user_data() -> None:
    """Kafka's testSchemaBackwardCompatibility: V1 (with generation) and V0 user data side by side."""
    subs = {
        "consumer1": MemberSubscription(
            ["t"], user_data=encode_sticky_user_data([tp("t", 0), tp("t", 2)], 1)
        ),
        "consumer2": MemberSubscription(["t"], user_data=encode_sticky_user_data([tp("t", 1)], None)),
        "consumer3": MemberSubscription(["t"]),
    }
    result = StickyAssignor().assign({"t": 3}, subs)
    assert_valid(result, {"t": 3}, subs)
    assert_fully_balanced(result)
    assert set(result["consumer1"]) < {tp("t", 0), tp("t", 2)} and result["consumer2"] == [tp("t", 1)]


def test_user_data_generation_resolves_conflicts() -> None:
    subs = {
        "old": MemberSubscription(["t"], user_data=encode_sticky_user_data([tp("t", 0), tp("t", 1)], 4)),
        "new": MemberSubscription(["t"], user_data=encode_sticky_user_data([tp("t", 0)], 5)),
    }
    assert StickyAssignor().assign({"t": 2}, subs) == {"new": [tp("t", 0)], "old": [tp("t", 1)]}


def test_unparsable_user_data_is_ignored() -> None:
    subs = {"a": MemberSubscription(["t"], user_data=b"\x00\x00\x00\x05junk"), "b": MemberSubscription(["t"])}
    result = StickyAssignor().assign({"t": 2}, subs)
    assert_valid(result, {"t": 2}, subs)


def test_result_does_not_depend_on_hash_seed() -> None:
    script = (
        "import random\n"
        "from groupcoord.protocol.assignors import StickyAssignor, MemberSubscription\n"
        "from groupcoord.protocol import TopicPartition as TP\n"
        "rng = random.Random(5)\n"
        "counts = {f't{i}': rng.randint(1, 9) for i in range(6)}\n"
        "subs = {f'm{i}': MemberSubscription(rng.sample(sorted(counts), 3),\n"
        "        [TP(t, p) for t in counts for p in range(counts[t]) if rng.random() < 0.2], 1)\n"
        "        for i in range(7)}\n"
        "print(StickyAssignor().assign(counts, subs))\n"
    )
    outputs = {
        subprocess.run(
            [sys.executable, "-c", script],
            env={**os.environ, "PYTHONHASHSEED": seed},
            capture_output=True,
            text=True,
            check=True,
            timeout=60,
        ).stdout
        for seed in ("0", "1", "2")
    }
    assert len(outputs) == 1


# --- cooperative-sticky --------------------------------------------------------------------------


def test_cooperative_moves_take_two_rebalances() -> None:
    assignor = CooperativeStickyAssignor()
    owned = [tp("t", p) for p in range(6)]
    first = assignor.assign({"t": 6}, {"c1": owning(["t"], owned, 1), "c2": MemberSubscription(["t"])})
    assert first == {"c1": [tp("t", 0), tp("t", 1), tp("t", 2)], "c2": []}  # 3-5 revoked, not yet given

    second = assignor.assign(
        {"t": 6}, {"c1": owning(["t"], first["c1"], 2), "c2": owning(["t"], first["c2"], 2)}
    )
    assert second == {"c1": [tp("t", 0), tp("t", 1), tp("t", 2)], "c2": [tp("t", 3), tp("t", 4), tp("t", 5)]}


@pytest.mark.parametrize("identical", [True, False], ids=["identical", "differing"])
def test_cooperative_revokes_only_what_must_move_and_completes_next_round(identical: bool) -> None:
    rng = random.Random(1234 + identical)
    cooperative, eager = CooperativeStickyAssignor(), StickyAssignor()
    for _ in range(80):
        counts = random_topics(rng, 4, 8)
        topics = sorted(counts)
        topics_of = {
            f"m{i}": topics if identical else random_subscription(rng, topics)
            for i in range(rng.randint(1, 6))
        }
        result = cooperative.assign(counts, {m: MemberSubscription(t) for m, t in topics_of.items()})
        for m in rng.sample(sorted(topics_of), rng.randint(0, len(topics_of) - 1)):
            del topics_of[m], result[m]
        for i in range(rng.randint(0, 3)):
            topics_of[f"n{i}"] = topics if identical else random_subscription(rng, topics)
            result[f"n{i}"] = []
        subs = {m: owning(t, result[m], 2) for m, t in topics_of.items()}
        before = holders(result)

        target = eager.assign(counts, subs)
        first = cooperative.assign(counts, subs)

        must_move = {p for m, parts in target.items() for p in parts if before.get(p, m) != m}
        for m, parts in target.items():
            assert set(first[m]) == set(parts) - must_move, "only partitions changing owner are held back"
            assert set(result[m]) - set(first[m]) == set(result[m]) - set(parts), "revoked only what moves"
        assert subscribed_partitions(counts, subs) - set(holders(first)) == must_move

        subs = {m: owning(t, first[m], 3) for m, t in topics_of.items()}
        second = cooperative.assign(counts, subs)

        assert_valid(second, counts, subs)
        assert all(set(first[m]) <= set(second[m]) for m in topics_of), "nothing is revoked twice"
        if identical:
            assert_fully_balanced(second)
        else:
            assert_no_cost_reducing_path(second, subs)


def test_cooperative_same_generation_conflict_is_withheld_from_everyone() -> None:
    subs = {
        "a": owning(["t"], [tp("t", 0), tp("t", 1)], 3),
        "b": owning(["t"], [tp("t", 1), tp("t", 2)], 3),
        "c": owning(["t"], [tp("t", 3)], 3),
    }
    first = CooperativeStickyAssignor().assign({"t": 4}, subs)
    assert tp("t", 1) not in holders(first)
    assert first["a"] == [tp("t", 0)] and first["b"] == [tp("t", 2)] and first["c"] == [tp("t", 3)]


def test_cooperative_higher_generation_keeps_partition_a_stale_member_claims() -> None:
    subs = {
        "fresh": owning(["t"], [tp("t", 0), tp("t", 1)], 5),
        "stale": owning(["t"], [tp("t", 1), tp("t", 2), tp("t", 3)], 4),
    }
    assert CooperativeStickyAssignor().assign({"t": 4}, subs) == {
        "fresh": [tp("t", 0), tp("t", 1)],
        "stale": [tp("t", 2), tp("t", 3)],
    }


def test_cooperative_generation_from_user_data() -> None:
    """Before subscription v2, the cooperative assignor's user data carries the generation."""
    assignor = CooperativeStickyAssignor()
    subs = {
        "a": MemberSubscription(
            ["t"], [tp("t", 0)], user_data=assignor.subscription_user_data([tp("t", 0)], 9)
        ),
        "b": MemberSubscription(
            ["t"], [tp("t", 0), tp("t", 1)], user_data=assignor.subscription_user_data([], 8)
        ),
    }
    assert assignor.assign({"t": 2}, subs) == {"a": [tp("t", 0)], "b": [tp("t", 1)]}
