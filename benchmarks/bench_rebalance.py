"""Rebalance latency of groups of 10, 100 and 1,000 members on one partition actor.

Members are simulated consumers spread over a few driver processes; each sends its own
JoinGroup and SyncGroup to the actor (one Ray call each, or, in the "coalesced" rows, sharing
`batch` calls with the other members of its process that ask in the same event-loop turn).
The leader runs the range assignor over everyone's subscription, as a Kafka leader would.

* rejoin: every member of a Stable group sends a JoinGroup with a changed subscription at the
  same moment; measured from the last JoinGroup sent to the last SyncGroup answered.
* crash: members heartbeat (batched per process); one member stops without leaving. Measured
  from its last answered heartbeat until every other member has synced the new generation,
  which includes the session timeout and up to one heartbeat interval for members to notice.

Baselines: the same member code against the pure shard in-process (the PartitionActor class
without Ray, same log and fsync policy), hosted in one driver process; and Ray's floor for the
per-call rejoin: the same members' calls to an actor that is nothing but the group's barriers
(ray_floor.BarrierGroup: JoinGroups answered once all have joined, SyncGroups once the leader's
has come), no coordinator behind it.
"""

from __future__ import annotations

import argparse
import asyncio
import heapq
import itertools
import logging
import sys
import time
from typing import Any

import ray

from benchmarks import clients, common, ray_floor
from groupcoord.protocol import Errors
from groupcoord.protocol.assignors import assign_metadata
from groupcoord.protocol.messages import HeartbeatRequest, SyncGroupRequest

log = logging.getLogger(__name__)

TARGET_S = 0.5  # issue 30's goal, per call and coalesced
REJOIN_SESSION_MS = 30_000


def add_arguments(parser: argparse.ArgumentParser) -> None:
    """Options of this benchmark."""
    common.add_common_arguments(parser)
    parser.add_argument("--sizes", type=common.ints, default=None, help="group sizes (default 10,100,1000)")
    parser.add_argument("--session-ms", type=int, default=2000, help="session timeout of the crash test")
    parser.add_argument("--interval-ms", type=int, default=400, help="heartbeat interval of the crash test")
    parser.add_argument("--drivers", type=int, default=2, help="client processes the members are spread over")
    parser.add_argument("--no-crash", action="store_true", help="skip the crash test")


def _sizes(args: argparse.Namespace) -> dict:
    return {
        "sizes": args.sizes or common.preset(args, [10, 100, 1000], [1000], [6]),
        "trials": common.trials(args),
        "session_ms": args.session_ms if not args.tiny else 600,
        "interval_ms": args.interval_ms if not args.tiny else 150,
        "drivers": args.drivers,
        "crash": not args.no_crash,
    }


def subscription(version: int, size: int) -> bytes:
    """The subscription of rejoin round `version`: one more topic every other round (each of `size` partitions)."""
    return clients.subscription([f"topic-{i}" for i in range(1 + version % 2)])


def leader_assign(join: Any, size: int) -> dict[str, bytes]:
    """The leader's job: the range assignor over the members' subscriptions (topics of `size` partitions)."""
    metadata = {m.member_id: m.metadata for m in join.members}
    return assign_metadata(join.protocol_name or "range", {"topic-0": size, "topic-1": size}, metadata)


def _wrap(callers: list, coalesce: bool) -> list:
    if coalesce:
        return [common.CoalescingCaller(c.handle) for c in callers]
    return callers


async def _member_rebalance(caller: Any, m: clients.MemberRef, metadata: bytes, session_ms: int,
                            size: int) -> dict:
    """One member's JoinGroup then SyncGroup; the leader assigns in between."""
    t_join = time.time()
    req = clients.join_request(m.group, m.member_id, session_ms=session_ms, metadata=metadata)
    join = await caller("join_group", req)
    t_joined = time.time()
    if join.error != Errors.NONE:
        return {"error": join.error.name, "join_sent": t_join}
    assign_s = 0.0
    assignments: dict[str, bytes] = {}
    if join.leader == join.member_id:
        t = time.perf_counter()
        assignments = leader_assign(join, size)
        assign_s = time.perf_counter() - t
    sync = await caller("sync_group", SyncGroupRequest(m.group, join.generation_id, m.member_id, None, "consumer",
                                                       join.protocol_name, assignments))
    return {"error": None if sync.error == Errors.NONE else sync.error.name, "join_sent": t_join,
            "joined": t_joined, "synced": time.time(), "generation": join.generation_id, "assign_s": assign_s,
            "leader": bool(assignments)}


async def rejoin_round(callers: list, members: list, version: int, start_at: float, coalesce: bool,
                       size: int) -> list[dict]:
    """Every member rejoins with subscription `version` at `start_at`, then syncs; per-member timings."""
    callers = _wrap(callers, coalesce)
    metadata = subscription(version, size)
    await asyncio.sleep(max(0.0, start_at - time.time()))
    return await asyncio.gather(*(_member_rebalance(callers[m.partition], m, metadata, REJOIN_SESSION_MS, size)
                                  for m in members))


async def local_rejoin_round(state: dict, members: list, version: int, size: int) -> list[dict]:
    """rejoin_round against the in-process shard of this driver."""
    return await rejoin_round(state["callers"], members, version, time.time(), False, size)


async def crash_round(callers: list, members: list, victim: str | None, crash_at: float, end_at: float,
                      session_ms: int, interval_s: float, coalesce: bool, size: int) -> dict:
    """Heartbeat `members` (batched per tick); `victim` stops at `crash_at`; the rest rejoin when told to."""
    join_callers = _wrap(callers, coalesce)
    metadata = subscription(0, size)
    heap: list[tuple[float, int, clients.MemberRef]] = []
    seq = itertools.count()
    gen = {m.member_id: m.generation for m in members}
    start_gen = max(gen.values())
    out: dict[str, Any] = {"victim_last_ok": None, "detected": None, "rebalances": [], "errors": [],
                           "done": {}}
    tasks: set[asyncio.Task] = set()
    now = time.time()
    for i, m in enumerate(members):
        heapq.heappush(heap, (now + (i * 0.618 % 1.0) * interval_s, next(seq), m))

    async def rejoin(m: clients.MemberRef) -> None:
        ref = clients.MemberRef(m.group, m.member_id, gen[m.member_id], m.partition)
        r = await _member_rebalance(join_callers[m.partition], ref, metadata, session_ms, size)
        out["rebalances"].append(r)
        if r["error"] is None:
            gen[m.member_id] = r["generation"]
            out["done"][m.member_id] = r["synced"]
        heapq.heappush(heap, (time.time() + interval_s, next(seq), m))

    async def beat(p: int, due: list[clients.MemberRef], sent: float) -> None:
        reqs = [("heartbeat", HeartbeatRequest(m.group, gen[m.member_id], m.member_id)) for m in due]
        resps = await callers[p].batch(reqs)
        done = time.time()
        for m, r in zip(due, resps, strict=True):
            if r.error == Errors.NONE:
                if m.member_id == victim:
                    out["victim_last_ok"] = done
                heapq.heappush(heap, (sent + interval_s, next(seq), m))
            elif r.error == Errors.REBALANCE_IN_PROGRESS:
                if out["detected"] is None:
                    out["detected"] = done
                spawn(rejoin(m))
            else:
                out["errors"].append(r.error.name)

    def spawn(coro: Any) -> None:
        task = asyncio.ensure_future(coro)
        tasks.add(task)
        task.add_done_callback(tasks.discard)

    while time.time() < end_at:
        now = time.time()
        due: dict[int, list[clients.MemberRef]] = {}
        while heap and heap[0][0] <= now:
            m = heapq.heappop(heap)[2]
            if m.member_id == victim and now >= crash_at:
                continue  # crashed: never heard of again
            due.setdefault(m.partition, []).append(m)
        for p, ms in due.items():
            spawn(beat(p, ms, now))
        survivors = len(members) - (1 if victim else 0)
        if now > crash_at and len(out["done"]) >= survivors:
            break
        await asyncio.sleep(0.01)
    if tasks:
        await asyncio.wait(tasks, timeout=5)
    out["start_generation"] = start_gen
    out["members"] = len(members)
    return out


async def local_crash_round(state: dict, members: list, victim: str, crash_at: float, end_at: float,
                            session_ms: int, interval_s: float, size: int) -> dict:
    """crash_round against the in-process shard of this driver."""
    return await crash_round(state["callers"], members, victim, crash_at, end_at, session_ms, interval_s, False,
                             size)


def summarize_rejoin(results: list[dict]) -> dict:
    """Last JoinGroup sent -> last SyncGroup answered, and its parts, from per-member timings."""
    errors = [r["error"] for r in results if r.get("error")]
    ok = [r for r in results if not r.get("error")]
    if not ok or errors:
        return {"errors": errors, "rebalance_s": float("nan")}
    last_join = max(r["join_sent"] for r in ok)
    return {
        "errors": [],
        "rebalance_s": max(r["synced"] for r in ok) - last_join,
        "join_phase_s": max(r["joined"] for r in ok) - last_join,
        "assign_s": max(r["assign_s"] for r in ok),
        "generations": sorted({r["generation"] for r in ok}),
    }


def summarize_crash(parts: list[dict], session_s: float) -> dict:
    """Crash (victim's last answered heartbeat) -> every survivor synced in a newer generation."""
    victim_last = next((p["victim_last_ok"] for p in parts if p["victim_last_ok"] is not None), None)
    done = {k: v for p in parts for k, v in p["done"].items()}
    survivors = sum(p["members"] for p in parts) - 1
    errors = [e for p in parts for e in p["errors"]] + [r["error"] for p in parts for r in p["rebalances"]
                                                        if r["error"]]
    rebalances = [r for p in parts for r in p["rebalances"] if r["error"] is None]
    detected = min((p["detected"] for p in parts if p["detected"]), default=None)
    if victim_last is None or len(done) < survivors:
        return {"errors": errors, "synced": len(done), "survivors": survivors, "new_generation_s": float("nan")}
    last = max(done.values())
    last_join = max(r["join_sent"] for r in rebalances)
    return {
        "errors": errors,
        "synced": len(done),
        "survivors": survivors,
        "new_generation_s": last - victim_last,
        "after_session_s": last - victim_last - session_s,
        "detected_after_s": (detected - victim_last) if detected else float("nan"),
        "last_join_to_last_sync_s": last - last_join,
    }


def run(args: argparse.Namespace) -> dict:
    """For each size: rejoin rounds (actor per-call, actor coalesced, in-process), then crash rounds."""
    sz = _sizes(args)
    config = common.bench_config()
    out: dict[str, Any] = {"sizes": sz, "rows": []}
    session_s, interval_s = sz["session_ms"] / 1000, sz["interval_ms"] / 1000
    with common.work_dir(args, "rebalance") as base:
        drivers = common.start_drivers(sz["drivers"] + 1)
        host, drivers = drivers[0], drivers[1:]
        barrier = ray_floor.start(ray_floor.BarrierGroup)[0]
        try:
            ray.get(host.run_local.remote(clients.local_open, str(base / "local"), config))
            with common.service(1, base / "svc", config) as svc:
                callers = [common.ActorCaller(h) for h in svc.partitions]
                for size in sz["sizes"]:
                    row: dict[str, Any] = {"size": size}
                    out["rows"].append(row)
                    common.step(f"{size} members: forming the groups")
                    group = common.group_names(f"rebalance-{size}", 1, 0, 1)[0]
                    members = asyncio.run(clients.form_groups(callers, [(group, 0, size)], REJOIN_SESSION_MS))[0]
                    local = ray.get(host.run_local.remote(_local_form, [(group, 0, size)], REJOIN_SESSION_MS))[0]
                    shares = common.split(members, len(drivers))
                    rounds = {"actor": 0, "local": 0}  # each round changes the subscription of the last
                    for mode in ("per-call", "coalesced", "in-process"):
                        trials = []
                        for _ in range(sz["trials"]):
                            shard = "local" if mode == "in-process" else "actor"
                            rounds[shard] += 1
                            version = rounds[shard]
                            if mode == "in-process":
                                res = ray.get(host.run_local.remote(local_rejoin_round, local, version, size))
                            else:
                                start_at = time.time() + 0.5
                                refs = [d.run.remote(rejoin_round, callers, share, version, start_at,
                                                     mode == "coalesced", size)
                                        for d, share in zip(drivers, shares, strict=True) if share]
                                res = [r for part in ray.get(refs) for r in part]
                            trials.append(summarize_rejoin(res))
                        row[f"rejoin_{mode}"] = _agg(trials, "rebalance_s")
                        common.step(f"  rejoin {mode}: {row[f'rejoin_{mode}']['median']:.3f} s (median)")
                    row["rejoin_ray-floor"] = _agg([_floor_round(barrier, drivers, shares, size)
                                                    for _ in range(sz["trials"])], "rebalance_s")
                    common.step(f"  rejoin ray-floor: {row['rejoin_ray-floor']['median']:.3f} s (median)")
                    if sz["crash"]:
                        modes = ("per-call", "coalesced", "in-process")
                        n = max(1, sz["trials"] - 1)
                        # Tiny (the smoke test) starts every mode's trials at once, each on a group of its own (a few
                        # members heartbeating load nothing): it waits out one session timeout, not one per trial.
                        launched = ({mode: [_crash_launch(svc, drivers, host, size, mode, t, sz) for t in range(n)]
                                     for mode in modes} if args.tiny else {})
                        for mode in modes:
                            trials = [_crash_finish(launched[mode][t] if args.tiny else
                                                    _crash_launch(svc, drivers, host, size, mode, t, sz), sz)
                                      for t in range(n)]
                            row[f"crash_{mode}"] = _agg(trials, "new_generation_s")
                            common.step(f"  crash {mode}: {row[f'crash_{mode}']['median']:.3f} s (median)")
            ray.get(host.run_local.remote(clients.local_close))
        finally:
            ray_floor.stop([barrier])
            common.stop_drivers([host, *drivers])
    out["session_s"] = session_s
    out["interval_s"] = interval_s
    return out


def _floor_round(barrier: Any, drivers: list, shares: list, size: int) -> dict:
    """One per-call rejoin of the same members against the barrier-only actor (ray_floor): Ray's floor."""
    ray.get(barrier.expect.remote(size))
    start_at = time.time() + 0.5
    refs = [d.run.remote(rejoin_round, [common.ActorCaller(barrier)], share, 1, start_at, False, size)
            for d, share in zip(drivers, shares, strict=True) if share]
    return summarize_rejoin([r for part in ray.get(refs) for r in part])


async def _local_form(state: dict, groups: list, session_ms: int) -> list:
    return await clients.form_groups(state["callers"], groups, session_ms)


def _crash_launch(svc: Any, drivers: list, host: Any, size: int, mode: str, trial: int, sz: dict) -> list:
    """Form a group of `size` and have its members heartbeat (one of them stops after a while): the pending
    crash rounds, for `_crash_finish`."""
    session_s, interval_s = sz["session_ms"] / 1000, sz["interval_ms"] / 1000
    group = common.group_names(f"crash-{size}-{mode}-{trial}", 1, 0, 1)[0]
    groups = [(group, 0, size)]
    crash_wait = 3 * interval_s + 0.3
    end_wait = crash_wait + session_s + 4 * interval_s + 3.0 + size / 300
    if mode == "in-process":
        members = ray.get(host.run_local.remote(_local_form, groups, sz["session_ms"]))[0]
        now = time.time()
        return [host.run_local.remote(local_crash_round, members, members[-1].member_id, now + crash_wait,
                                      now + end_wait, sz["session_ms"], interval_s, size)]
    else:
        callers = [common.ActorCaller(h) for h in svc.partitions]
        members = asyncio.run(clients.form_groups(callers, groups, sz["session_ms"]))[0]
        victim = members[-1]
        shares = common.split(members[:-1], len(drivers))
        shares[0].append(victim)
        now = time.time()
        return [d.run.remote(crash_round, callers, share, victim.member_id if victim in share else None,
                             now + crash_wait, now + end_wait, sz["session_ms"], interval_s, mode == "coalesced",
                             size)
                for d, share in zip(drivers, shares, strict=True) if share]


def _crash_finish(refs: list, sz: dict) -> dict:
    """The outcome of the crash rounds `_crash_launch` started."""
    return summarize_crash(ray.get(refs), sz["session_ms"] / 1000)


def _agg(trials: list[dict], key: str) -> dict:
    values = [t[key] for t in trials if t[key] == t[key]]
    s = common.summarize(values)
    s["errors"] = [e for t in trials for e in t["errors"]]
    s["trials"] = trials
    return s


def _table_rows(results: dict, kind: str, parts: tuple[str, ...], ratio_digits: int) -> list[list]:
    """One row per group size and mode of the `kind` ("rejoin" or "crash") measurements: median (min-max),
    the first trial's `parts` (seconds), the ratio to the in-process median, and the errors."""
    rows = []
    for row in results["rows"]:
        base = row[f"{kind}_in-process"]["median"]
        for mode in ("per-call", "coalesced", "in-process", "ray-floor"):
            r = row.get(f"{kind}_{mode}")
            if r is None:
                continue
            first = r["trials"][0] if r["trials"] else {}
            rows.append([
                f"{row['size']:,} members, {'Ray floor, per-call' if mode == 'ray-floor' else mode}",
                f"{r['median']:.3f} ({r['min']:.3f}-{r['max']:.3f})",
                *(f"{first.get(part, float('nan')):.3f}" for part in parts),
                f"{r['median'] / base:.{ratio_digits}f}x" if base else "-",
                len(r["errors"]),
            ])
    return rows


def report(results: dict) -> None:
    """Print rejoin and crash latencies per group size, against the in-process shard."""
    rows = _table_rows(results, "rejoin", ("join_phase_s", "assign_s"), ratio_digits=1)
    common.print_table("rejoin: last JoinGroup sent -> last SyncGroup answered, seconds, median (min-max)",
                       ["group", "rebalance s", "join phase s", "leader assign s", "vs in-process", "errors"], rows)
    if any("crash_per-call" in row for row in results["rows"]):
        rows = _table_rows(results, "crash", ("after_session_s", "detected_after_s", "last_join_to_last_sync_s"),
                           ratio_digits=2)
        common.print_table(
            f"member crash -> every survivor synced in the new generation, seconds (session "
            f"{results['session_s']:.1f} s, heartbeat interval {results['interval_s']:.1f} s)",
            ["group", "crash -> new gen", "beyond session", "noticed after", "last join->sync", "vs in-process",
             "errors"],
            rows,
        )
    big = [row for row in results["rows"] if row["size"] >= 1000]
    for row in big:
        floor = row.get("rejoin_ray-floor")
        for mode in ("per-call", "coalesced"):
            v = row[f"rejoin_{mode}"]["median"]
            measured = f"{v:.2f} s" + (f"; Ray's floor for the same calls, per call: {floor['median']:.2f} s"
                                       if floor and mode == "per-call" else "")
            common.print_target(f"{row['size']:,}-member rebalance <= {TARGET_S:g} s from last join to last sync "
                                f"({mode})", measured, v <= TARGET_S)


def main(argv: list[str] | None = None) -> dict:
    """Run this benchmark from the command line."""
    return common.run_benchmark("rebalance", sys.modules[__name__], argv)


if __name__ == "__main__":
    main()
