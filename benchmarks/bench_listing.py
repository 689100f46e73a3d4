"""Group listing at scale: ListGroups and DescribeGroups over 100,000 groups, through Ray and in-process.

The groups are spread over the service's partition actors by the group-id hash: classic groups of
one member (joined and synced, a long session), a tenth of them left Empty by their member, and
1% consumer (KIP-848) groups of one member. Timed, each `trials` times (median kept):

* as a user calls it: AdminClient.list_groups() of everything, with a state filter (Empty) and a
  type filter (consumer) — the router fans ListGroups out to every partition actor;
* AdminClient.describe_groups() of every group id, in one call (the router sends each partition
  the ids it owns, as Kafka's admin client batches per coordinator) and 1,000 ids per call;
* the partitions' own ListGroups called directly (no router), to show what the router adds;
* `groupcoord groups list` (the CLI's first page, sorted by group id, with its total);
* the baseline, in this process: one pure shard (GroupCoordinator, no Ray, no disk) that holds
  every group, answering the same ListGroups and DescribeGroups (in requests of at most
  max_items_per_request ids, the most a shard accepts in one).

The timing starts once the machine is quiet again after the set-up (the partitions flushing the
groups they just created), at most 30 s later.

Target: ListGroups of all and DescribeGroups of all 100,000 groups, end to end through Ray,
each in under 1 s.
"""

from __future__ import annotations

import argparse
import asyncio
import os
import statistics
import sys
import time
from typing import Any, Callable

import ray

from benchmarks import clients, common
from groupcoord.protocol import Errors, GroupCoordinator, partition_for
from groupcoord.protocol.consumer.messages import ConsumerGroupHeartbeatRequest
from groupcoord.protocol.messages import (
    DescribeGroupsRequest,
    LeaveGroupRequest,
    ListGroupsRequest,
    MemberIdentity,
)

TARGET_S = 1.0
DESCRIBE_BATCH = 1000  # ids per AdminClient call in the paged describe row


def add_arguments(parser: argparse.ArgumentParser) -> None:
    """Options of this benchmark."""
    common.add_common_arguments(parser)
    parser.add_argument("--groups", type=common.ints, default=None, help="total groups (default 100k)")
    parser.add_argument("--partitions", type=int, default=None, help="partition actors (default 16, the service's)")
    parser.add_argument("--no-shard", action="store_true", help="leave out the in-process baseline (to alternate "
                        "runs of two versions sooner)")


def _sizes(args: argparse.Namespace) -> dict:
    groups = args.groups[0] if args.groups else common.preset(args, 100_000, 10_000, 300)
    return {
        "groups": groups,
        "partitions": args.partitions or common.preset(args, 16, 8, 2),
        "empty": groups // 10,
        "consumer": max(1, groups // 100),
        "trials": common.trials(args),
    }


def _names(sz: dict) -> tuple[list[str], list[str]]:
    classic = [f"listing-group-{i:07d}" for i in range(sz["groups"] - sz["consumer"])]
    consumer = [f"listing-consumer-group-{i:07d}" for i in range(sz["consumer"])]
    return classic, consumer


async def populate(callers: list, sz: dict, num_partitions: int) -> None:
    """Create the classic groups (a tenth then left Empty) and the consumer groups over `callers`."""
    classic, consumer = _names(sz)
    formed = await clients.form_groups(callers, [(g, partition_for(g, num_partitions), 1) for g in classic],
                                       session_ms=1_800_000)
    members = [ms[0] for ms in formed]
    leaving: dict[int, list] = {}
    for m in members[: sz["empty"]]:
        leaving.setdefault(m.partition, []).append(("leave_group", LeaveGroupRequest(m.group, [MemberIdentity(
            m.member_id)])))
    joining: dict[int, list] = {}
    for g in consumer:
        req = ConsumerGroupHeartbeatRequest(g, member_epoch=0, rebalance_timeout_ms=60_000,
                                            subscribed_topic_names=[clients.TOPIC], server_assignor="uniform",
                                            topic_partitions=[])
        joining.setdefault(partition_for(g, num_partitions), []).append(("consumer_group_heartbeat", req))

    async def send(p: int, calls: list) -> None:
        for lo in range(0, len(calls), 2000):
            for r in await callers[p].batch(calls[lo : lo + 2000]):
                if r.error != Errors.NONE:
                    raise RuntimeError(f"creating the listing's groups failed: {r.error!r}")

    await asyncio.gather(*(send(p, c) for p, c in [*leaving.items(), *joining.items()]))


def _timed(fn: Callable[[], Any], trials: int, pids: list[int]) -> tuple[dict, Any]:
    """`fn()` run `trials` times: its seconds summarized, the median CPU seconds the processes `pids` spent on it
    (which other users of the machine do not inflate as they do the seconds), the 1-minute load average; and
    its last result."""
    seconds, cpu, result = [], [], None
    for _ in range(trials):
        result = None  # the last trial's answer is freed here, not inside the next one's timing (0.02 s for 100k)
        c = sum(common.read_cpu_seconds(pid) for pid in pids)
        t = time.perf_counter()
        result = fn()
        seconds.append(time.perf_counter() - t)
        cpu.append(sum(common.read_cpu_seconds(pid) for pid in pids) - c)
    return {**common.summarize(seconds), "cpu_s": statistics.median(cpu), "load": os.getloadavg()[0]}, result


def _processes() -> dict[int, tuple[int, str]]:
    """pid -> (parent pid, command line) of every process on this machine (from /proc)."""
    out = {}
    for entry in os.listdir("/proc"):
        if entry.isdigit():
            try:
                with open(f"/proc/{entry}/stat") as f:
                    ppid = int(f.read().rsplit(")", 1)[1].split()[1])
                with open(f"/proc/{entry}/cmdline", "rb") as f:
                    cmdline = f.read().replace(b"\0", b" ").decode(errors="replace")
            except OSError:
                continue
            out[int(entry)] = (ppid, cmdline)
    return out


def service_pids(svc: Any) -> list[int]:
    """This process's, the router's and the partition actors' process ids (the router: the RouterActor worker of
    the raylet this process started; the partitions tell theirs)."""
    procs = _processes()
    raylets = {pid for pid, (ppid, cmd) in procs.items() if ppid == os.getpid() and "raylet" in cmd}
    routers = [pid for pid, (ppid, cmd) in procs.items() if ppid in raylets and cmd.startswith("ray::RouterActor")]
    partitions = [s["pid"] for s in ray.get([h.status.remote() for h in svc.partitions])]
    return [os.getpid(), *routers, *partitions]


def _check(rows: dict, name: str, got: int, expected: int) -> None:
    rows[name]["count"] = got
    if got != expected:
        raise RuntimeError(f"{name}: {got:,} groups, expected {expected:,}")


def through_ray(svc: Any, sz: dict, ids: list[str]) -> dict:
    """The rows measured against the service: AdminClient, the partitions directly, the CLI."""
    from groupcoord.actors import AdminClient

    admin, n, pids = AdminClient(svc), sz["groups"], service_pids(svc)
    if len(pids) != len(svc.partitions) + 2:
        raise RuntimeError(f"expected this process, the router and {len(svc.partitions)} partitions, found {pids}")

    def timed(fn: Callable[[], Any], trials: int = sz["trials"]) -> tuple[dict, Any]:
        return _timed(fn, trials, pids)

    rows: dict[str, dict] = {}
    rows["admin list all"], listed = timed(admin.list_groups)
    _check(rows, "admin list all", len(listed), n)
    rows["admin list state=Empty"], listed = timed(lambda: admin.list_groups(states=["Empty"]))
    _check(rows, "admin list state=Empty", len(listed), sz["empty"])
    rows["admin list type=consumer"], listed = timed(lambda: admin.list_groups(types=["consumer"]))
    _check(rows, "admin list type=consumer", len(listed), sz["consumer"])
    rows["partitions list all (no router)"], answers = timed(
        lambda: ray.get([h.list_groups.remote(ListGroupsRequest()) for h in svc.partitions]))
    _check(rows, "partitions list all (no router)", sum(len(a.groups) for a in answers), n)
    rows["admin describe all (1 call)"], described = timed(lambda: admin.describe_groups(ids))
    _check(rows, "admin describe all (1 call)", sum(d.group_state != "Dead" for d in described.values()),
           n - sz["consumer"])  # DescribeGroups (classic) describes a consumer group as Dead, as Kafka

    def paged() -> int:
        return sum(len(admin.describe_groups(ids[lo : lo + DESCRIBE_BATCH])) for lo in range(0, n, DESCRIBE_BATCH))

    rows[f"admin describe all ({DESCRIBE_BATCH:,} per call)"], count = timed(paged, 1)  # 100 calls: once
    _check(rows, f"admin describe all ({DESCRIBE_BATCH:,} per call)", count, n)
    rows["cli groups list (page 1)"], out = timed(lambda: _cli_list(svc))
    rows["cli groups list (page 1)"]["count"] = n
    if n > 1000 and f"{n:,} groups" not in out:  # one page, before the count was always printed: no total
        raise RuntimeError(f"groups list printed no total of {n:,}: {out[-300:]!r}")
    return rows


def _cli_list(svc: Any) -> str:
    from click.testing import CliRunner

    from groupcoord.actors.tools.cli import main as cli

    result = CliRunner().invoke(cli, ["--namespace", svc.namespace, "groups", "list"], catch_exceptions=False)
    if result.exit_code != 0:
        raise RuntimeError(f"groups list failed: {result.output[-500:]}")
    return result.output


async def in_process(sz: dict, ids: list[str]) -> dict:
    """The baseline: one pure shard holding every group, asked the same ListGroups and DescribeGroups."""
    coord = GroupCoordinator(common.bench_config(), log=clients.NullLog())
    await populate([clients.ShardCaller(coord)], sz, 1)
    trials, n = sz["trials"], sz["groups"]

    def timed(fn: Callable[[], Any], trials: int) -> tuple[dict, Any]:
        return _timed(fn, trials, [os.getpid()])

    rows: dict[str, dict] = {}
    rows["admin list all"], r = timed(lambda: coord.list_groups(ListGroupsRequest()).result(), trials)
    _check(rows, "admin list all", len(r.groups), n)
    rows["admin list state=Empty"], r = timed(
        lambda: coord.list_groups(ListGroupsRequest(states_filter=["Empty"])).result(), trials)
    _check(rows, "admin list state=Empty", len(r.groups), sz["empty"])
    rows["admin list type=consumer"], r = timed(
        lambda: coord.list_groups(ListGroupsRequest(types_filter=["consumer"])).result(), trials)
    _check(rows, "admin list type=consumer", len(r.groups), sz["consumer"])
    limit = coord.config.max_items_per_request  # the most ids one DescribeGroups may carry to a shard

    def describe_all() -> list:
        return [d for lo in range(0, n, limit)
                for d in coord.describe_groups(DescribeGroupsRequest(ids[lo : lo + limit])).result().groups]

    rows["admin describe all (1 call)"], described = timed(describe_all, trials)
    _check(rows, "admin describe all (1 call)", sum(d.group_state != "Dead" for d in described), n - sz["consumer"])
    return rows


def run(args: argparse.Namespace) -> dict:
    """Create the groups on a service and on an in-process shard; time listing and describing them."""
    sz = _sizes(args)
    p = sz["partitions"]
    classic, consumer = _names(sz)
    ids = classic + consumer
    out: dict[str, Any] = {"sizes": sz}
    with common.work_dir(args, "listing") as base:
        with common.service(p, base / "svc", common.bench_config()) as svc:
            common.step(f"creating {sz['groups']:,} groups over {p} partition actors")
            t = time.perf_counter()
            asyncio.run(populate([common.ActorCaller(h) for h in svc.partitions], sz, p))
            out["created_s"] = time.perf_counter() - t
            # Timed once the partitions have flushed the 100,000 groups: the listing, not its set-up's aftermath.
            out["settle"] = common.wait_quiet(max_wait_s=0 if args.tiny else 30)
            common.step(f"  created in {out['created_s']:.0f} s, the machine quiet {out['settle']['waited_s']} s "
                        f"later (busy {out['settle']['busy']:.0%}); listing and describing through Ray")
            out["ray"] = through_ray(svc, sz, ids)
    if not args.no_shard:
        common.step(f"creating {sz['groups']:,} groups on one in-process shard")
    out["shard"] = {} if args.no_shard else asyncio.run(in_process(sz, ids))
    out["load_after"] = list(os.getloadavg())
    return out


def _settled(results: dict) -> str:
    settle = results.get("settle")
    if settle is None:
        return ""
    return f"; timed {settle['waited_s']} s after the set-up, the machine {settle['busy']:.0%} busy"


def report(results: dict) -> None:
    """One row per operation: through Ray and in-process, their ratio, the load average of each."""
    s = results["sizes"]
    shard = results["shard"]
    rows = []
    for name, r in results["ray"].items():
        base = shard.get(name)
        rows.append([
            name, f"{r['count']:,}", common.fmt_ms(r["median"]), f"{common.fmt_ms(r['min'])}-{common.fmt_ms(r['max'])}",
            common.fmt_ms(r["cpu_s"]), common.fmt_ms(base["median"]) if base else "-",
            common.fmt_ms(base["cpu_s"]) if base else "-",
            f"{r['cpu_s'] / base['cpu_s']:.1f}x" if base and base["cpu_s"] else "-",
            f"{r['load']:.1f}" + (f" / {base['load']:.1f}" if base else ""),
        ])  # fmt: skip
    common.print_table(
        f"{s['groups']:,} groups ({s['empty']:,} Empty, {s['consumer']:,} consumer) over {s['partitions']} partition "
        f"actors; median of {s['trials']} (ms); CPU: of the caller, router and partition actors together; "
        f"in-process: one pure shard holding them all{_settled(results)}",
        ["operation", "groups", "through Ray", "min-max", "CPU", "in-process shard", "shard CPU", "CPU Ray / shard",
         "load (Ray / shard)"],
        rows,
    )
    for name in ("admin list all", "admin describe all (1 call)"):
        r = results["ray"][name]
        common.print_target(f"{name}, {s['groups']:,} groups, < {TARGET_S:.0f} s", f"{r['median']:.2f} s (median)",
                            r["median"] < TARGET_S)


def main(argv: list[str] | None = None) -> dict:
    """Run this benchmark from the command line."""
    return common.run_benchmark("listing", sys.modules[__name__], argv)


if __name__ == "__main__":
    main()
