"""Discrete-event drives of one pure shard (ManualClock) through a membership change, classic and consumer protocol.

Every request goes through the real GroupCoordinator and every assignment is computed by the real
assignors (the leader's, for the classic protocol; the coordinator's, for KIP-848). Time is
simulated: a member heartbeats every `interval_ms` at a random phase, reacts to an answer at once
(a revocation callback, a rejoin, an acknowledging heartbeat), and requests take no network time.
The CPU the coordinator and the leader spend on the change is measured separately (wall clock).

A partition "stops" when its owner gives it up and "resumes" when its next owner takes it.
"""

from __future__ import annotations

import dataclasses
import heapq
import random
import time
from typing import Any

from groupcoord.protocol import (
    ConsumerGroupHeartbeatRequest,
    Errors,
    GroupConfig,
    GroupCoordinator,
    HeartbeatRequest,
    JoinGroupRequest,
    LeaveGroupRequest,
    ManualClock,
    MemberIdentity,
    MemoryLog,
    SyncGroupRequest,
    TopicPartition,
)
from groupcoord.protocol.assignors import assign_metadata
from groupcoord.protocol.assignors.consumer_protocol import Subscription, decode_assignment, encode_subscription
from groupcoord.protocol.consumer.group import ConsumerGroupMember
from groupcoord.protocol.consumer.store import (
    current_assignment_record,
    epoch_record,
    subscription_metadata_record,
    subscription_record,
    target_epoch_record,
    target_member_record,
)

GROUP, TOPIC = "bench", "t"
SESSION_MS, REBALANCE_MS = 45_000, 300_000


@dataclasses.dataclass
class Outcome:
    """What one membership change cost: time to a fully reconciled group, partitions stopped, CPU."""

    reconciled_s: float = 0.0
    stopped: int = 0  # distinct partitions that stopped being processed
    stopped_partition_s: float = 0.0  # the sum over partitions of the time they were not processed
    longest_stop_s: float = 0.0
    cpu_s: float = 0.0  # coordinator (and classic leader) CPU spent on the change
    rounds: int = 0  # classic: rebalances; consumer: heartbeats handled


class Stops:
    """When each partition stopped and resumed."""

    def __init__(self) -> None:
        self.since: dict[TopicPartition, float] = {}
        self.out = Outcome()
        self.seen: set[TopicPartition] = set()

    def stop(self, tps: Any, t: float) -> None:
        for tp in tps:
            self.since.setdefault(tp, t)
            self.seen.add(tp)

    def resume(self, tps: Any, t: float) -> None:
        for tp in tps:
            start = self.since.pop(tp, None)
            if start is not None:
                self.out.stopped_partition_s += (t - start) / 1000
                self.out.longest_stop_s = max(self.out.longest_stop_s, (t - start) / 1000)

    def finish(self, t0: float, t: float, cpu: float) -> Outcome:
        assert not self.since, f"{len(self.since)} partitions never resumed"
        self.out.reconciled_s, self.out.stopped, self.out.cpu_s = (t - t0) / 1000, len(self.seen), cpu
        return self.out


def _timed(cpu: list[float], fn: Any, *args: Any) -> Any:
    started = time.perf_counter()
    try:
        return fn(*args)
    finally:
        cpu[0] += time.perf_counter() - started


# --- the classic protocol ---------------------------------------------------------------------------


class ClassicGroupSim:
    """Classic members: JoinGroup/SyncGroup rounds, the leader assigns with `assignor` (eager or cooperative)."""

    def __init__(self, members: int, partitions: int, assignor: str, interval_ms: int, seed: int) -> None:
        self.clock = ManualClock(0)
        self.coord = GroupCoordinator(GroupConfig(initial_rebalance_delay_ms=0), self.clock, MemoryLog())
        self.assignor, self.partitions, self.interval = assignor, partitions, interval_ms
        self.cooperative = assignor == "cooperative-sticky"
        self.rng = random.Random(seed)
        self.owned: dict[str, set[TopicPartition]] = {}
        self.generation = -1
        self.cpu = [0.0]
        self.pending: dict[str, Any] = {}  # member -> parked JoinGroup deferred
        self.names = [f"member-{i:05d}" for i in range(members)]
        for name in self.names:
            self._join(name, "")
        self.coord.tick()
        self._complete_round(None, 0.0)

    def _join(self, key: str, member_id: str) -> None:
        owned = sorted(self.owned.get(member_id, ())) if self.cooperative else []
        meta = encode_subscription(Subscription([TOPIC], owned_partitions=owned, generation_id=self.generation))
        req = JoinGroupRequest(
            GROUP, SESSION_MS, REBALANCE_MS, member_id, protocols=[(self.assignor, meta)], client_id=key,
            require_known_member_id=False,
        )  # fmt: skip
        self.pending[key] = _timed(self.cpu, self.coord.join_group, req)

    def _complete_round(self, stops: Stops | None, t: float) -> set[str]:
        """Every member rejoined: the leader assigns, all sync and install; returns members that must rejoin."""
        joins = {key: d.result() for key, d in self.pending.items()}
        self.pending.clear()
        leader = next(r for r in joins.values() if r.leader == r.member_id)
        metadata = {m.member_id: m.metadata for m in leader.members}
        assignments = _timed(self.cpu, assign_metadata, self.assignor, {TOPIC: self.partitions}, metadata)
        self.generation = leader.generation_id
        rejoin: set[str] = set()
        for r in joins.values():
            req = SyncGroupRequest(GROUP, r.generation_id, r.member_id, assignments=assignments if r is leader else {})
            _timed(self.cpu, self.coord.sync_group, req)
        for r in joins.values():
            new = set(decode_assignment(assignments[r.member_id]).partitions)
            old = self.owned.get(r.member_id, set())
            revoked = old - new
            if stops is not None:
                stops.stop(revoked, t)
                stops.resume(new - old if self.cooperative else new, t)
            self.owned[r.member_id] = new - revoked if self.cooperative else new
            if self.cooperative and revoked:
                self.owned[r.member_id] = new
                rejoin.add(r.member_id)
        return rejoin

    def change(self, kind: str) -> Outcome:
        """A member joins or leaves a Stable group; heartbeats at random phases until the group settles."""
        stops, self.cpu[0] = Stops(), 0.0
        t0 = self.clock.monotonic_ms()
        heap = [(t0 + self.rng.uniform(1, self.interval), m) for m in self.owned]
        heapq.heapify(heap)
        if kind == "join":
            self._join("newcomer", "")
        else:
            leaver = next(iter(self.owned))
            stops.stop(self.owned.pop(leaver), t0)
            _timed(self.cpu, self.coord.leave_group, LeaveGroupRequest(GROUP, [MemberIdentity(leaver)]))
            heap = [(t, m) for t, m in heap if m != leaver]
            heapq.heapify(heap)
        rounds, t = 0, t0
        while True:
            t, member = heapq.heappop(heap)
            self.clock.advance(int(t) - self.clock.monotonic_ms())
            heapq.heappush(heap, (t + self.interval, member))
            if any(key == member for key in self.pending):
                continue
            hb = _timed(self.cpu, self.coord.heartbeat, HeartbeatRequest(GROUP, self.generation, member)).result()
            if hb.error != Errors.REBALANCE_IN_PROGRESS:
                continue
            if not self.cooperative:
                stops.stop(self.owned[member], t)
                self.owned[member] = set()
            self._join(member, member)
            if all(d.done() for d in self.pending.values()):
                rounds += 1
                rejoin = self._complete_round(stops, t)
                for member_id in set(self.owned) - {m for _, m in heap}:  # the newcomer heartbeats from now on
                    heapq.heappush(heap, (t + self.rng.uniform(1, self.interval), member_id))
                for member_id in rejoin:  # cooperative: give up, then rejoin at once for the follow-up round
                    self._join(member_id, member_id)
                if not rejoin:
                    stops.out.rounds = rounds
                    return stops.finish(t0, t, self.cpu[0])


# --- the consumer protocol (KIP-848) ---------------------------------------------------------------------


class ConsumerGroupSim:
    """Consumer-protocol members heartbeating at the coordinator's interval; the coordinator assigns (uniform)."""

    def __init__(self, members: int, partitions: int, interval_ms: int, seed: int) -> None:
        self.clock = ManualClock(0)
        config = GroupConfig(consumer_heartbeat_interval_ms=interval_ms, consumer_session_timeout_ms=SESSION_MS)
        self.coord = GroupCoordinator(config, self.clock, MemoryLog())
        self.coord.update_topic_metadata({TOPIC: partitions})
        self.interval, self.rng, self.cpu = interval_ms, random.Random(seed), [0.0]
        self.owned: dict[str, set[TopicPartition]] = {}
        self.epoch: dict[str, int] = {}
        # A Stable group at epoch 1, written as its records (as a shard that loaded it would have it).
        names = [f"member-{i:05d}" for i in range(members)]
        records = [subscription_metadata_record(GROUP, {TOPIC: partitions}), epoch_record(GROUP, 1)]
        for i, name in enumerate(names):
            mine = frozenset(range(i, partitions, members))
            member = ConsumerGroupMember(
                name, subscribed_topic_names=(TOPIC,), rebalance_timeout_ms=REBALANCE_MS, member_epoch=1,
                previous_member_epoch=0, assigned_partitions={TOPIC: mine},
            )  # fmt: skip
            records += [subscription_record(GROUP, member), target_member_record(GROUP, name, {TOPIC: mine})]
            records.append(current_assignment_record(GROUP, member))
            self.owned[name], self.epoch[name] = {TopicPartition(TOPIC, p) for p in mine}, 1
        records.append(target_epoch_record(GROUP, 1))
        self.coord.runtime.append(records)
        for name in names:
            self.coord.consumer._schedule_session_timeout(GROUP, name)

    def _heartbeat(self, member: str, stops: Stops, t: float, **kw: Any) -> Any:
        kw.setdefault("topic_partitions", sorted(self.owned[member]))
        req = ConsumerGroupHeartbeatRequest(GROUP, member_id=member, member_epoch=self.epoch[member], **kw)
        resp = _timed(self.cpu, self.coord.consumer_group_heartbeat, req).result()
        assert resp.error == Errors.NONE, resp
        self.epoch[member] = resp.member_epoch
        if resp.assignment is None:
            return False
        new = set(resp.assignment)
        revoked, added = self.owned[member] - new, new - self.owned[member]
        stops.stop(revoked, t)
        stops.resume(added, t)
        self.owned[member] = new
        return bool(revoked)

    def change(self, kind: str) -> Outcome:
        """A member joins or leaves; every member heartbeats at its phase until all are reconciled."""
        stops, self.cpu[0] = Stops(), 0.0
        t0 = self.clock.monotonic_ms()
        group = self.coord.consumer.groups[GROUP]
        heap = [(t0 + self.rng.uniform(1, self.interval), m) for m in self.owned]
        if kind == "join":
            self.owned["newcomer"], self.epoch["newcomer"] = set(), 0
            self._heartbeat(
                "newcomer", stops, t0, rebalance_timeout_ms=REBALANCE_MS, subscribed_topic_names=[TOPIC],
                topic_partitions=[],
            )  # fmt: skip
            heap.append((t0 + self.interval, "newcomer"))
        else:
            leaver = next(iter(self.owned))
            stops.stop(self.owned.pop(leaver), t0)
            _timed(self.cpu, self.coord.consumer_group_heartbeat, ConsumerGroupHeartbeatRequest(GROUP, leaver, -1))
            heap = [(t, m) for t, m in heap if m != leaver]
        heapq.heapify(heap)
        behind = set(self.owned)  # members not yet reconciled to the newest target
        handled = 0
        while True:
            t, member = heapq.heappop(heap)
            self.clock.advance(int(t) - self.clock.monotonic_ms())
            heapq.heappush(heap, (t + self.interval, member))
            if self._heartbeat(member, stops, t):
                self._heartbeat(member, stops, t)  # the revocation is done: acknowledge it at once
                handled += 1
            handled += 1
            if group.members[member].is_reconciled_to(group.assignment_epoch):
                behind.discard(member)
            else:
                behind.add(member)
            if not behind and group.group_epoch == group.assignment_epoch:
                stops.out.rounds = handled
                return stops.finish(t0, t, self.cpu[0])
