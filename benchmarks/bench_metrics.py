"""The cost of the service's metrics: durable commit throughput with metrics on against off, in the same run.

One service, one partition actor (fsync "always"), started with metrics; its metrics are turned
off and on again between trials (PartitionActor.set_metrics), so that both sides run in the same
process with the same groups and clients: trials alternate off, on, on, off, ... Metrics on means
request latency histograms per API and error code, flush histograms, and the shard's counters and
gauges published every second (a fifth of the default interval). The clients (one joined group
each) commit one actor call per commit, then coalesced per client process. The figure is the on/off
ratio of durable commits/s per pair of trials; the goal is at most 5% apart.
Beside it, the CPU time the partition actor process spent per request in each trial (from /proc),
and the cost of the request path's metrics alone, timed in a Ray worker: what recording one
100-partition commit's latency costs with metrics on and off. On a shared, loaded machine
throughput swings from trial to trial; these two figures much less.
"""

from __future__ import annotations

import argparse
import asyncio
import sys
from typing import Any

import ray

from benchmarks import clients, common
from benchmarks.bench_commits import SESSION_MS, actor_trial
from groupcoord.actors.service.spec import Observability

GOAL = 0.95  # metrics on keeps at least this share of the commits/s with metrics off
PUBLISH_INTERVAL_S = 1.0


def add_arguments(parser: argparse.ArgumentParser) -> None:
    """Options of this benchmark."""
    common.add_common_arguments(parser, default_trials=5)
    parser.add_argument("--clients", type=int, default=None, help="concurrent clients (default 64)")
    parser.add_argument("--per-commit", type=int, default=None, help="partitions per OffsetCommit (default 100)")
    parser.add_argument("--duration", type=float, default=None, help="seconds per trial (default 1.5)")
    parser.add_argument("--drivers", type=int, default=2, help="client processes (Ray actors)")


def _sizes(args: argparse.Namespace) -> dict:
    return {
        "clients": args.clients or common.preset(args, 64, 16, 2),
        "per_commit": args.per_commit or common.preset(args, 100, 100, 10),
        "duration": args.duration or common.preset(args, 1.5, 0.7, 0.3),
        "trials": common.trials(args, full=5),
    }


async def request_cost(_state: dict, per_commit: int, n: int = 20_000) -> dict:
    """Microseconds per request of PartitionTelemetry.request with metrics on and off (in a Ray worker)."""
    import time
    from types import SimpleNamespace

    from groupcoord.actors.service.telemetry import PartitionTelemetry
    from groupcoord.protocol import Errors, TopicPartition
    from groupcoord.protocol.messages import OffsetCommitResponse

    response = OffsetCommitResponse({TopicPartition(clients.TOPIC, p): Errors.NONE for p in range(per_commit)})
    out = {}
    for name, enabled in (("off", False), ("on", True)):
        telemetry = PartitionTelemetry(0, SimpleNamespace(coord=None, log=None), Observability(metrics=enabled))
        start = time.thread_time()
        for _ in range(n):
            telemetry.request("commit_offsets", None, response, 0.001)
        out[name] = (time.thread_time() - start) / n * 1e6
    return out


def run(args: argparse.Namespace) -> dict:
    """Alternate trials with the service's metrics off and on, per-call and coalesced."""
    sizes = _sizes(args)
    config = common.bench_config()
    out: dict[str, Any] = {"sizes": sizes, "modes": []}
    with common.work_dir(args, "metrics") as base:
        drivers = common.start_drivers(args.drivers)
        try:
            calls = common.preset(args, 20_000, 20_000, 2000)
            costs = [ray.get(drivers[0].run_local.remote(request_cost, sizes["per_commit"], calls)) for _ in range(3)]
            out["request_cost_us"] = {k: common.summarize([c[k] for c in costs]) for k in ("off", "on")}
            observability = Observability(interval_s=PUBLISH_INTERVAL_S)
            with common.service(1, base / "svc", config, observability=observability) as svc:
                actor = svc.partitions[0]
                pid = ray.get(actor.status.remote())["pid"]
                common.step(f"forming {sizes['clients']} client groups")
                callers = [common.ActorCaller(h) for h in svc.partitions]
                groups = [(g, 0, 1) for g in common.group_names("metrics", sizes["clients"], 0, 1)]
                members = [m[0] for m in asyncio.run(clients.form_groups(callers, groups, SESSION_MS))]
                for coalesce in (False, True):
                    trials: dict[str, list[dict]] = {"off": [], "on": []}
                    for t in range(sizes["trials"]):
                        common.step(f"  trial {t + 1}/{sizes['trials']}{' coalesced' if coalesce else ''}")
                        for name in ("off", "on") if t % 2 == 0 else ("on", "off"):
                            if ray.get(actor.set_metrics.remote(name == "on")) != (name == "on"):
                                raise RuntimeError(f"the partition actor did not turn its metrics {name}")
                            cpu = common.read_cpu_seconds(pid)
                            trial = actor_trial(svc, drivers, members, sizes["per_commit"], sizes["duration"],
                                                coalesce)
                            cpu = common.read_cpu_seconds(pid) - cpu
                            trial["cpu_us_per_request"] = cpu / max(1, trial["requests"]) * 1e6
                            trials[name].append(trial)
                    out["modes"].append(_mode_result(coalesce, trials))
        finally:
            common.stop_drivers(drivers)
    return out


def _mode_result(coalesce: bool, trials: dict[str, list[dict]]) -> dict:
    ratios = [on["commits_per_s"] / off["commits_per_s"]
              for on, off in zip(trials["on"], trials["off"], strict=True) if off["commits_per_s"]]
    cpu_ratios = [on["cpu_us_per_request"] / off["cpu_us_per_request"]
                  for on, off in zip(trials["on"], trials["off"], strict=True) if off["cpu_us_per_request"]]
    return {
        "cpu_us_per_request": {k: common.summarize([t["cpu_us_per_request"] for t in ts]) for k, ts in trials.items()},
        "cpu_ratio": common.summarize(cpu_ratios),
        "coalesced": coalesce,
        "off": common.summarize([t["commits_per_s"] for t in trials["off"]]),
        "on": common.summarize([t["commits_per_s"] for t in trials["on"]]),
        "ratio": common.summarize(ratios),
        "errors": sum(t["errors"] for ts in trials.values() for t in ts),
        "wrong_after_fetch": sum(t["wrong_after_fetch"] for ts in trials.values() for t in ts),
        "trials": trials,
    }


def report(results: dict) -> None:
    """Print commits/s with metrics off and on and their ratio, and the verdict on the 5% goal."""
    s = results["sizes"]
    rows = []
    for m in results["modes"]:
        r, c, cpu = m["ratio"], m["cpu_ratio"], m["cpu_us_per_request"]
        rows.append([
            "coalesced" if m["coalesced"] else "one call per commit",
            common.fmt_rate(m["off"]), common.fmt_rate(m["on"]),
            f"{common.fmt_ratio(r['median'])} ({common.fmt_ratio(r['min'])}-{common.fmt_ratio(r['max'])})",
            f"{cpu['off']['median']:,.0f} / {cpu['on']['median']:,.0f}",
            f"{common.fmt_ratio(c['median'])} ({common.fmt_ratio(c['min'])}-{common.fmt_ratio(c['max'])})",
            f"{m['errors']}/{m['wrong_after_fetch']}",
        ])
    common.print_table(
        f"durable commits/s, 1 partition actor, {s['clients']} clients x {s['per_commit']} partitions per commit, "
        f"{s['duration']}s x {s['trials']} paired trials; median (min-max)",
        ["requests", "metrics off", "metrics on", "on/off", "actor CPU us/request off / on", "on/off",
         "err/wrong"], rows)
    cost = results["request_cost_us"]
    added = cost["on"]["median"] - cost["off"]["median"]
    print(f"\nrecording one request's metrics (Ray worker, CPU): {cost['off']['median']:.1f} us with metrics off, "
          f"{cost['on']['median']:.1f} us on: +{added:.1f} us per request")
    for m in results["modes"]:
        cpu = m["cpu_us_per_request"]["off"]["median"]
        how = "coalesced" if m["coalesced"] else "one call per commit"
        share = f"{added / cpu * 100:.2f}%" if cpu else "-"
        print(f"  = {share} of the actor's CPU per request ({how}: {cpu:,.0f} us)")
    print()
    for m in results["modes"]:
        how = "coalesced" if m["coalesced"] else "one call per commit"
        ratio = m["ratio"]["median"]
        cpu = m["cpu_ratio"]["median"]
        of_medians = m["on"]["median"] / m["off"]["median"] if m["off"]["median"] else float("nan")
        common.print_target(f"metrics on within 5% of off ({how})",
                            f"{common.fmt_ratio(ratio)} of the commits/s (median of paired trials; medians: "
                            f"{common.fmt_ratio(of_medians)}), {common.fmt_ratio(cpu)} of the actor CPU per request",
                            ratio >= GOAL)


def main(argv: list[str] | None = None) -> dict:
    """Run this benchmark from the command line."""
    return common.run_benchmark("metrics", sys.modules[__name__], argv)


if __name__ == "__main__":
    main()
