"""Simulated clients shared by the load benchmarks: forming groups, committing, fetching.

Everything here is an async function over callers (see common.ActorCaller / LocalCaller), so
it runs unchanged in a driver actor against partition actors and in-process against the shard.
"""

from __future__ import annotations

import asyncio
import logging
import time
from typing import Any, NamedTuple, Sequence

from groupcoord.protocol import Errors, OffsetAndMetadata, TopicPartition
from groupcoord.protocol.assignors.consumer_protocol import (
    Assignment,
    Subscription,
    encode_assignment,
    encode_subscription,
)
from groupcoord.protocol.messages import (
    JoinGroupRequest,
    OffsetCommitRequest,
    OffsetFetchRequest,
    SyncGroupRequest,
)

log = logging.getLogger(__name__)

PROTOCOL = "range"
TOPIC = "bench-topic"


class MemberRef(NamedTuple):
    """A joined member as a simulated client knows it."""

    group: str
    member_id: str
    generation: int
    partition: int  # the offsets partition (index of the caller) that owns the group


def subscription(topics: Sequence[str] = (TOPIC,)) -> bytes:
    """A consumer-protocol subscription, as a Kafka consumer would send it."""
    return encode_subscription(Subscription(topics=list(topics)))


def join_request(group: str, member_id: str = "", session_ms: int = 30_000, rebalance_ms: int = 60_000,
                 client_id: str = "bench", metadata: bytes | None = None, host: str = "10.0.0.1") -> JoinGroupRequest:
    """A JoinGroup of one consumer (single phase: no MEMBER_ID_REQUIRED round trip for new members)."""
    return JoinGroupRequest(
        group,
        session_ms,
        rebalance_ms,
        member_id=member_id,
        protocol_type="consumer",
        protocols=[(PROTOCOL, subscription() if metadata is None else metadata)],
        client_id=client_id,
        client_host=host,
        require_known_member_id=False,
    )


def assignment_for(index: int, members: int, topic_partitions: int = 100) -> bytes:
    """A consumer-protocol assignment: member `index` of `members` gets its share of a topic."""
    parts = [TopicPartition(TOPIC, p) for p in range(topic_partitions) if p % members == index]
    return encode_assignment(Assignment(parts))


async def form_groups(callers: Sequence[Any], groups: Sequence[tuple[str, int, int]], session_ms: int = 30_000,
                      chunk: int = 2000, failed: list | None = None,
                      sync_sent: dict | None = None) -> list[list[MemberRef]]:
    """Form groups (group id, owning partition, members) with batched joins and syncs; their members.

    Joins of a group complete together once its join phase ends; the leader's SyncGroup carries
    a small assignment for everyone. Whole groups go `chunk` members at a time per partition.
    A failed join or sync raises, unless `failed` is given: then its error is appended there and
    the member left out. `sync_sent`, if given, is told when each group's SyncGroups were sent (time.time()).
    """
    by_partition: dict[int, list[tuple[str, int]]] = {}
    for group, partition, n in groups:
        by_partition.setdefault(partition, []).append((group, n))
    formed: dict[str, list[MemberRef]] = {g: [] for g, _, _ in groups}

    async def one_chunk(p: int, part: list[tuple[str, int]]) -> None:
        caller = callers[p]
        # Distinct client ids and hosts per member, as separate consumers would send.
        joins = await caller.batch([("join_group", join_request(g, session_ms=session_ms, client_id=f"consumer-{g}-{i}",
                                                                host=f"10.0.{i // 256}.{i % 256}"))
                                    for g, n in part for i in range(n)])
        syncs = []
        synced: list[MemberRef] = []
        for j, (g, _) in zip(joins, [(g, i) for g, n in part for i in range(n)], strict=True):
            if j.error != Errors.NONE:
                if failed is None:
                    raise RuntimeError(f"join of {g} failed: {j.error!r}")
                failed.append(j.error)
                continue
            assignments = {}
            if j.leader == j.member_id:
                ids = [m.member_id for m in j.members]
                assignments = {mid: assignment_for(i, len(ids)) for i, mid in enumerate(ids)}
            syncs.append(("sync_group", SyncGroupRequest(g, j.generation_id, j.member_id, None, "consumer",
                                                         PROTOCOL, assignments)))
            synced.append(MemberRef(g, j.member_id, j.generation_id, p))
        # Followers' syncs park until the leader's assignment is durable; the batch waits for all.
        if sync_sent is not None:
            sent = time.time()
            sync_sent.update((g, sent) for g, _ in part)
        results = await caller.batch(syncs)
        bad = [r.error for r in results if r.error != Errors.NONE]
        if bad and failed is None:
            raise RuntimeError(f"sync failed: {bad[:3]}")
        for ref, r in zip(synced, results, strict=True):
            if r.error == Errors.NONE:
                formed[ref.group].append(ref)
            else:
                failed.append(r.error)  # type: ignore[union-attr]

    async def one_partition(p: int, todo: list[tuple[str, int]]) -> None:
        # A group's joins must all be in one batch, or its first generation would start without some.
        part: list[tuple[str, int]] = []
        size = 0
        for g, n in todo:
            part.append((g, n))
            size += n
            if size >= chunk:
                await one_chunk(p, part)
                part, size = [], 0
        if part:
            await one_chunk(p, part)

    await asyncio.gather(*(one_partition(p, todo) for p, todo in by_partition.items()))
    return [formed[g] for g, _, _ in groups]


async def commit_loop(callers: Sequence[Any], members: Sequence[MemberRef], per_commit: int, start_at: float,
                      end_at: float, warmup_s: float = 0.3, coalesce: bool = False) -> dict:
    """Each member commits `per_commit` offsets, one request at a time, until `end_at` (wall clock).

    Requests that complete in [start_at, end_at] are counted with their latency; `last` maps a
    group to the last offset acknowledged, to check what a fetch returns afterwards. With
    `coalesce`, this process's requests to a partition share actor calls through the client's
    RequestCoalescer (BatcherCaller).
    """
    from benchmarks.common import BatcherCaller, own_window

    coalesced = [BatcherCaller(c.handle) for c in callers] if coalesce else []
    if coalesce:
        callers = coalesced
    start_at, end_at, late_s = own_window(start_at, end_at, warmup_s)
    await asyncio.sleep(max(0.0, start_at - warmup_s - time.time()))

    async def one(m: MemberRef) -> tuple[int, list[float], int, int, int]:
        caller = callers[m.partition]
        tps = [TopicPartition(TOPIC, p) for p in range(per_commit)]
        count, errors, offset, acked, successes = 0, 0, 0, 0, 0
        latencies: list[float] = []
        while time.time() < end_at:
            offset += 1
            # Built and checked in C (one OffsetAndMetadata, shared): the client's own cost stays small beside the
            # shard's, which shares this process in the in-process rows.
            req = OffsetCommitRequest(m.group, dict.fromkeys(tps, OffsetAndMetadata(offset)), m.generation,
                                      m.member_id)
            t0 = time.perf_counter()
            resp = await caller("commit_offsets", req)
            latency = time.perf_counter() - t0
            done = time.time()
            if any(resp.errors.values()):  # an error other than NONE (code 0)
                errors += 1
                continue
            acked = offset
            successes += 1
            if start_at <= done <= end_at:
                count += 1
                latencies.append(latency)
        return count, latencies, errors, acked, successes

    results = await asyncio.gather(*(one(m) for m in members))
    calls = sum(c.coalescer.calls for c in coalesced)
    sent = sum(c.coalescer.requests for c in coalesced)
    for c in coalesced:
        c.coalescer.close()
    return {
        "requests_per_call": sent / calls if calls else 1.0,
        "late_s": late_s,
        "requests": sum(r[0] for r in results),
        "acknowledged": sum(r[4] for r in results),  # in the window or not
        "latencies": [x for r in results for x in r[1]],
        "errors": sum(r[2] for r in results),
        "last": {m.group: r[3] for m, r in zip(members, results, strict=True)},
    }


async def check_committed(callers: Sequence[Any], members: Sequence[MemberRef], per_commit: int,
                          last: dict[str, int]) -> int:
    """How many groups' fetched offsets differ from the last acknowledged commit (0 when all durable and right)."""
    wrong = 0
    for m in members:
        if last[m.group] == 0:
            continue  # the member acknowledged nothing in this trial (it never got to run): nothing to check
        tps = [TopicPartition(TOPIC, p) for p in range(per_commit)]
        resp = await callers[m.partition]("fetch_offsets", OffsetFetchRequest(m.group, tps))
        if any(resp.offsets[tp].offset != last[m.group] for tp in tps):
            wrong += 1
    return wrong


# --- the in-process shard, hosted in a driver process (see common.Driver.run_local) ---------------


async def local_open(state: dict, path: str, config: Any, groups: Sequence[tuple[str, int, int]] = (),
                     fsync: str = "always", session_ms: int = 30_000) -> list[list[MemberRef]]:
    """Open the in-process shard (PartitionActor without Ray) in this process and form `groups` on it."""
    from benchmarks import common

    partition = await common.open_local_partition(path, config=config, fsync=fsync)
    state["partition"] = partition
    state["callers"] = [common.LocalCaller(partition)]
    return await form_groups(state["callers"], groups, session_ms) if groups else []


async def local_close(state: dict) -> None:
    """Close the in-process shard of this process."""
    from benchmarks import common

    partition = state.pop("partition", None)
    if partition is not None:
        await common.close_local_partition(partition)


class NullLog:
    """A RecordLog that keeps nothing and is durable at once: the shard alone, for CPU and memory costs."""

    def __init__(self) -> None:
        self.end = 0

    def append(self, records: Sequence[Any]) -> int:
        """Count the records; keep nothing."""
        self.end += len(records)
        return self.end

    @property
    def durable_offset(self) -> int:
        """Everything appended, since nothing waits for a disk."""
        return self.end


class ShardCaller:
    """Calls a GroupCoordinator directly, ticking its timers until each batch's responses are complete."""

    def __init__(self, coord: Any) -> None:
        self.coord = coord

    async def __call__(self, api: str, req: Any) -> Any:
        return (await self.batch([(api, req)]))[0]

    async def batch(self, calls: list) -> list:
        """Handle (api, request) pairs in order; wait (ticking timers) until all are answered."""
        deferreds = [getattr(self.coord, api)(req) for api, req in calls]
        while not all(d.done() for d in deferreds):
            await asyncio.sleep(0.001)
            self.coord.tick()  # the initial-join timers complete the joins
        return [d.result() for d in deferreds]
