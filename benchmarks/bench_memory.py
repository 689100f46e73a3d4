"""Memory: bytes per group, per member and per committed offset, in a partition actor and in the pure shard.

The same phases run twice: inside a partition actor, where the cost is the growth of the actor
process's resident set (VmRSS read from /proc by the driver, on the same machine: allocator
overhead and fragmentation included), and on the pure shard in a driver process (GroupCoordinator
over a log that keeps nothing), where it is the growth of Python allocations (tracemalloc).

1. G simple groups with one committed offset each      -> bytes per (group + offset)
2. K more offsets in each of those groups               -> bytes per committed offset
3. M members joined and synced, in groups of S          -> bytes per member (their groups' cost removed)
4. every member heartbeats 10 times                     -> should not grow (over the last 5)
Each phase is measured over its second half (see `phases`).
Group ids, topics and member ids have realistic lengths (10-40 characters).
"""

from __future__ import annotations

import argparse
import asyncio
import gc
import logging
import sys
import time
import tracemalloc
from typing import Any

import ray

from benchmarks import clients, common
from groupcoord.protocol import OffsetAndMetadata, TopicPartition
from groupcoord.protocol.messages import HeartbeatRequest, OffsetCommitRequest

log = logging.getLogger(__name__)

# Issue 30's goals, judged on the partition actor's RSS growth as the issue measured them.
TARGET_OFFSET = 64
TARGET_MEMBER = 600
TOPICS = 10  # offsets of a group spread over 10 topics


def add_arguments(parser: argparse.ArgumentParser) -> None:
    """Options of this benchmark."""
    common.add_common_arguments(parser, default_trials=1)
    parser.add_argument("--groups", type=int, default=None, help="groups of phases 1-2 (default 10k)")
    parser.add_argument("--offsets", type=int, default=None, help="more offsets per group in phase 2 (default 50)")
    parser.add_argument("--members", type=int, default=None, help="members of phase 3 (default 40k)")
    parser.add_argument("--group-size", type=int, default=100, help="members per group in phase 3")


def _sizes(args: argparse.Namespace) -> dict:
    return {
        "groups": args.groups or common.preset(args, 10_000, 3000, 300),
        "offsets": args.offsets or common.preset(args, 50, 20, 10),
        # 40k: a process's RSS grows by whole allocator arenas, steps that were 200 B per member over the 5,000
        # members of the measured half at 10k (603 B per member there against 547 B at 40k, the shard's 409 both).
        "members": args.members or common.preset(args, 40_000, 3000, 300),
        "group_size": args.group_size if not args.tiny else 30,
    }


def _group(i: int) -> str:
    return f"payments-consumer-group-{i:07d}"


def _commit(group: str, first: int, count: int, offset: int) -> OffsetCommitRequest:
    tps = {TopicPartition(f"orders-events-v2-{p % TOPICS}", p // TOPICS): OffsetAndMetadata(offset + p)
           for p in range(first, first + count)}
    return OffsetCommitRequest(group, tps)


async def phases(caller: Any, sizes: dict, measure: Any, chunk: int = 500, in_process: bool = False) -> dict:
    """Run the four phases through `caller` (batch calls), calling `measure()` (bytes in use) around each;
    `in_process`: `measure()` also counts this driver's own objects, so the member references it keeps are
    taken out of the members' cost.

    Each phase runs in two equal halves, and its cost is the growth over the second half only: a
    batch call's transient objects (requests, responses, records) leave the allocator at a high-water
    mark that the first half reaches and the second reuses. A phase measured whole counts that mark
    (a fixed amount, no more per offset at 500,000 offsets than at 50), and a later phase whose
    batches are smaller hides under it: measured whole, with phase 2 in 25,000-offset calls, the
    actor showed 106 B per offset and 596 B per member for a shard whose live objects take 48 and
    1,315.
    """
    g, k, m, s = sizes["groups"], sizes["offsets"], sizes["members"], sizes["group_size"]
    # Warm up every code path (and the allocator) before the first reading.
    warm = [(f"warm-{i}", 0, 3) for i in range(5)]
    await clients.form_groups([caller], warm, session_ms=600_000)
    await caller.batch([("commit_offsets", _commit(f"warm-c-{i}", 0, 5, 1)) for i in range(50)])
    readings = {"start": await measure()}
    half = g // 2
    step = max(1, chunk // k)  # phase 2's calls carry about as many offsets as phase 1's

    async def commits(first: int, end: int, offsets_from: int, count: int, per_call: int) -> None:
        for lo in range(first, end, per_call):
            await caller.batch([("commit_offsets", _commit(_group(i), offsets_from, count, 1))
                                for i in range(lo, min(end, lo + per_call))])

    await commits(0, half, 0, 1, chunk)
    readings["groups_half"] = await measure()
    await commits(half, g, 0, 1, chunk)
    readings["groups"] = await measure()
    await commits(0, half, 1, k, step)
    readings["offsets_half"] = await measure()
    await commits(half, g, 1, k, step)
    readings["offsets"] = await measure()
    groups = [(f"inventory-consumer-group-{i:05d}", 0, s) for i in range(max(2, m // s))]
    first, second = groups[: len(groups) // 2], groups[len(groups) // 2 :]
    formed = await clients.form_groups([caller], first, session_ms=600_000)
    readings["members_half"] = await measure()
    formed_second = await clients.form_groups([caller], second, session_ms=600_000)
    readings["members"] = await measure()
    if in_process:  # the driver's references to the members it formed (their ids are the shard's own strings)
        readings["members"] -= sys.getsizeof(formed_second) + sum(
            sys.getsizeof(ms) + sum(sys.getsizeof(r) for r in ms) for ms in formed_second)
    refs = [ref for ms in formed + formed_second for ref in ms]
    for rounds, reading in ((5, "heartbeats_half"), (5, "heartbeats")):
        for _ in range(rounds):
            for lo in range(0, len(refs), 2000):
                await caller.batch([("heartbeat", HeartbeatRequest(r.group, r.generation, r.member_id))
                                    for r in refs[lo : lo + 2000]])
        readings[reading] = await measure()
    second_members = sum(len(ms) for ms in formed_second)
    per_offset = (readings["offsets"] - readings["offsets_half"]) / ((g - half) * k)
    per_group = (readings["groups"] - readings["groups_half"]) / (g - half) - per_offset
    per_member = (readings["members"] - readings["members_half"] - len(second) * per_group) / second_members
    return {
        "readings": readings,
        "groups": g, "offsets": g * k, "members": len(refs), "member_groups": len(groups),
        "per_offset": per_offset,
        "per_offset_whole_phase": (readings["offsets"] - readings["groups"]) / (g * k),
        "per_group": per_group,
        "per_member": per_member,
        "heartbeat_growth_per_member": (readings["heartbeats"] - readings["heartbeats_half"]) / len(refs),
    }


async def shard_phases(_state: dict, sizes: dict) -> dict:
    """The phases on the pure shard in this process, measured with tracemalloc."""
    from groupcoord.protocol import GroupCoordinator

    coord = GroupCoordinator(common.bench_config(), log=clients.NullLog())

    async def measure() -> int:
        gc.collect()
        return tracemalloc.get_traced_memory()[0]

    tracemalloc.start()
    try:
        return await phases(clients.ShardCaller(coord), sizes, measure, in_process=True)
    finally:
        tracemalloc.stop()


def actor_phases(svc: Any, sizes: dict, settle_s: float = 0.2) -> dict:
    """The phases through a partition actor, measured as the growth of its process's RSS."""
    handle = svc.partitions[0]
    pid = ray.get(handle.status.remote())["pid"]

    async def measure() -> int:
        await asyncio.sleep(settle_s)  # let the last flushes finish
        return common.read_rss(pid)

    return asyncio.run(phases(common.ActorCaller(handle), sizes, measure))


def run(args: argparse.Namespace) -> dict:
    """Measure in a partition actor (RSS) and in the pure shard (tracemalloc)."""
    sizes = _sizes(args)
    out: dict[str, Any] = {"sizes": sizes}
    with common.work_dir(args, "memory") as base:
        common.step(f"partition actor: {sizes['groups']:,} groups, {sizes['groups'] * sizes['offsets']:,} more "
                    f"offsets, {sizes['members']:,} members (RSS)")
        t = time.perf_counter()
        with common.service(1, base / "svc", common.bench_config()) as svc:
            out["actor"] = actor_phases(svc, sizes, common.preset(args, 0.2, 0.2, 0.05))
        out["actor"]["seconds"] = time.perf_counter() - t
        common.step("pure shard in a driver process (tracemalloc)")
        host = common.start_drivers(1)[0]
        try:
            t = time.perf_counter()
            out["shard"] = ray.get(host.run_local.remote(shard_phases, sizes))
            out["shard"]["seconds"] = time.perf_counter() - t
        finally:
            common.stop_drivers([host])
    return out


def report(results: dict) -> None:
    """Print bytes per group, member and offset against the targets."""
    rows = []
    for name, label in (("actor", "partition actor, RSS growth"), ("shard", "pure shard, tracemalloc")):
        r = results[name]
        whole = r.get("per_offset_whole_phase")
        rows.append([label, f"{r['per_group']:,.0f}", f"{r['per_offset']:,.0f}",
                     "-" if whole is None else f"{whole:,.0f}", f"{r['per_member']:,.0f}",
                     f"{r['heartbeat_growth_per_member']:,.0f}",
                     f"{r['groups']:,} / {r['offsets'] + r['groups']:,} / {r['members']:,}"])
    common.print_table("memory, bytes each (growth over each phase's second half; see bench_memory)",
                       ["measured in", "per group", "per offset", "per offset, whole phase", "per member",
                        "growth/member over heartbeats 6-10", "groups / offsets / members"], rows)
    a, shard = results["actor"], results["shard"]
    print()
    targets = (("per_offset", TARGET_OFFSET, "committed offset"), ("per_member", TARGET_MEMBER, "member"))
    for key, limit, what in targets:
        common.print_target(f"<= {limit:,} bytes per {what}",
                            f"{a[key]:,.0f} in the actor, {shard[key]:,.0f} in the shard", a[key] <= limit)


def main(argv: list[str] | None = None) -> dict:
    """Run this benchmark from the command line."""
    return common.run_benchmark("memory", sys.modules[__name__], argv)


if __name__ == "__main__":
    main()
