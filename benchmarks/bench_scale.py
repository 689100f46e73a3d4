"""Scale: 10k and 100k groups across partition actors; commit throughput and memory per group stay flat.

The groups are consumer groups of one member (joined and synced, a long session) that committed
10 offsets; they are created level by level (1k, then up to 10k, then up to 100k groups) in
batched calls, spread over the partitions by the group-id hash. At each level, clients in a few
driver processes commit 10 offsets at a time to randomly chosen groups as their member
(requests coalesced per process, so that the shard's work and not the Ray call dominates),
and the partition actors' resident memory is read from /proc. Flat means: commits/s at each
level as a fraction of the first level's, and bytes per group, stay the same.
"""

from __future__ import annotations

import argparse
import asyncio
import logging
import random
import sys
import time
from typing import Any

import ray

from benchmarks import clients, common
from groupcoord.protocol import Errors, OffsetAndMetadata, TopicPartition, partition_for
from groupcoord.protocol.messages import OffsetCommitRequest

log = logging.getLogger(__name__)

PER_COMMIT = 10


def add_arguments(parser: argparse.ArgumentParser) -> None:
    """Options of this benchmark."""
    common.add_common_arguments(parser)
    parser.add_argument("--levels", type=common.ints, default=None,
                        help="total groups per level (default 1k,10k,50k,100k)")
    parser.add_argument("--partitions", type=int, default=4, help="partition actors")
    parser.add_argument("--clients", type=int, default=32, help="concurrent committing clients")
    parser.add_argument("--duration", type=float, default=None, help="seconds per throughput trial (default 2)")
    parser.add_argument("--drivers", type=int, default=2, help="client processes")


def _sizes(args: argparse.Namespace) -> dict:
    return {
        "levels": args.levels or common.preset(args, [1000, 10_000, 50_000, 100_000], [1000, 5000], [100, 400]),
        "partitions": args.partitions if not args.tiny else 2,
        "clients": args.clients if not args.tiny else 4,
        "duration": args.duration or common.preset(args, 2.0, 1.0, 0.4),
        "trials": common.trials(args),
        "drivers": args.drivers,
    }


def _request(m: clients.MemberRef, offset: int) -> OffsetCommitRequest:
    tps = {TopicPartition(clients.TOPIC, p): OffsetAndMetadata(offset) for p in range(PER_COMMIT)}
    return OffsetCommitRequest(m.group, tps, m.generation, m.member_id)


async def create_groups(callers: list, names: list[str], num_partitions: int, chunk: int = 2000) -> list:
    """Form one-member groups and commit 10 offsets for each; their members."""
    groups = [(g, partition_for(g, num_partitions), 1) for g in names]
    formed = await clients.form_groups(callers, groups, session_ms=1_800_000, chunk=chunk)
    members = [ms[0] for ms in formed]
    by_partition: dict[int, list] = {}
    for m in members:
        by_partition.setdefault(m.partition, []).append(m)

    async def commit_all(p: int, ms: list) -> None:
        for lo in range(0, len(ms), chunk):
            resps = await callers[p].batch([("commit_offsets", _request(m, 1)) for m in ms[lo : lo + chunk]])
            if any(e != Errors.NONE for r in resps for e in r.errors.values()):
                raise RuntimeError("a first commit failed")

    await asyncio.gather(*(commit_all(p, ms) for p, ms in by_partition.items()))
    return members


async def store_members(state: dict, members: list) -> int:
    """Keep the members in this driver process for the next trials."""
    state["members"] = members
    return len(members)


async def random_commits(state: dict, callers: list, n_clients: int, start_at: float, end_at: float,
                         seed: int) -> dict:
    """`n_clients` loops, each committing to a random member's group until `end_at` (coalesced per partition)."""
    members = state["members"]
    callers = [common.CoalescingCaller(c.handle) for c in callers]
    rng = random.Random(seed)
    start_at, end_at, late_s = common.own_window(start_at, end_at, 0.3)
    await asyncio.sleep(max(0.0, start_at - 0.3 - time.time()))

    async def one() -> tuple[int, int, list[float], int]:
        count = errors = successes = 0
        latencies = []
        offset = 1
        while time.time() < end_at:
            m = members[rng.randrange(len(members))]
            offset += 1
            t = time.perf_counter()
            resp = await callers[m.partition]("commit_offsets", _request(m, offset))
            latency = time.perf_counter() - t
            if any(e != Errors.NONE for e in resp.errors.values()):
                errors += 1
                continue
            successes += 1
            if start_at <= time.time() <= end_at:
                count += 1
                latencies.append(latency)
        return count, errors, latencies, successes

    results = await asyncio.gather(*(one() for _ in range(n_clients)))
    return {"requests": sum(r[0] for r in results), "errors": sum(r[1] for r in results),
            "acknowledged": sum(r[3] for r in results),  # in the window or not
            "latencies": [x for r in results for x in r[2]], "late_s": late_s}


def throughput(svc: Any, drivers: list, sz: dict, seed: int) -> dict:
    """One trial of random commits from every driver; commits/s and latency."""
    callers = [common.ActorCaller(h) for h in svc.partitions]
    start_at = time.time() + 1.0
    end_at = start_at + sz["duration"]
    per = [sz["clients"] // len(drivers) + (1 if i < sz["clients"] % len(drivers) else 0) for i in range(len(drivers))]
    refs = [d.run_local.remote(random_commits, callers, n, start_at, end_at, seed + i)
            for i, (d, n) in enumerate(zip(drivers, per, strict=True)) if n]
    runs = ray.get(refs)
    requests = sum(r["requests"] for r in runs)
    latencies = [x for r in runs for x in r["latencies"]]
    return {"commits_per_s": requests * PER_COMMIT / sz["duration"], "errors": sum(r["errors"] for r in runs),
            "acknowledged": sum(r["acknowledged"] for r in runs),
            "p50_ms": common.percentile(latencies, 50) * 1000, "p99_ms": common.percentile(latencies, 99) * 1000,
            "start_skew_s": max(r["late_s"] for r in runs)}


def run(args: argparse.Namespace) -> dict:
    """Grow the number of groups level by level; measure commit throughput and actor memory at each."""
    sz = _sizes(args)
    out: dict[str, Any] = {"sizes": sz, "levels": []}
    p = sz["partitions"]
    with common.work_dir(args, "scale") as base:
        drivers = common.start_drivers(sz["drivers"])
        try:
            with common.service(p, base / "svc", common.bench_config()) as svc:
                callers = [common.ActorCaller(h) for h in svc.partitions]
                pids = [s["pid"] for s in ray.get([h.status.remote() for h in svc.partitions])]
                asyncio.run(create_groups(callers, [f"warm-up-group-{i}" for i in range(2 * p)], p))
                rss0 = prev_rss = sum(common.read_rss(pid) for pid in pids)
                members: list = []
                for level in sz["levels"]:
                    todo = level - len(members)
                    common.step(f"creating {todo:,} groups (to {level:,}) over {p} partitions")
                    names = [f"scale-consumer-group-{i:07d}" for i in range(len(members), level)]
                    t = time.perf_counter()
                    members += asyncio.run(create_groups(callers, names, p))
                    create_s = time.perf_counter() - t
                    time.sleep(common.preset(args, 0.2, 0.2, 0.05))  # let the actors' memory settle
                    rss = sum(common.read_rss(pid) for pid in pids)
                    common.step(f"  {level:,} groups: commit throughput, {sz['trials']} x {sz['duration']} s")
                    ray.get([d.run_local.remote(store_members, members) for d in drivers])
                    trials = [throughput(svc, drivers, sz, seed=level * 10 + i) for i in range(sz["trials"])]
                    out["levels"].append({
                        "groups": level,
                        "created_per_s": todo / create_s,
                        "rss_bytes": rss,
                        "bytes_per_group": (rss - rss0) / level,
                        "bytes_per_added_group": (rss - prev_rss) / todo,
                        "commits_per_s": common.summarize([x["commits_per_s"] for x in trials]),
                        "p50_ms": common.summarize([x["p50_ms"] for x in trials]),
                        "p99_ms": common.summarize([x["p99_ms"] for x in trials]),
                        "errors": sum(x["errors"] for x in trials),
                        "acknowledged": sum(x["acknowledged"] for x in trials),
                        "groups_per_partition": [s["groups"] for s in
                                                 ray.get([h.status.remote() for h in svc.partitions])],
                    })
                    prev_rss = rss
        finally:
            common.stop_drivers(drivers)
    first = out["levels"][0]["commits_per_s"]["median"] if out["levels"] else 0.0
    for lv in out["levels"]:
        lv["vs_first_level"] = lv["commits_per_s"]["median"] / first if first else float("nan")
    return out


def report(results: dict) -> None:
    """Print throughput and memory per group at each level."""
    s = results["sizes"]
    rows = [[f"{lv['groups']:,}", f"{min(lv['groups_per_partition']):,}-{max(lv['groups_per_partition']):,}",
             f"{lv['created_per_s']:,.0f}", common.fmt_rate(lv["commits_per_s"]),
             common.fmt_ratio(lv["vs_first_level"]),
             f"{lv['p50_ms']['median']:.0f}/{lv['p99_ms']['median']:.0f}", f"{lv['bytes_per_group']:,.0f}",
             f"{lv['bytes_per_added_group']:,.0f}",
             f"{lv['rss_bytes'] / 2**20:,.0f}", lv["errors"]]
            for lv in results["levels"]]
    common.print_table(
        f"{s['partitions']} partition actors; groups of 1 member with {PER_COMMIT} offsets; {s['clients']} clients "
        f"commit {PER_COMMIT} offsets to random groups (coalesced), {s['trials']} x {s['duration']} s",
        ["groups", "per partition", "created/s", "commits/s", "vs first", "p50/p99 ms", "bytes/group",
         "bytes/added group", "actors RSS MiB", "errors"],
        rows,
    )


def main(argv: list[str] | None = None) -> dict:
    """Run this benchmark from the command line."""
    return common.run_benchmark("scale", sys.modules[__name__], argv)


if __name__ == "__main__":
    main()
