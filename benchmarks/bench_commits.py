"""Durable offset-commit throughput through partition actors (fsync "always", group commit).

Clients are consumer-group members (one group each, joined and synced) committing N partitions
per OffsetCommit, one request at a time each, as async callers spread over a few driver
processes; each request is one Ray actor call. In the "coalesced" rows a driver's clients go
through the client library's RequestCoalescer, as GroupMembers in one process do: while one `batch`
actor call is in flight, the requests that arrive wait and go together in the next (as a Kafka
client's requests share a connection). A "commit" is one partition's offset made durable
(Kafka's unit): commits/s = requests/s x partitions per commit.

Baselines in the same run, paired trial by trial: the same clients against the pure shard
in-process (the PartitionActor class without Ray, over the same PartitionLog and fsync policy,
hosted in a driver process so that it runs at the same lowered priority as Ray's workers), and
the raw log's durable append rate (one thread appends batches, another flushes+fsyncs), and
for the most clients with the biggest commits Ray's floor: the same clients against as many echo
actors that answer each commit at once (ray_floor), no coordinator behind them.
Every trial ends by fetching each client's offsets: they must equal its last acknowledged commit.
"""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import logging
import sys
import threading
import time
from pathlib import Path
from typing import Any

import ray

from benchmarks import clients, common, ray_floor
from groupcoord.protocol.records import OffsetCommitKey, OffsetCommitValue, Record
from groupcoord.storage import PartitionLog

log = logging.getLogger(__name__)

TARGET_COMMITS = 20_000  # durable offsets/s per partition actor
IN_PROCESS_AT_FILING = 121_000  # issue 30: the in-process shard's offsets/s (64 clients, 100 per commit)
TARGET_IN_PROCESS = 2 * IN_PROCESS_AT_FILING
TARGET_COALESCED = 0.8  # coalesced through Ray, as a fraction of the in-process shard
# The clients only commit (a commit refreshes the session), and not every client commits in every
# cell: a session longer than the whole run keeps the idle ones in their groups.
SESSION_MS = 1_800_000


def add_arguments(parser: argparse.ArgumentParser) -> None:
    """Options of this benchmark."""
    common.add_common_arguments(parser)
    parser.add_argument("--partitions", type=common.ints, default=None, help="partition actors (default 1,4,16)")
    parser.add_argument("--clients", type=common.ints, default=None, help="concurrent clients (default 1,4,16,64)")
    parser.add_argument("--per-commit", type=common.ints, default=None,
                        help="partitions per OffsetCommit (default 1,10,100)")
    parser.add_argument("--duration", type=float, default=None, help="seconds per trial (default 2)")
    parser.add_argument("--drivers", type=int, default=2, help="client processes (Ray actors) for the actor runs")


def _sizes(args: argparse.Namespace) -> dict:
    return {
        "partitions": args.partitions or common.preset(args, [1, 4, 16], [1], [1]),
        "clients": args.clients or common.preset(args, [1, 8, 64], [1, 16], [2]),
        "per_commit": args.per_commit or common.preset(args, [1, 10, 100], [100], [10]),
        "duration": args.duration or common.preset(args, 1.5, 0.7, 0.3),
        "trials": common.trials(args),
    }


def cells(sizes: dict) -> list[tuple[int, int, int, bool]]:
    """(partitions, clients, per_commit, coalesced): the full sweep on one partition, the most clients on
    more; then the largest commits again with each client process coalescing its requests."""
    out = []
    most, biggest = max(sizes["clients"]), max(sizes["per_commit"])
    for p in sizes["partitions"]:
        for k in sizes["per_commit"]:
            for c in sizes["clients"]:
                if p == 1 or c == most:
                    out.append((p, c, k, False))
        for c in sizes["clients"]:
            if c > 1 and (p == 1 or c == most):
                out.append((p, c, biggest, True))
    return out


# --- one trial --------------------------------------------------------------------------------


def _cell_result(runs: list[dict], per_commit: int, duration: float) -> dict:
    requests = sum(r["requests"] for r in runs)
    latencies = [x for r in runs for x in r["latencies"]]
    return {
        "requests": requests,
        "commits": requests * per_commit,
        "commits_per_s": requests * per_commit / duration,
        "requests_per_s": requests / duration,
        "p50_ms": common.percentile(latencies, 50) * 1000,
        "p99_ms": common.percentile(latencies, 99) * 1000,
        "errors": sum(r["errors"] for r in runs),
        "acknowledged": sum(r["acknowledged"] for r in runs),
        "requests_per_call": sum(r.get("requests_per_call", 1.0) for r in runs) / max(1, len(runs)),
        "start_skew_s": max(r["late_s"] for r in runs),
    }


def actor_trial(svc: Any, drivers: list[Any], members: list[clients.MemberRef], per_commit: int,
                duration: float, coalesce: bool = False) -> dict:
    """Run the clients in the driver processes against the service's partition actors."""
    callers = [common.ActorCaller(h) for h in svc.partitions]
    start_at = time.time() + 0.5  # time for every driver to receive its share (a late one shifts its window)
    end_at = start_at + duration
    shares = common.split(members, len(drivers))
    refs = [d.run.remote(clients.commit_loop, callers, share, per_commit, start_at, end_at, coalesce=coalesce)
            for d, share in zip(drivers, shares, strict=True) if share]
    runs = ray.get(refs)
    result = _cell_result(runs, per_commit, duration)
    last = {g: v for r in runs for g, v in r["last"].items()}
    result["wrong_after_fetch"] = asyncio.run(clients.check_committed(callers, members, per_commit, last))
    result.pop("latencies", None)
    return result


def floor_trial(floor: list[Any], drivers: list[Any], members: list[clients.MemberRef], per_commit: int,
                duration: float, coalesce: bool = False) -> dict:
    """The same clients against Ray's floor: echo actors that answer each commit at once (ray_floor)."""
    callers = [common.ActorCaller(h) for h in floor]
    start_at = time.time() + 0.5
    shares = common.split(members, len(drivers))
    refs = [d.run.remote(clients.commit_loop, callers, share, per_commit, start_at, start_at + duration,
                         coalesce=coalesce) for d, share in zip(drivers, shares, strict=True) if share]
    result = _cell_result(ray.get(refs), per_commit, duration)
    result.pop("latencies", None)
    return result


async def local_trial(state: dict, members: list[clients.MemberRef], per_commit: int, duration: float) -> dict:
    """Run the same clients in a driver's event loop against the in-process shard it hosts."""
    callers = state["callers"]
    start_at = time.time() + 0.05
    end_at = start_at + duration
    run = await clients.commit_loop(callers, members, per_commit, start_at, end_at)
    result = _cell_result([run], per_commit, duration)
    result["wrong_after_fetch"] = await clients.check_committed(callers, members, per_commit, run["last"])
    result.pop("latencies", None)
    return result


async def raw_trial(_state: dict, directory: str, per_commit: int, duration: float) -> dict:
    """raw_append_rate, run in a driver process (the same priority as the actors)."""
    return raw_append_rate(Path(directory), per_commit, duration)


# --- raw log baseline ------------------------------------------------------------------------


def raw_append_rate(directory: Path, per_commit: int, duration: float) -> dict:
    """Durable records/s of the bare PartitionLog: appends of `per_commit` records while a thread flushes."""
    plog = PartitionLog(directory, sync="always")
    batch = [Record(OffsetCommitKey("raw-group", clients.TOPIC, p), OffsetCommitValue(p, -1, "", 0, -1))
             for p in range(per_commit)]
    done = threading.Event()
    fsyncs = [0]

    def flusher() -> None:
        while not done.is_set():
            plog.flush()
            fsyncs[0] += 1

    worker = threading.Thread(target=flusher)
    start = time.perf_counter()
    first = plog.durable_offset
    worker.start()
    appends = 0
    while time.perf_counter() - start < duration:
        plog.append(batch)
        appends += 1
        if appends % 64 == 0:
            time.sleep(0)  # let the flusher take the GIL, as the actor's event loop would
    done.set()
    worker.join()
    durable = plog.durable_offset - first
    seconds = time.perf_counter() - start
    plog.close()
    return {"records_per_s": durable / seconds, "appends_per_s": appends / seconds,
            "flushes": fsyncs[0], "seconds": seconds}


# --- the run ---------------------------------------------------------------------------------


def run(args: argparse.Namespace) -> dict:
    """Run every cell against actors and (one partition) against the in-process shard, paired per trial."""
    sizes = _sizes(args)
    todo = cells(sizes)
    most = max(sizes["clients"])
    config = common.bench_config()
    out: dict[str, Any] = {"sizes": sizes, "cells": [], "raw": []}
    with common.work_dir(args, "commits") as base:
        drivers = common.start_drivers(args.drivers + 1)
        host, drivers = drivers[0], drivers[1:]  # host: the in-process shard and the raw log
        out["worker_nice"] = ray.get(host.nice.remote())
        try:
            common.step("raw log append rate (sync always, group commit by a flusher thread)")
            for k in sizes["per_commit"]:
                rates = [ray.get(host.run_local.remote(raw_trial, str(base / f"raw-{k}-{t}"), k, sizes["duration"]))
                         for t in range(sizes["trials"])]
                out["raw"].append({"per_commit": k, "trials": rates,
                                   "records_per_s": common.summarize([r["records_per_s"] for r in rates])})
            groups = [(g, 0, 1) for g in common.group_names("commit-client", most, 0, 1)]
            formed = ray.get(host.run_local.remote(clients.local_open, str(base / "local"), config, groups,
                                                   session_ms=SESSION_MS))
            local_members = [m[0] for m in formed]
            for p in sizes["partitions"]:
                mine = [c for c in todo if c[0] == p]
                if not mine:
                    continue
                common.step(f"{p} partition actor(s): forming {most} client groups")
                floor = ray_floor.start(ray_floor.EchoPartition, p)
                with contextlib.ExitStack() as stack:
                    stack.callback(ray_floor.stop, floor)
                    svc = stack.enter_context(common.service(p, base / f"svc-{p}", config))
                    callers = [common.ActorCaller(h) for h in svc.partitions]
                    names = common.spread_groups("commit-client", most, p)
                    groups = [(g, i % p, 1) for i, g in enumerate(names)]
                    members = [m[0] for m in asyncio.run(clients.form_groups(callers, groups, SESSION_MS))]
                    for n, (_, c, k, co) in enumerate(mine, 1):
                        how = ", coalesced" if co else ""
                        common.step(f"  [{n}/{len(mine)}] {p} partitions, {c} clients, {k} per commit{how}")
                        local = local_members[:c] if p == 1 else None
                        echo = floor if c == most and k == max(sizes["per_commit"]) else None
                        out["cells"].append(_measure(svc, drivers, host, members[:c], local, p, c, k, co, sizes,
                                                     echo))
            ray.get(host.run_local.remote(clients.local_close))
        finally:
            common.stop_drivers([host, *drivers])
    return out


def _measure(svc: Any, drivers: list[Any], host: Any, members: list, local_members: list | None,
             p: int, c: int, k: int, coalesce: bool, sizes: dict, floor: list[Any] | None = None) -> dict:
    actor_runs, local_runs, floor_runs = [], [], []
    for _ in range(sizes["trials"]):
        actor_runs.append(actor_trial(svc, drivers, members, k, sizes["duration"], coalesce))
        if local_members is not None:
            local_runs.append(ray.get(host.run_local.remote(local_trial, local_members, k, sizes["duration"])))
        if floor is not None:
            floor_runs.append(floor_trial(floor, drivers, members, k, sizes["duration"], coalesce))
    cell = {"partitions": p, "clients": c, "per_commit": k, "coalesced": coalesce,
            "actor": _summary(actor_runs), "local": _summary(local_runs) if local_runs else None,
            "floor": {"commits_per_s": common.summarize([r["commits_per_s"] for r in floor_runs])}
            if floor_runs else None,
            "actor_trials": actor_runs, "local_trials": local_runs, "floor_trials": floor_runs}
    if local_runs:
        ratios = [a["commits_per_s"] / b["commits_per_s"] for a, b in zip(actor_runs, local_runs, strict=True)
                  if b["commits_per_s"]]
        cell["ratio"] = common.summarize(ratios)
    return cell


def _summary(runs: list[dict]) -> dict:
    return {
        "commits_per_s": common.summarize([r["commits_per_s"] for r in runs]),
        "requests_per_s": common.summarize([r["requests_per_s"] for r in runs]),
        "p50_ms": common.summarize([r["p50_ms"] for r in runs]),
        "p99_ms": common.summarize([r["p99_ms"] for r in runs]),
        "errors": sum(r["errors"] for r in runs),
        "wrong_after_fetch": sum(r["wrong_after_fetch"] for r in runs),
        "requests_per_call": common.summarize([r["requests_per_call"] for r in runs]),
    }


def report(results: dict) -> None:
    """Print the commit tables and the targets."""
    s = results["sizes"]
    rows = []
    for c in results["cells"]:
        a, loc = c["actor"], c["local"]
        rows.append([
            f"{c['partitions']}p {c['clients']}c {c['per_commit']}/commit"
            + (f" coalesced ({a['requests_per_call']['median']:.1f}/call)" if c["coalesced"] else ""),
            common.fmt_rate(a["commits_per_s"]),
            f"{a['requests_per_s']['median']:,.0f}",
            f"{a['p50_ms']['median']:.1f}/{a['p99_ms']['median']:.1f}",
            common.fmt_rate(loc["commits_per_s"]) if loc else "-",
            f"{loc['p50_ms']['median']:.1f}/{loc['p99_ms']['median']:.1f}" if loc else "-",
            f"{common.fmt_ratio(c['ratio']['median'])} ({common.fmt_ratio(c['ratio']['min'])}-"
            f"{common.fmt_ratio(c['ratio']['max'])})" if "ratio" in c else "-",
            f"{a['errors']}/{a['wrong_after_fetch']}",
            *_floor_cells(c),
        ])
    common.print_table(
        f"durable offset commits (fsync always), {s['duration']}s x {s['trials']} trials; median (min-max)",
        ["partitions/clients/size", "actor commits/s", "req/s", "p50/p99 ms", "in-process commits/s",
         "p50/p99 ms", "actor/in-proc", "err/wrong", "Ray floor (echo) commits/s", "actor/floor"],
        rows,
    )
    common.print_table(
        "raw PartitionLog durable append rate (sync always, flusher thread)",
        ["records per append", "records/s"],
        [[r["per_commit"], common.fmt_rate(r["records_per_s"])] for r in results["raw"]],
    )
    print()
    _print_targets(results)


def _floor_cells(c: dict) -> list[str]:
    floor = c.get("floor")
    if not floor:
        return ["-", "-"]
    f = floor["commits_per_s"]["median"]
    return [common.fmt_rate(floor["commits_per_s"]),
            common.fmt_ratio(c["actor"]["commits_per_s"]["median"] / f) if f else "-"]


def _print_targets(results: dict) -> None:
    """Issue 30's commit goals: the in-process shard, coalesced calls against it, more actors than cores."""
    biggest, most = max(results["sizes"]["per_commit"]), max(results["sizes"]["clients"])
    cells = [c for c in results["cells"] if c["per_commit"] == biggest]

    def rate(c: dict, side: str = "actor") -> float:
        return c[side]["commits_per_s"]["median"]

    in_process = max((rate(c, "local") for c in cells if c["local"] and c["clients"] == most), default=0.0)
    common.print_target(f"in-process shard >= {TARGET_IN_PROCESS:,} offsets/s with {biggest}-partition commits "
                        f"(2x issue 30's {IN_PROCESS_AT_FILING:,})", f"{in_process:,.0f} at {most} clients",
                        in_process >= TARGET_IN_PROCESS)
    for coalesced in (False, True):
        how = "coalesced per client process" if coalesced else "one actor call per commit"
        by_p = {c["partitions"]: rate(c) for c in cells if c["coalesced"] == coalesced and c["clients"] == most}
        if not by_p:
            continue
        one = by_p.get(1, 0.0)
        common.print_target(f">= {TARGET_COMMITS:,} durable offsets/s per partition actor ({how})",
                            f"{one:,.0f} at {most} clients", one >= TARGET_COMMITS)
        if coalesced and in_process:
            common.print_target(f"coalesced through Ray >= {TARGET_COALESCED:.0%} of the in-process shard",
                                f"{one:,.0f} = {common.fmt_ratio(one / in_process)}",
                                one >= TARGET_COALESCED * in_process)
        counts = sorted(by_p)
        if len(counts) > 1:
            cores = results.get("machine", {}).get("cores", "?")
            never_less = all(by_p[n] >= by_p[m] for i, n in enumerate(counts) for m in counts[:i])
            floor = {c["partitions"]: c["floor"]["commits_per_s"]["median"] for c in cells
                     if c["coalesced"] == coalesced and c["clients"] == most and c.get("floor")}
            common.print_target(
                f"more partition actors than cores ({cores}) never commit less than fewer ({how})",
                ", ".join(f"{n}: {by_p[n]:,.0f}" for n in counts) + " offsets/s"
                + ("; Ray's echo floor " + ", ".join(f"{n}: {floor[n]:,.0f}" for n in sorted(floor))
                   if floor else ""), never_less)


def main(argv: list[str] | None = None) -> dict:
    """Run this benchmark from the command line."""
    return common.run_benchmark("commits", sys.modules[__name__], argv)


if __name__ == "__main__":
    main()
