"""KIP-848 against the classic protocol: one member joins, or one leaves, a Stable group of 1,000 or 10,000.

Measured in-process on the pure shard (see kip848_sim: real coordinator, real assignors,
simulated time): the time until every member is reconciled, how many partitions stopped being
processed meanwhile and for how long, and the CPU the coordinator (and, classic, the leader)
spent. The group consumes one topic with two partitions per member.

* classic eager (range): a member learns of the rebalance at its next heartbeat, gives up all its
  partitions and rejoins; processing resumes when the leader's assignment is synced.
* classic cooperative-sticky: members keep their partitions through the first rebalance; those
  that must give some up revoke them and rejoin for a second rebalance that hands them out.
* consumer (KIP-848, uniform assignor): the coordinator computes the target at once; each member
  hears of it at its next heartbeat, revokes what it must and acknowledges at once; a partition
  reaches its new owner at that owner's next heartbeat after the release.

Baseline: the classic protocol, measured in the same run. Heartbeat intervals are Kafka's
defaults (classic heartbeat.interval.ms 3 s, group.consumer.heartbeat.interval.ms 5 s), and the
consumer protocol is also run at 3 s for a like-for-like row.
"""

from __future__ import annotations

import argparse
import dataclasses
import sys
from typing import Any

from benchmarks import common
from benchmarks.kip848_sim import ClassicGroupSim, ConsumerGroupSim, Outcome

PROTOCOLS = (
    ("classic eager (range)", "range", 3000),
    ("classic cooperative-sticky", "cooperative-sticky", 3000),
    ("consumer (uniform), 3 s", "consumer", 3000),
    ("consumer (uniform), 5 s", "consumer", 5000),
)


def add_arguments(parser: argparse.ArgumentParser) -> None:
    """Options of this benchmark."""
    common.add_common_arguments(parser, default_trials=1)
    parser.add_argument("--sizes", type=common.ints, default=None, help="group sizes (default 1000,10000)")
    parser.add_argument("--seed", type=int, default=1, help="seed of the members' heartbeat phases")


def _outcome(protocol: str, interval_ms: int, members: int, change: str, seed: int) -> Outcome:
    if protocol == "consumer":
        return ConsumerGroupSim(members, 2 * members, interval_ms, seed).change(change)
    return ClassicGroupSim(members, 2 * members, protocol, interval_ms, seed).change(change)


def run(args: argparse.Namespace) -> dict:
    """Every (size, change, protocol), `trials` times with different heartbeat phases; the median trial is kept."""
    sizes = args.sizes or common.preset(args, [1000, 10000], [1000], [50])
    trials = common.trials(args, full=1)
    rows: list[dict[str, Any]] = []
    for members in sizes:
        for change in ("join", "leave"):
            for label, protocol, interval in PROTOCOLS:
                common.step(f"{members:,} members, one {change}s: {label}")
                outcomes = sorted(
                    (_outcome(protocol, interval, members, change, args.seed + i) for i in range(trials)),
                    key=lambda o: o.reconciled_s,
                )
                rows.append({"members": members, "change": change, "protocol": label,
                             **dataclasses.asdict(outcomes[len(outcomes) // 2])})  # fmt: skip
    return {"rows": rows, "sizes": sizes, "trials": trials}


def report(results: dict) -> None:
    """The table, with ratios against classic eager of the same size and change."""
    table = []
    base = {(r["members"], r["change"]): r for r in results["rows"] if r["protocol"] == PROTOCOLS[0][0]}
    for r in results["rows"]:
        b = base[(r["members"], r["change"])]
        table.append([
            f"{r['members']:,}", r["change"], r["protocol"], f"{r['reconciled_s']:.2f} s",
            f"{r['stopped']:,}", f"{r['stopped_partition_s']:,.1f}", f"{r['longest_stop_s']:.2f} s",
            f"{b['stopped_partition_s'] / r['stopped_partition_s']:,.0f}x" if r["stopped_partition_s"] else "-",
            f"{r['cpu_s'] * 1000:,.0f} ms",
        ])  # fmt: skip
    common.print_table(
        "one member joins / leaves a Stable group (two partitions per member; simulated time, measured CPU)",
        ["members", "change", "protocol", "all reconciled after", "partitions stopped", "stopped partition-s",
         "longest stop", "eager's stopped time / this", "coordinator+leader CPU"],
        table,
    )  # fmt: skip


def main(argv: list[str] | None = None) -> dict:
    """Run this benchmark from the command line."""
    return common.run_benchmark("kip848", sys.modules[__name__], argv)


if __name__ == "__main__":
    main()
