"""Kafka's client-side partition assignors: range, roundrobin, sticky and cooperative-sticky.

A consumer group's leader runs one of these over every member's subscription and the partition
counts of the subscribed topics, and sends the result in SyncGroup. Names, member ordering and
results follow Kafka's RangeAssignor, RoundRobinAssignor, StickyAssignor and
CooperativeStickyAssignor; the sticky pair reaches the same kind of result with simpler code.
"""

from __future__ import annotations

import enum
import logging
import struct
from collections import defaultdict, deque
from typing import ClassVar, Iterable, Mapping, NamedTuple, Sequence

from .consumer_protocol import (
    ASSIGNMENT_HIGHEST_VERSION,
    ConsumerProtocolError,
    decode_subscription,
    encode_assignment,
)
from .consumer_protocol import Assignment as ConsumerAssignment
from .consumer_protocol import Subscription as ConsumerSubscription
from .values import TopicPartition

__all__ = [
    "ASSIGNORS",
    "DEFAULT_GENERATION",
    "Assignor",
    "CooperativeStickyAssignor",
    "MemberSubscription",
    "RangeAssignor",
    "RebalanceProtocol",
    "RoundRobinAssignor",
    "StickyAssignor",
    "assign_metadata",
    "decode_sticky_user_data",
    "encode_sticky_user_data",
    "get_assignor",
    "to_consumer_assignments",
]

log = logging.getLogger(__name__)

DEFAULT_GENERATION = -1
_INT16 = struct.Struct(">h")
_INT32 = struct.Struct(">i")


class RebalanceProtocol(enum.IntEnum):
    """Kafka's ConsumerPartitionAssignor.RebalanceProtocol, with Kafka's ids."""

    EAGER = 0
    COOPERATIVE = 1


class MemberSubscription(NamedTuple):
    """One member's input to an assignor: its topics, the partitions it owns and its generation.

    A plain tuple ``(topics, owned_partitions, generation_id, rack_id)`` is accepted wherever this is.
    """

    topics: Sequence[str]
    owned_partitions: Sequence[TopicPartition] = ()
    generation_id: int = DEFAULT_GENERATION
    rack_id: str | None = None
    user_data: bytes | None = None
    group_instance_id: str | None = None


SubscriptionLike = MemberSubscription | ConsumerSubscription | tuple
GroupAssignment = dict[str, list[TopicPartition]]


def _coerce(sub: SubscriptionLike) -> MemberSubscription:
    if isinstance(sub, MemberSubscription):
        return sub
    if isinstance(sub, ConsumerSubscription):
        return MemberSubscription(
            sub.topics, sub.owned_partitions, sub.generation_id, sub.rack_id, sub.user_data
        )
    return MemberSubscription(*sub)


def _member_key(member_id: str, sub: MemberSubscription) -> tuple[bool, str, str]:
    """Kafka's MemberInfo order: static members (by group instance id) first, then by member id."""
    return (sub.group_instance_id is None, sub.group_instance_id or "", member_id)


class Assignor:
    """A client-side partition assignor: a Kafka name, the rebalance protocols it supports and ``assign``."""

    name: ClassVar[str] = ""
    supported_protocols: ClassVar[tuple[RebalanceProtocol, ...]] = (RebalanceProtocol.EAGER,)

    def assign(
        self, partitions_per_topic: Mapping[str, int], subscriptions: Mapping[str, SubscriptionLike]
    ) -> GroupAssignment:
        """Each member's partitions (sorted); topics missing from ``partitions_per_topic`` are skipped."""
        subs = {m: _coerce(s) for m, s in subscriptions.items()}
        counts = {t: n for t, n in partitions_per_topic.items() if n > 0}
        result = self._assign(counts, subs)
        return {m: sorted(result.get(m, ())) for m in subs}

    def subscription_user_data(self, assigned: Iterable[TopicPartition], generation_id: int) -> bytes | None:
        """The user data a member puts in its next subscription (none for most assignors)."""
        return None

    def _assign(self, counts: Mapping[str, int], subs: Mapping[str, MemberSubscription]) -> GroupAssignment:
        raise NotImplementedError

    def __repr__(self) -> str:
        return f"{type(self).__name__}()"


class RangeAssignor(Assignor):
    """Per topic, split the partitions into contiguous ranges over the sorted subscribed members."""

    name = "range"

    def _assign(self, counts: Mapping[str, int], subs: Mapping[str, MemberSubscription]) -> GroupAssignment:
        out: GroupAssignment = {m: [] for m in subs}
        for topic, members in _subscribers(counts, subs).items():
            per_member, extra = divmod(counts[topic], len(members))
            for i, m in enumerate(members):
                start = per_member * i + min(i, extra)
                end = start + per_member + (1 if i < extra else 0)
                out[m].extend(TopicPartition(topic, p) for p in range(start, end))
        return out


class RoundRobinAssignor(Assignor):
    """Deal all subscribed partitions (sorted) to the sorted members in turn, skipping unsubscribed ones."""

    name = "roundrobin"

    def _assign(self, counts: Mapping[str, int], subs: Mapping[str, MemberSubscription]) -> GroupAssignment:
        out: GroupAssignment = {m: [] for m in subs}
        members = sorted(subs, key=lambda m: _member_key(m, subs[m]))
        topics_of = {m: set(subs[m].topics) for m in members}
        turn = 0
        for topic in sorted(_subscribers(counts, subs)):
            for p in range(counts[topic]):
                while topic not in topics_of[members[turn % len(members)]]:
                    turn += 1
                out[members[turn % len(members)]].append(TopicPartition(topic, p))
                turn += 1
        return out


def _subscribers(counts: Mapping[str, int], subs: Mapping[str, MemberSubscription]) -> dict[str, list[str]]:
    """Topic -> its subscribed members in Kafka's member order, for topics that have partitions."""
    by_topic: dict[str, list[str]] = defaultdict(list)
    for m in sorted(subs, key=lambda m: _member_key(m, subs[m])):
        for topic in dict.fromkeys(subs[m].topics):
            if topic in counts:
                by_topic[topic].append(m)
    return dict(by_topic)


# --- sticky user data (Kafka's StickyAssignor and CooperativeStickyAssignor formats) ------------


def encode_sticky_user_data(partitions: Iterable[TopicPartition], generation: int | None) -> bytes:
    """Kafka's StickyAssignor user data: V1 (partitions and generation), or V0 if generation is None."""
    by_topic: dict[str, list[int]] = defaultdict(list)
    for tp in sorted(partitions):
        by_topic[tp.topic].append(tp.partition)
    out = [_INT32.pack(len(by_topic))]
    for topic, parts in by_topic.items():
        raw = topic.encode("utf-8")
        out += [_INT16.pack(len(raw)), raw, _INT32.pack(len(parts)), *(_INT32.pack(p) for p in parts)]
    if generation is not None:
        out.append(_INT32.pack(generation))
    return b"".join(out)


def decode_sticky_user_data(data: bytes) -> tuple[list[TopicPartition], int | None]:
    """Parse StickyAssignor user data (V0 or V1); raises ValueError if it is malformed."""
    pos = 0

    def take(n: int) -> bytes:
        nonlocal pos
        if n < 0 or pos + n > len(data):
            raise ValueError(f"sticky user data too short at byte {pos}")
        pos += n
        return data[pos - n : pos]

    partitions = []
    for _ in range(_INT32.unpack(take(4))[0]):
        topic = take(_INT16.unpack(take(2))[0]).decode("utf-8")
        for _ in range(_INT32.unpack(take(4))[0]):
            partitions.append(TopicPartition(topic, _INT32.unpack(take(4))[0]))
    generation = _INT32.unpack(take(4))[0] if len(data) - pos >= 4 else None
    return partitions, generation


# --- sticky ------------------------------------------------------------------------------------


class _AbstractStickyAssignor(Assignor):
    """Kafka's AbstractStickyAssignor: a balanced assignment that keeps previous owners where it can."""

    def member_data(self, sub: MemberSubscription) -> tuple[Sequence[TopicPartition], int | None]:
        """The partitions a member owned before this rebalance and the generation they were owned in."""
        raise NotImplementedError

    def _assign(self, counts: Mapping[str, int], subs: Mapping[str, MemberSubscription]) -> GroupAssignment:
        return self._sticky_assign(counts, subs)[0]

    def _sticky_assign(
        self, counts: Mapping[str, int], subs: Mapping[str, MemberSubscription]
    ) -> tuple[GroupAssignment, dict[TopicPartition, str]]:
        """The sticky assignment, and the previous owner of each partition it started from."""
        members = sorted(subs, key=lambda m: _member_key(m, subs[m]))
        subscribers = _subscribers(counts, subs)
        topics_of = {m: frozenset(t for t in subs[m].topics if t in counts) for m in members}
        owners = self._previous_owners(counts, subs, topics_of)
        if len(set(topics_of.values())) <= 1:
            return _constrained_assign(counts, members, owners, sorted(subscribers)), owners
        return _general_assign(counts, members, owners, subscribers), owners

    def _previous_owners(
        self,
        counts: Mapping[str, int],
        subs: Mapping[str, MemberSubscription],
        topics_of: Mapping[str, frozenset[str]],
    ) -> dict[TopicPartition, str]:
        """Partition -> its previous owner: the claim of the highest generation wins, a tie voids it."""
        best: dict[TopicPartition, tuple[int, str | None]] = {}
        for m in sorted(subs):
            partitions, generation = self.member_data(subs[m])
            gen = DEFAULT_GENERATION if generation is None else generation
            for tp in set(partitions):
                held = best.get(tp)
                if held is None or gen > held[0]:
                    best[tp] = (gen, m)
                elif gen == held[0] and held[1] is not None:
                    log.warning("%s claimed by both %s and %s in generation %d", tp, held[1], m, gen)
                    best[tp] = (gen, None)
        return {
            tp: m
            for tp, (_, m) in best.items()
            if m is not None and tp.topic in topics_of[m] and 0 <= tp.partition < counts[tp.topic]
        }


def _constrained_assign(
    counts: Mapping[str, int], members: list[str], owners: Mapping[TopicPartition, str], topics: list[str]
) -> GroupAssignment:
    """Identical subscriptions: counts differ by at most one and the fewest possible partitions move."""
    out: GroupAssignment = {m: [] for m in members}
    partitions = [TopicPartition(t, p) for t in topics for p in range(counts[t])]
    if not members:
        return out
    min_quota, extra = divmod(len(partitions), len(members))
    owned: dict[str, list[TopicPartition]] = defaultdict(list)
    for tp in sorted(owners):
        owned[owners[tp]].append(tp)
    for m in members:  # keep up to min_quota, and one more for the first members that owned more
        keep = min_quota + 1 if extra and len(owned[m]) > min_quota else min_quota
        extra -= keep > min_quota
        out[m] = owned[m][:keep]
    kept = {tp for tps in out.values() for tp in tps}
    unassigned = deque(tp for tp in partitions if tp not in kept)
    unfilled = [m for m in members if len(out[m]) < min_quota]
    while unfilled:  # deal to members under min_quota in turn, so topics spread across them
        unfilled = [m for m in unfilled if len(out[m]) < min_quota]
        for m in unfilled:
            out[m].append(unassigned.popleft())
    for m in members:  # what is left goes one each to members at min_quota
        if not unassigned:
            break
        if len(out[m]) == min_quota:
            out[m].append(unassigned.popleft())
    return out


def _general_assign(
    counts: Mapping[str, int],
    members: list[str],
    owners: Mapping[TopicPartition, str],
    subscribers: Mapping[str, list[str]],
) -> GroupAssignment:
    """Differing subscriptions: keep owners, give the rest to the least loaded, then move along paths."""
    rank = {m: i for i, m in enumerate(members)}
    assigned: dict[str, set[TopicPartition]] = {m: set() for m in members}
    for tp, m in owners.items():
        assigned[m].add(tp)
    unassigned = [TopicPartition(t, p) for t in subscribers for p in range(counts[t])]
    unassigned.sort(key=lambda tp: (len(subscribers[tp.topic]), tp))
    for tp in unassigned:
        if tp not in owners:
            target = min(subscribers[tp.topic], key=lambda m: (len(assigned[m]), rank[m]))
            assigned[target].add(tp)
    while path := _cost_reducing_path(assigned, owners, subscribers, rank):
        for tp, src, dst in path:
            assigned[src].remove(tp)
            assigned[dst].add(tp)
    return {m: sorted(tps) for m, tps in assigned.items()}


def _cost_reducing_path(
    assigned: Mapping[str, set[TopicPartition]],
    owners: Mapping[TopicPartition, str],
    subscribers: Mapping[str, list[str]],
    rank: Mapping[str, int],
) -> list[tuple[TopicPartition, str, str]] | None:
    """A chain of moves from a member with L partitions to one with at most L-2, or None if none exists.

    Each hop hands one partition to a member subscribed to its topic. Paths are found by 0-1 BFS
    where moving a partition away from its previous owner costs 1, so the cheapest chain is taken.
    No such path from any member means the load is as balanced as the subscriptions allow.
    """
    loads = {m: len(tps) for m, tps in assigned.items()}
    for level in sorted(set(loads.values()), reverse=True):
        if level - 2 < min(loads.values()):
            return None
        dist = {m: 0 for m in rank if loads[m] == level}
        parent: dict[str, tuple[TopicPartition, str]] = {}
        queue = deque((0, m) for m in dist)
        found: int | None = None  # the distance of the cheapest target seen so far
        while queue:
            d, x = queue.popleft()
            if d > dist[x]:
                continue
            if found is not None and d >= found:  # stop once every target at that distance is final
                if d > found or (len(dist) == len(rank) and max(dist.values()) <= d):
                    break
            cheapest: dict[str, tuple[int, TopicPartition]] = {}
            for tp in assigned[x]:
                cheapest[tp.topic] = min(cheapest.get(tp.topic, (2, tp)), (int(owners.get(tp) == x), tp))
            for topic, (w, tp) in sorted(cheapest.items()):
                for y in subscribers[topic]:
                    if y not in dist or d + w < dist[y]:
                        dist[y], parent[y] = d + w, (tp, x)
                        if w == 0:
                            queue.appendleft((d, y))
                        else:
                            queue.append((d + w, y))
                        if loads[y] <= level - 2 and (found is None or d + w < found):
                            found = d + w
        if found is not None:
            y = min((m for m in dist if loads[m] <= level - 2), key=lambda m: (dist[m], loads[m], rank[m]))
            path = []
            while y in parent:
                tp, x = parent[y]
                path.append((tp, x, y))
                y = x
            return path[::-1]
    return None


class StickyAssignor(_AbstractStickyAssignor):
    """Kafka's "sticky" (eager): balanced, and keeps previously owned partitions where balance allows."""

    name = "sticky"

    def member_data(self, sub: MemberSubscription) -> tuple[Sequence[TopicPartition], int | None]:
        """Owned partitions and generation from the subscription, else both from StickyAssignor user data."""
        generation = sub.generation_id if sub.generation_id >= 0 else None
        if sub.owned_partitions or not sub.user_data:
            return sub.owned_partitions, generation
        try:
            partitions, encoded = decode_sticky_user_data(sub.user_data)
        except (ValueError, UnicodeDecodeError) as e:
            log.warning("ignoring unparsable sticky user data: %s", e)
            return (), generation
        return partitions, encoded if encoded is not None else generation

    def subscription_user_data(self, assigned: Iterable[TopicPartition], generation_id: int) -> bytes | None:
        """Kafka's StickyAssignor V1 user data: the member's current partitions and generation."""
        return encode_sticky_user_data(assigned, generation_id)


class CooperativeStickyAssignor(_AbstractStickyAssignor):
    """Kafka's "cooperative-sticky" (KIP-429): the sticky target, minus partitions another member must revoke.

    A partition that moves is left unassigned in this rebalance; its owner revokes it and rejoins,
    and the follow-up rebalance hands it to its new member.
    """

    name = "cooperative-sticky"
    supported_protocols = (RebalanceProtocol.COOPERATIVE, RebalanceProtocol.EAGER)

    def member_data(self, sub: MemberSubscription) -> tuple[Sequence[TopicPartition], int | None]:
        """Owned partitions from the subscription; generation from it (v2+) or the 4-byte user data."""
        if sub.generation_id >= 0:
            return sub.owned_partitions, sub.generation_id
        if sub.user_data is not None and len(sub.user_data) >= 4:
            return sub.owned_partitions, _INT32.unpack_from(sub.user_data)[0]
        return sub.owned_partitions, None

    def subscription_user_data(self, assigned: Iterable[TopicPartition], generation_id: int) -> bytes | None:
        """Kafka's CooperativeStickyAssignor user data: the generation as an int32."""
        return _INT32.pack(generation_id)

    def _assign(self, counts: Mapping[str, int], subs: Mapping[str, MemberSubscription]) -> GroupAssignment:
        target, owners = self._sticky_assign(counts, subs)
        claimants: dict[TopicPartition, set[str]] = defaultdict(set)
        for m, sub in subs.items():
            for tp in sub.owned_partitions:
                claimants[tp].add(m)
        out: GroupAssignment = {}
        for m, tps in target.items():  # withhold what another member still claims, unless m won the claim
            out[m] = [tp for tp in tps if owners.get(tp) == m or claimants[tp] <= {m}]
            if len(out[m]) < len(tps):
                log.debug("withholding %s from %s until their owners revoke them", set(tps) - set(out[m]), m)
        return out


ASSIGNORS: dict[str, type[Assignor]] = {
    cls.name: cls for cls in (RangeAssignor, RoundRobinAssignor, StickyAssignor, CooperativeStickyAssignor)
}


def get_assignor(name: str) -> Assignor:
    """A new assignor for Kafka's name (``partition.assignment.strategy``); ValueError if unknown."""
    try:
        return ASSIGNORS[name]()
    except KeyError:
        raise ValueError(f"unknown assignor {name!r}; known assignors: {', '.join(ASSIGNORS)}") from None


def to_consumer_assignments(
    assignment: Mapping[str, Iterable[TopicPartition]],
) -> dict[str, ConsumerAssignment]:
    """Each member's partitions as a consumer-protocol Assignment (no user data, as Kafka's assignors)."""
    return {m: ConsumerAssignment(tuple(tps)) for m, tps in assignment.items()}


def assign_metadata(
    assignor: Assignor | str,
    partitions_per_topic: Mapping[str, int],
    member_metadata: Mapping[str, bytes],
    group_instance_ids: Mapping[str, str | None] | None = None,
    version: int = ASSIGNMENT_HIGHEST_VERSION,
) -> dict[str, bytes]:
    """The leader's step: decode each member's subscription bytes, assign, and encode the assignments.

    Raises ConsumerProtocolError naming the member whose metadata cannot be parsed.
    """
    if isinstance(assignor, str):
        assignor = get_assignor(assignor)
    subs: dict[str, MemberSubscription] = {}
    for member, metadata in member_metadata.items():
        try:
            decoded = decode_subscription(metadata)
        except ConsumerProtocolError as e:
            raise ConsumerProtocolError(f"member {member!r}: {e}") from e
        instance = (group_instance_ids or {}).get(member)
        subs[member] = _coerce(decoded)._replace(group_instance_id=instance)
    result = assignor.assign(partitions_per_topic, subs)
    return {m: encode_assignment(a, version) for m, a in to_consumer_assignments(result).items()}
