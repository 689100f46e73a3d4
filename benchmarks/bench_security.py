"""The cost of authorization: durable commits/s with authorization on and off, in one run.

Two services side by side on the same Ray (one with `authorization=True`, a principal with
READ on its groups and topics, one without), driven alternately trial by trial with the same
load, so that the machine's other load falls on both alike: async clients in the driver, each
committing `per_commit` partitions per OffsetCommit, one request at a time, through the
partition actors' `batch` method, either coalesced (the requests issued together share a call,
as the client library's RequestCoalescer does for a process's members) or one call per request
(the clients of the authorized side send their credentials with every call, as the client library
does). The figure is the median of the per-pair ratios on/off, per mode. Every trial ends by
fetching each client's offsets: they must equal its last acknowledged commit.
"""

from __future__ import annotations

import argparse
import asyncio
import statistics
import time
from typing import Any

from benchmarks import common
from groupcoord.actors import AclBinding, AdminClient, Credentials, start, stop
from groupcoord.actors.client.wire import OnePickle
from groupcoord.protocol import Errors, OffsetAndMetadata, TopicPartition
from groupcoord.protocol.messages import OffsetCommitRequest, OffsetFetchRequest

ADMIN = Credentials("User:admin", "bench-admin-secret-0123456789")
TOPIC = "bench-topic"


def add_arguments(parser: argparse.ArgumentParser) -> None:
    """Options of this benchmark."""
    common.add_common_arguments(parser, default_trials=5)
    parser.add_argument("--partitions", type=int, default=2, help="partition actors per service")
    parser.add_argument("--clients", type=int, default=None, help="concurrent clients (default 32)")
    parser.add_argument("--per-commit", type=int, default=10, help="partitions per OffsetCommit")
    parser.add_argument("--duration", type=float, default=None, help="seconds per trial (default 4)")


class _Link:
    """One process's link to one partition actor: the requests issued in one event-loop turn share a `batch`
    call, as the client library's RequestCoalescer shares one among a process's members."""

    def __init__(self, handle: Any, kw: dict) -> None:
        self.handle, self.kw = handle, kw
        self.queue: list[tuple[Any, asyncio.Future]] = []
        self.scheduled = False
        self.tasks: set[asyncio.Task] = set()

    def __call__(self, req: Any) -> asyncio.Future:
        loop = asyncio.get_running_loop()
        future = loop.create_future()
        self.queue.append((req, future))
        if not self.scheduled:
            self.scheduled = True
            loop.call_soon(self._send)
        return future

    def _send(self) -> None:
        self.scheduled = False
        queue, self.queue = self.queue, []
        task = asyncio.ensure_future(self._trip(queue))
        self.tasks.add(task)
        task.add_done_callback(self.tasks.discard)

    async def _trip(self, queue: list) -> None:
        results = await self.handle.batch.remote(OnePickle([("commit_offsets", r) for r, _ in queue]), **self.kw)
        for (_, future), result in zip(queue, results, strict=True):
            future.set_result(result)


async def _trial(handles: list, groups: list[str], per_commit: int, duration: float, cred: Any,
                 coalesced: bool) -> dict:
    """Clients commit as fast as answers come for `duration` s; requests, commits, errors, wrong fetches."""
    tps = [TopicPartition(TOPIC, p) for p in range(per_commit)]
    kw = {} if cred is None else {"credentials": cred.wire}  # as the client library sends them
    links = {id(h): _Link(h, kw) for h in handles}
    done = {"requests": 0, "errors": 0}
    last: dict[str, int] = {}
    deadline = time.perf_counter() + duration

    async def client(group: str, handle: Any) -> None:
        n = 0
        while time.perf_counter() < deadline:
            n += 1
            req = OffsetCommitRequest(group, {tp: OffsetAndMetadata(n) for tp in tps})
            if coalesced:
                resp = await links[id(handle)](req)
            else:
                (resp,) = await handle.batch.remote(OnePickle([("commit_offsets", req)]), **kw)
            if all(e == Errors.NONE for e in resp.errors.values()):
                last[group] = n
                done["requests"] += 1
            else:
                done["errors"] += 1

    started = time.perf_counter()
    await asyncio.gather(*(client(g, h) for g, h in zip(groups, handles, strict=True)))
    seconds = time.perf_counter() - started
    wrong = 0
    for g, h in zip(groups, handles, strict=True):
        fetched = await h.fetch_offsets.remote(OffsetFetchRequest(g, tps), **kw)
        if g in last and any(p.offset != last[g] for p in fetched.offsets.values()):
            wrong += 1
    commits = done["requests"] * per_commit
    return {**done, "commits": commits, "seconds": seconds, "commits_per_s": commits / seconds,
            "wrong_after_fetch": wrong}


def run(args: argparse.Namespace) -> dict:
    """Start both services, run paired trials alternately, stop them."""
    clients = args.clients or common.preset(args, 32, 16, 4)
    duration = args.duration or common.preset(args, 4.0, 2.0, 0.5)
    trials = common.trials(args, 5)
    out: dict[str, Any] = {"partitions": args.partitions, "clients": clients, "per_commit": args.per_commit,
                           "duration_s": duration}
    with common.work_dir(args, "security") as work:
        sides = {}
        for name, authorization in (("off", False), ("on", True)):
            namespace = f"gc-bench-security-{name}"
            svc = start(num_partitions=args.partitions, storage_path=str(work / name), namespace=namespace,
                        config=common.bench_config(), authorization=authorization, super_users=["User:admin"],
                        admin_credentials=ADMIN if authorization else None)
            cred = None
            if authorization:
                admin = AdminClient(svc, credentials=ADMIN)
                cred = admin.create_principal("bench")
                admin.create_acls([AclBinding("GROUP", "bench-", "PREFIXED", cred.principal, "READ"),
                                   AclBinding("TOPIC", TOPIC, "LITERAL", cred.principal, "READ")])
            groups = common.spread_groups("bench-", clients, args.partitions)
            handles = [svc.find_coordinator(g)[1] for g in groups]
            sides[name] = (namespace, handles, groups, cred)
        try:
            for mode in ("coalesced", "per-call"):
                for side in ("off", "on"):  # untimed warm-up of both
                    _, handles, groups, cred = sides[side]
                    asyncio.run(_trial(handles, groups, args.per_commit, min(duration, 1.0), cred,
                                       mode == "coalesced"))
                out[mode] = _pairs(sides, args.per_commit, duration, trials, mode)
        finally:
            for namespace, *_ in sides.values():
                stop(namespace)
    return out


def _pairs(sides: dict, per_commit: int, duration: float, trials: int, mode: str) -> dict:
    """Paired trials, off and on alternately first; the median on/off ratio."""
    pairs = []
    for i in range(trials):
        pair = {}
        for side in (("off", "on") if i % 2 == 0 else ("on", "off")):
            _, handles, groups, cred = sides[side]
            pair[side] = asyncio.run(_trial(handles, groups, per_commit, duration, cred, mode == "coalesced"))
        pair["ratio_on_off"] = pair["on"]["commits_per_s"] / pair["off"]["commits_per_s"]
        pairs.append(pair)
        common.step(f"{mode} pair {i + 1}/{trials}: off {pair['off']['commits_per_s']:,.0f}/s, "
                    f"on {pair['on']['commits_per_s']:,.0f}/s, ratio {pair['ratio_on_off']:.3f}")
    out: dict[str, Any] = {"pairs": pairs}
    for side in ("off", "on"):
        out[side] = common.summarize([p[side]["commits_per_s"] for p in pairs])
    out["ratio_median"] = statistics.median(p["ratio_on_off"] for p in pairs)
    out["overhead_percent"] = (1 - out["ratio_median"]) * 100
    out["errors"] = sum(p[s]["errors"] for p in pairs for s in ("off", "on"))
    out["wrong_after_fetch"] = sum(p[s]["wrong_after_fetch"] for p in pairs for s in ("off", "on"))
    return out


def report(results: dict) -> None:
    """Print the pairs and the verdicts, for the client library's coalesced path and one call per request."""
    for mode in ("coalesced", "per-call"):
        r = results[mode]
        rows = [[str(i + 1), f"{p['off']['commits_per_s']:,.0f}", f"{p['on']['commits_per_s']:,.0f}",
                 f"{p['ratio_on_off']:.3f}"] for i, p in enumerate(r["pairs"])]
        common.print_table(f"{mode}: commits/s, {results['clients']} clients x {results['per_commit']} partitions "
                           f"per commit, {results['partitions']} partition actors",
                           ["pair", "authorization off", "on", "on/off"], rows)
        common.print_target(f"{mode}: authorization costs at most 5% of commits/s",
                            f"{r['overhead_percent']:.1f}% (median on/off {r['ratio_median']:.3f})",
                            r["overhead_percent"] <= 5.0)
        print(f"errors {r['errors']}, wrong after fetch {r['wrong_after_fetch']}")


def main(argv: list[str] | None = None) -> None:
    """`python -m benchmarks security`."""
    common.run_benchmark("security", __import__(__name__, fromlist=["run"]), argv)


if __name__ == "__main__":
    main()
