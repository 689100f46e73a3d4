"""Ray's own floor under the coordinator's benchmarks: plain actors that answer the same calls with no
coordinator behind them, measured in the same run as the real service.

A figure through Ray is the coordinator's cost plus what Ray's calls cost on this machine. These
actors keep only the second: they take the same request objects over the same actor calls and
answer them at once (an echo), or as a classic group's barrier must (JoinGroup answered when all
members have joined), with no validation, no state machine, no log and no timers. A goal below
their figure cannot be met by the coordinator's code, only by sending fewer calls.
"""

from __future__ import annotations

import asyncio
import os
import time
import uuid
from typing import Any

import ray

from benchmarks.common import own_window
from groupcoord.actors.client.wire import OnePickle
from groupcoord.protocol import Errors
from groupcoord.protocol.messages import (
    HeartbeatRequest,
    HeartbeatResponse,
    JoinGroupMember,
    JoinGroupRequest,
    JoinGroupResponse,
    OffsetCommitRequest,
    OffsetCommitResponse,
    SyncGroupRequest,
    SyncGroupResponse,
)


def _answer(api: str, req: Any) -> Any:
    if api == "heartbeat":
        return HeartbeatResponse(Errors.NONE)
    return OffsetCommitResponse(dict.fromkeys(req.offsets, Errors.NONE))


@ray.remote(num_cpus=0)
class EchoPartition:
    """Answers each OffsetCommit and Heartbeat at once with NONE, built from the request alone: a request's
    two trips through Ray and nothing else."""

    async def commit_offsets(self, req: OffsetCommitRequest) -> OffsetCommitResponse:
        """The response a partition gives a commit that succeeded."""
        return _answer("commit_offsets", req)

    async def batch(self, calls: list[tuple[str, Any]], credentials: Any = None) -> OnePickle:
        """Many requests in one call (what a client process's coalescer sends), answered in order (pickled
        whole, as a partition actor answers)."""
        return OnePickle([_answer(api, req) for api, req in calls])

    async def pid(self) -> int:
        """The actor's process id, to read its CPU time."""
        return os.getpid()


async def heartbeat_load(handle: Any, rate: float, members: int, start_at: float, end_at: float,
                         tick_s: float) -> dict:
    """Send `rate` heartbeats/s of `members` members to `handle` from `start_at` to `end_at`: every `tick_s`
    the heartbeats due go in one `batch` call, one call in flight at a time (as a client's batcher sends). A
    process that gets this late (a starved Ray worker) shifts the window, as every load client does."""
    reqs = [("heartbeat", HeartbeatRequest(f"floor-heartbeat-group-{i // 10:06d}", 1,
                                           f"consumer-floor-{i:06d}-{uuid.UUID(int=i)}")) for i in range(members)]
    start_at, end_at, _ = own_window(start_at, end_at, 0.0)
    await asyncio.sleep(max(0.0, start_at - time.time()))
    sent = answered = 0
    due = 0.0
    last = time.time()
    while time.time() < end_at:
        now = time.time()
        due += rate * (now - last)
        last = now
        count = int(due)
        if count:
            due -= count
            batch = [reqs[(sent + i) % members] for i in range(count)]
            sent += count
            answered += sum(1 for r in await handle.batch.remote(OnePickle(batch)) if r.error == Errors.NONE)
        await asyncio.sleep(max(0.0, tick_s - (time.time() - now)))
    return {"sent": sent, "answered": answered}


@ray.remote(num_cpus=0)
class BarrierGroup:
    """One classic group's rebalance with nothing but its barrier: every JoinGroup waits until `expect`ed
    members have joined, then all are answered (the first to join leads and gets everyone's metadata);
    every SyncGroup waits for the leader's, which brings the assignments."""

    def __init__(self) -> None:
        self._expected = 0
        self._generation = 0
        self._joined: list[tuple[JoinGroupRequest, asyncio.Future]] = []
        self._assignments: asyncio.Future | None = None  # the leader's SyncGroup sets it (see expect)

    async def expect(self, members: int) -> None:
        """Start a new generation's barrier for `members` joins."""
        self._expected, self._joined = members, []
        self._generation += 1
        self._assignments = asyncio.get_running_loop().create_future()

    async def join_group(self, req: JoinGroupRequest) -> JoinGroupResponse:
        """This member's JoinGroup answer, once every expected member has joined."""
        done: asyncio.Future = asyncio.get_running_loop().create_future()
        self._joined.append((req, done))
        if len(self._joined) == self._expected:
            self._release()
        return await done

    def _release(self) -> None:
        leader = self._joined[0][0].member_id
        protocol = self._joined[0][0].protocols[0][0]
        members = [JoinGroupMember(r.member_id, r.group_instance_id, r.protocols[0][1]) for r, _ in self._joined]
        for r, done in self._joined:
            done.set_result(JoinGroupResponse(Errors.NONE, self._generation, r.protocol_type, protocol, leader,
                                              r.member_id, members if r.member_id == leader else []))

    async def sync_group(self, req: SyncGroupRequest) -> SyncGroupResponse:
        """The member's assignment, once the leader's SyncGroup has brought them all."""
        if self._assignments is None:
            raise RuntimeError("sync_group before expect(): no generation to sync")
        if req.assignments:
            self._assignments.set_result(dict(req.assignments))
        assignments = await self._assignments
        return SyncGroupResponse(Errors.NONE, req.protocol_type, req.protocol_name, assignments.get(req.member_id, b""))


def start(cls: Any, count: int = 1) -> list[Any]:
    """`count` floor actors of `cls`, running."""
    handles = [cls.remote() for _ in range(count)]
    ray.get([h.__ray_ready__.remote() for h in handles])
    return handles


def stop(handles: list[Any]) -> None:
    """Kill floor actors."""
    for h in handles:
        ray.kill(h)
