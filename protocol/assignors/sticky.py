"""The sticky algorithm of Kafka's StickyAssignor and CooperativeStickyAssignor, "sticky" itself, and its user data.

Kafka's AbstractStickyAssignor: a balanced assignment that keeps each partition with its previous
owner where balance allows. Both sticky assignors share it; the cooperative one (in
cooperative_sticky) then withholds the partitions that must be revoked first. This reaches the same
kind of result as Kafka's with simpler code.
"""

from __future__ import annotations

import logging
import struct
from collections import defaultdict, deque
from typing import Iterable, Mapping, Sequence

from ..values import TopicPartition
from .base import (
    DEFAULT_GENERATION,
    Assignor,
    GroupAssignment,
    MemberSubscription,
    member_order_key,
    subscribers_by_topic,
)

__all__ = ["AbstractStickyAssignor", "StickyAssignor", "decode_sticky_user_data", "encode_sticky_user_data"]

log = logging.getLogger(__name__)

_INT16 = struct.Struct(">h")
_INT32 = struct.Struct(">i")


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


class AbstractStickyAssignor(Assignor):
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
        members = sorted(subs, key=lambda m: member_order_key(m, subs[m]))
        subscribers = subscribers_by_topic(counts, subs)
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


class StickyAssignor(AbstractStickyAssignor):
    """Kafka's "sticky" (eager): balanced, and keeps previously owned partitions where balance allows."""

    name = "sticky"

    def member_data(self, sub: MemberSubscription) -> tuple[Sequence[TopicPartition], int | None]:
        """The previous assignment and its generation, always from the StickyAssignor user data.

        As Kafka's eager StickyAssignor: a member revokes everything before it joins, so the owned
        partitions of its subscription say nothing; its user data (V1, or V0 without generation)
        carries what it was last assigned. No or unreadable user data: no previous assignment.
        """
        if not sub.user_data:
            return (), None
        try:
            return decode_sticky_user_data(sub.user_data)
        except (ValueError, UnicodeDecodeError) as e:
            log.warning("ignoring unparsable sticky user data: %s", e)
            return (), None

    def subscription_user_data(self, assigned: Iterable[TopicPartition], generation_id: int) -> bytes | None:
        """Kafka's StickyAssignor V1 user data: the member's current partitions and generation."""
        return encode_sticky_user_data(assigned, generation_id)
