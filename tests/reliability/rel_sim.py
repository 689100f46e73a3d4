"""Lightweight simulated members: async JoinGroup/SyncGroup/Heartbeat/OffsetCommit loops in Ray actors.

A `SimHost` actor runs many members (whole groups) on one event loop, calling the partition
actors directly. It measures what a false positive would look like: a member answered
UNKNOWN_MEMBER_ID (expired) although, by the client's own clock, the server cannot have gone
a whole session without one of its heartbeats. Used by test_rel_load.py and benchmarks/soak.py.
"""

from __future__ import annotations

import asyncio
import random
import sys
import time
from collections import Counter
from dataclasses import dataclass, field
from typing import Any

import ray

from groupcoord.protocol import (
    Errors,
    HeartbeatRequest,
    JoinGroupRequest,
    OffsetAndMetadata,
    OffsetCommitRequest,
    SyncGroupRequest,
    TopicPartition,
)
from groupcoord.protocol.assignors.consumer_protocol import (
    Assignment,
    Subscription,
    encode_assignment,
    encode_subscription,
)

TOPIC = "sim"


@dataclass
class SimStats:
    """What one host's members saw (merged across hosts by `merge`)."""

    members: int = 0
    groups_formed: int = 0
    formation_retries: int = 0
    heartbeats: Counter = field(default_factory=Counter)
    commits: Counter = field(default_factory=Counter)
    expiries: int = 0
    spurious_expiries: list[str] = field(default_factory=list)
    max_send_gap_ms: float = 0.0
    max_latency_ms: float = 0.0
    latencies_ms: list[float] = field(default_factory=list)

    def merge(self, other: SimStats) -> None:
        """Add another host's figures to these."""
        self.members += other.members
        self.groups_formed += other.groups_formed
        self.formation_retries += other.formation_retries
        self.heartbeats.update(other.heartbeats)
        self.commits.update(other.commits)
        self.expiries += other.expiries
        self.spurious_expiries += other.spurious_expiries
        self.max_send_gap_ms = max(self.max_send_gap_ms, other.max_send_gap_ms)
        self.max_latency_ms = max(self.max_latency_ms, other.max_latency_ms)
        self.latencies_ms += other.latencies_ms

    def summary(self) -> str:
        """One line of figures."""
        lat = sorted(self.latencies_ms) or [0.0]
        p50, p99 = lat[len(lat) // 2], lat[min(len(lat) - 1, int(len(lat) * 0.99))]
        return (
            f"{self.members} members in {self.groups_formed} groups ({self.formation_retries} formation retries); "
            f"heartbeats {dict(self.heartbeats)}; commits {dict(self.commits)}; expiries {self.expiries} "
            f"(spurious {len(self.spurious_expiries)}); heartbeat latency p50 {p50:.1f} ms p99 {p99:.1f} ms "
            f"max {self.max_latency_ms:.1f} ms; longest gap between a member's heartbeats {self.max_send_gap_ms:.0f} ms"
        )


class SimHost:
    """A Ray actor (async) that runs whole groups of simulated members against the partition actors."""

    def __init__(self, svc: Any, groups: list[str], members_per_group: int, session_ms: int, heartbeat_ms: int,
                 commit_every: int = 3, seed: int = 0) -> None:
        self.svc = svc
        self.groups = groups
        self.n = members_per_group
        self.session_ms = session_ms
        self.heartbeat_ms = heartbeat_ms
        self.commit_every = commit_every
        self.rng = random.Random(seed)
        self.stats = SimStats()

    async def _form(self, group: str) -> tuple[Any, int, list[str]]:
        """Join all members (two-phase) and sync them; retried until one generation forms."""
        _, handle = self.svc.find_coordinator(group)
        meta = encode_subscription(Subscription([TOPIC]))
        protocols = [("range", meta)]
        while True:
            def join(member_id: str = "") -> Any:
                return handle.join_group.remote(
                    JoinGroupRequest(group, self.session_ms, self.session_ms * 3, member_id, protocols=protocols,
                                     client_id="sim")
                )

            first = await asyncio.gather(*(join() for _ in range(self.n)))
            ids = [r.member_id for r in first if r.error == Errors.MEMBER_ID_REQUIRED]
            joins = await asyncio.gather(*(join(m) for m in ids))
            if len(ids) != self.n or any(j.error != Errors.NONE for j in joins) or len(
                {j.generation_id for j in joins}
            ) != 1:
                self.stats.formation_retries += 1
                await asyncio.sleep(0.2)
                continue
            generation, leader = joins[0].generation_id, joins[0].leader
            assignments = {m: encode_assignment(Assignment([TopicPartition(TOPIC, i)])) for i, m in enumerate(ids)}
            syncs = await asyncio.gather(
                *(
                    handle.sync_group.remote(
                        SyncGroupRequest(group, generation, m, assignments=assignments if m == leader else {})
                    )
                    for m in ids
                )
            )
            if all(s.error == Errors.NONE for s in syncs):
                self.stats.groups_formed += 1
                return handle, generation, ids
            self.stats.formation_retries += 1

    async def _member(self, handle: Any, group: str, generation: int, member_id: str, index: int,
                      deadline: float) -> None:
        """Heartbeat (and now and then commit) until the deadline, or until expired."""
        stats = self.stats
        interval = self.heartbeat_ms / 1000
        await asyncio.sleep(self.rng.uniform(0, interval))
        last_ok_send: float | None = None
        last_send: float | None = None
        beat = 0
        while time.monotonic() < deadline:
            sent = time.monotonic()
            if last_send is not None:
                stats.max_send_gap_ms = max(stats.max_send_gap_ms, (sent - last_send) * 1000)
            last_send = sent
            resp = await handle.heartbeat.remote(HeartbeatRequest(group, generation, member_id))
            received = time.monotonic()
            latency = (received - sent) * 1000
            stats.latencies_ms.append(latency)
            stats.max_latency_ms = max(stats.max_latency_ms, latency)
            stats.heartbeats[resp.error.name] += 1
            if resp.error == Errors.UNKNOWN_MEMBER_ID:
                stats.expiries += 1
                # The server cannot have gone longer than this without one of our heartbeats.
                bound_ms = (received - last_ok_send) * 1000 if last_ok_send is not None else float("inf")
                if bound_ms < self.session_ms:
                    stats.spurious_expiries.append(f"{group}/{member_id}: expired within {bound_ms:.0f} ms")
                return
            if resp.error == Errors.NONE:
                last_ok_send = sent
            beat += 1
            if self.commit_every and beat % self.commit_every == 0:
                tp = TopicPartition(TOPIC, index)
                commit = await handle.commit_offsets.remote(
                    OffsetCommitRequest(group, {tp: OffsetAndMetadata(beat)}, generation, member_id)
                )
                stats.commits[commit.errors[tp].name] += 1
            await asyncio.sleep(max(0.0, interval - (time.monotonic() - sent)))

    async def run(self, seconds: float) -> SimStats:
        """Form every group, then run every member for `seconds`; returns the figures."""
        formed = await asyncio.gather(*(self._form(g) for g in self.groups))
        deadline = time.monotonic() + seconds
        tasks = []
        for group, (handle, generation, ids) in zip(self.groups, formed, strict=True):
            for i, member_id in enumerate(ids):
                tasks.append(self._member(handle, group, generation, member_id, i, deadline))
        self.stats.members = len(tasks)
        await asyncio.gather(*tasks)
        return self.stats


def run_hosts(svc: Any, groups: list[str], members_per_group: int, hosts: int, seconds: float, session_ms: int,
              heartbeat_ms: int) -> SimStats:
    """Spread `groups` over `hosts` SimHost actors, run them for `seconds` and merge their figures."""
    ray.cloudpickle.register_pickle_by_value(sys.modules[__name__])  # the hosts run this module's code
    remote = ray.remote(SimHost).options(num_cpus=0)
    actors = [
        remote.remote(svc, groups[i::hosts], members_per_group, session_ms, heartbeat_ms, 3, i) for i in range(hosts)
    ]
    try:
        results = ray.get([a.run.remote(seconds) for a in actors], timeout=seconds + 300)
    finally:
        for a in actors:
            ray.kill(a)
    stats = SimStats()
    for r in results:
        stats.merge(r)
    return stats
