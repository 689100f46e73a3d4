"""The coordinator's own assignors for consumer groups (KIP-848): `uniform` and `range`, as Kafka's server assignors.

An assignor maps each member's subscription (and its previous target assignment, for
stickiness) to a new target assignment; it never sees what members currently own, because
reconciliation takes care of moving partitions safely.
"""

from __future__ import annotations

import heapq
from dataclasses import dataclass
from typing import Mapping, Protocol

from .group import Assignment


class PartitionAssignorError(Exception):
    """The assignor cannot compute an assignment (answered as UNKNOWN_SERVER_ERROR, as Kafka does)."""


@dataclass(frozen=True)
class MemberSpec:
    """What an assignor knows of a member: its subscribed topics, instance id and previous target."""

    subscribed_topics: frozenset[str]
    instance_id: str | None
    target: Assignment


class ServerAssignor(Protocol):
    """A server-side assignor: a name and `assign(members, topics)` -> member id -> topic -> partitions."""

    name: str

    def assign(
        self, members: Mapping[str, MemberSpec], topics: Mapping[str, int]
    ) -> dict[str, dict[str, frozenset[int]]]:
        """The new target assignment of every member."""
        ...


def _is_homogeneous(members: Mapping[str, MemberSpec]) -> bool:
    subscriptions = {m.subscribed_topics for m in members.values()}
    return len(subscriptions) <= 1


class UniformAssignor:
    """Spreads partitions evenly over members (counts differ by at most one), moving as few as it can."""

    name = "uniform"

    def assign(
        self, members: Mapping[str, MemberSpec], topics: Mapping[str, int]
    ) -> dict[str, dict[str, frozenset[int]]]:
        """Kafka's UniformAssignor: the homogeneous builder when all subscribe alike, else the general one."""
        if not members:
            return {}
        if _is_homogeneous(members):
            return _uniform_homogeneous(members, topics)
        return _uniform_general(members, topics)


def _uniform_homogeneous(
    members: Mapping[str, MemberSpec], topics: Mapping[str, int]
) -> dict[str, dict[str, frozenset[int]]]:
    """Every member keeps up to its quota of its previous partitions; the rest go to members under quota."""
    subscribed = sorted(t for t in next(iter(members.values())).subscribed_topics if t in topics)
    total = sum(topics[t] for t in subscribed)
    quota, extra = divmod(total, len(members))
    taken: set[tuple[str, int]] = set()
    result: dict[str, dict[str, set[int]]] = {}
    unfilled: list[tuple[str, int]] = []
    # Members that held more before get the extra partitions first: fewer partitions move.
    order = sorted(members, key=lambda m: (-sum(len(ps) for ps in members[m].target.values()), m))
    for member_id in order:
        remaining = quota + (1 if extra > 0 else 0)
        extra -= 1 if extra > 0 else 0
        kept: dict[str, set[int]] = {}
        for topic in sorted(members[member_id].target):
            if topic not in topics or topic not in members[member_id].subscribed_topics:
                continue
            for p in sorted(members[member_id].target[topic]):
                if remaining == 0:
                    break
                if p < topics[topic] and (topic, p) not in taken:
                    taken.add((topic, p))
                    kept.setdefault(topic, set()).add(p)
                    remaining -= 1
        result[member_id] = kept
        if remaining > 0:
            unfilled.append((member_id, remaining))
    free = ((t, p) for t in subscribed for p in range(topics[t]) if (t, p) not in taken)
    for member_id, remaining in unfilled:
        target = result[member_id]
        for _ in range(remaining):
            tp = next(free, None)
            if tp is None:
                break
            target.setdefault(tp[0], set()).add(tp[1])
    if next(free, None) is not None:
        raise PartitionAssignorError("partitions were left unassigned")
    return {m: {t: frozenset(ps) for t, ps in a.items()} for m, a in result.items()}


def _uniform_general(
    members: Mapping[str, MemberSpec], topics: Mapping[str, int]
) -> dict[str, dict[str, frozenset[int]]]:
    """Members with different subscriptions: keep what is still valid, give the rest to the least loaded
    subscriber, then move partitions from the most to the least loaded subscriber until no move helps."""
    result: dict[str, dict[str, set[int]]] = {m: {} for m in members}
    load = dict.fromkeys(members, 0)
    owner: dict[tuple[str, int], str] = {}
    subscribers: dict[str, list[str]] = {}
    for member_id in sorted(members):
        for topic in members[member_id].subscribed_topics:
            if topic in topics:
                subscribers.setdefault(topic, []).append(member_id)
    for member_id in sorted(members):
        spec = members[member_id]
        for topic, partitions in spec.target.items():
            if topic not in topics or topic not in spec.subscribed_topics:
                continue
            for p in partitions:
                if p < topics[topic] and (topic, p) not in owner:
                    owner[(topic, p)] = member_id
                    result[member_id].setdefault(topic, set()).add(p)
                    load[member_id] += 1
    # Topics with fewer subscribers first: they have the fewest places to go.
    for topic in sorted(subscribers, key=lambda t: (len(subscribers[t]), t)):
        heap = [(load[m], m) for m in subscribers[topic]]
        heapq.heapify(heap)
        for p in range(topics[topic]):
            if (topic, p) in owner:
                continue
            while heap[0][0] != load[heap[0][1]]:
                heapq.heapreplace(heap, (load[heap[0][1]], heap[0][1]))
            _, member_id = heap[0]
            owner[(topic, p)] = member_id
            result[member_id].setdefault(topic, set()).add(p)
            load[member_id] += 1
            heapq.heapreplace(heap, (load[member_id], member_id))
    moved = True
    while moved:
        moved = False
        for topic, subs in subscribers.items():
            while True:
                donor = max((m for m in subs if result[m].get(topic)), key=lambda m: (load[m], m), default=None)
                taker = min(subs, key=lambda m: (load[m], m))
                if donor is None or load[donor] <= load[taker] + 1:
                    break
                p = max(result[donor][topic])
                result[donor][topic].discard(p)
                result[taker].setdefault(topic, set()).add(p)
                load[donor] -= 1
                load[taker] += 1
                moved = True
    return {m: {t: frozenset(ps) for t, ps in a.items() if ps} for m, a in result.items()}


class RangeAssignor:
    """Kafka's server RangeAssignor: each topic's partitions in consecutive ranges, members in a fixed order
    (static members by instance id first, then by member id), so co-partitioned topics line up."""

    name = "range"

    def assign(
        self, members: Mapping[str, MemberSpec], topics: Mapping[str, int]
    ) -> dict[str, dict[str, frozenset[int]]]:
        """Ranges per topic over the members that subscribe to it."""
        order = sorted(members, key=lambda m: (members[m].instance_id is None, members[m].instance_id or m, m))
        result: dict[str, dict[str, frozenset[int]]] = {m: {} for m in members}
        for topic in sorted({t for m in members.values() for t in m.subscribed_topics if t in topics}):
            subs = [m for m in order if topic in members[m].subscribed_topics]
            quota, extra = divmod(topics[topic], len(subs))
            start = 0
            for i, member_id in enumerate(subs):
                end = start + quota + (1 if i < extra else 0)
                if end > start:
                    result[member_id][topic] = frozenset(range(start, end))
                start = end
        return result


SERVER_ASSIGNORS: dict[str, ServerAssignor] = {a.name: a for a in (UniformAssignor(), RangeAssignor())}


def server_assignor(name: str) -> ServerAssignor:
    """The server assignor called `name`; KeyError if there is none."""
    return SERVER_ASSIGNORS[name]
