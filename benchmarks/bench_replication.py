"""Replication on a simulated multi-node cluster: commit throughput at factor 3 against factor 1, failover, catch-up.

`python -m benchmarks replication [--seconds S] [--failovers N] [--catch-up-records N]` starts a
ray.cluster_utils.Cluster (head + 3 workers, one storage directory per node) and, in the same run:
- commits/s on one offsets partition with replication_factor 3 (min_insync 2) and with factor 1,
  from one driver keeping --window commits in flight (goal: factor 3 at least half of factor 1);
- failover: a node hosting the leader is removed (and its disk deleted) while commits go on; the
  time from the removal to the first commit acknowledged by the new leader (goal: under 2 s);
- catch-up: after a follower's node is lost, the rate (records/s) at which its replacement copies
  the leader's log (--catch-up-records records) until it is in sync.
"""

from __future__ import annotations

import argparse
import logging
import sys
import tempfile
import threading
import time
from typing import Any

from benchmarks import common, long_runs

NAMESPACE = "gc-bench-replication"
REQUEST_TIMEOUT_MS = 30_000  # the failover client's request timeout (GroupMember's default)
BASELINE_NAMESPACE = "gc-bench-replication-f1"

log = logging.getLogger(__name__)


def add_arguments(parser: argparse.ArgumentParser) -> None:
    """This benchmark's options."""
    parser.add_argument("--seconds", type=float, default=10.0, help="length of each throughput measurement")
    parser.add_argument("--window", type=int, default=32, help="commits in flight during the throughput runs")
    parser.add_argument("--failovers", type=int, default=3, help="leader node losses to time")
    parser.add_argument("--catch-up-records", type=int, default=200_000, help="log size the new replica copies")
    parser.add_argument("--json", default=None, help="also write the figures to this file")
    parser.add_argument("--quick", action="store_true",
                        help="small sizes (3 s throughput runs, 2 failovers, 20,000 records), marked quick in the JSON")


def _commit_request(group: str, offset: int) -> Any:
    from groupcoord.protocol import OffsetAndMetadata, TopicPartition
    from groupcoord.protocol.messages import OffsetCommitRequest

    return OffsetCommitRequest(group, {TopicPartition("bench", offset % 64): OffsetAndMetadata(offset)})


def commits_per_second(svc: Any, seconds: float, window: int) -> float:
    """Acknowledged single-offset commits per second on partition 0, `window` in flight."""
    import ray

    from groupcoord.protocol import partition_for

    group = next(g for g in (f"bench-{i}" for i in range(10_000)) if partition_for(g, svc.num_partitions) == 0)
    handle = svc.partition(0)
    inflight, done, n = [], 0, 0
    deadline = time.perf_counter() + seconds
    started = time.perf_counter()
    while time.perf_counter() < deadline:
        while len(inflight) < window:
            inflight.append(handle.commit_offsets.remote(_commit_request(group, n)))
            n += 1
        ready, inflight = ray.wait(inflight, num_returns=1)
        done += len(ready)
    ray.get(inflight)
    return (done + len(inflight)) / (time.perf_counter() - started)


class Committer:
    """Commits continuously through the client library (CoordinatorClient.call, as GroupMember.commit does),
    recording when each acknowledged commit returned and which actor acknowledged it."""

    def __init__(self, svc: Any, group: str) -> None:
        from groupcoord.actors.client.coordinator_client import CoordinatorClient

        self.client = CoordinatorClient(svc, group, request_timeout_ms=REQUEST_TIMEOUT_MS)
        self.group = group
        self.acked: list[tuple[float, str]] = []  # (when, the acknowledging actor's id)
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._loop, daemon=True)
        self._thread.start()

    def _loop(self) -> None:
        from groupcoord.protocol import Errors

        n = 0
        while not self._stop.is_set():
            n += 1
            try:
                answer = self.client.call("commit_offsets", _commit_request(self.group, n))
            except Exception as e:  # the request timeout passed: counted as no acknowledgement
                log.warning("commit %d not acknowledged: %r", n, e)
                continue
            if all(e == Errors.NONE for e in answer.errors.values()):
                # The actor the client sent it to last: the one that answered.
                self.acked.append((time.monotonic(), self.client.handle._actor_id.hex()))

    def first_ack_after(self, t: float, old_leader: str, timeout_s: float = 60) -> float:
        """Seconds from `t` to the first commit acknowledged by another actor than `old_leader`."""
        deadline = time.monotonic() + timeout_s
        while time.monotonic() < deadline:
            later = [when for when, actor in self.acked if when > t and actor != old_leader]
            if later:
                return later[0] - t
            time.sleep(0.01)
        raise TimeoutError("no commit was acknowledged after the node loss")

    def stop(self) -> None:
        """Stop committing."""
        self._stop.set()
        self._thread.join(10)


def measure_failovers(chaos: Any, count: int) -> list[float]:
    """Remove the leader's node `count` times while committing; seconds to the new leader's first ack each time."""
    from groupcoord.protocol import partition_for

    group = next(g for g in (f"failover-{i}" for i in range(10_000)) if partition_for(g, chaos.svc.num_partitions) == 0)
    committer = Committer(chaos.svc, group)
    times = []
    try:
        for _ in range(count):
            if chaos.svc.describe_partitions()[0].leader == chaos.cluster.head_node.node_id:
                chaos.pause_leader(0)  # the head node cannot be removed: another replica leads after the pause
                chaos.wait_repaired()  # and the paused one, restarted as a follower, is in sync again
            settled = len(committer.acked) + 20
            while len(committer.acked) < settled:
                time.sleep(0.05)
            chaos.svc.refresh()
            leader, old = chaos.svc.describe_partitions()[0].leader, chaos.svc.partition(0)._actor_id.hex()
            removed = time.monotonic()
            chaos.lose_node(leader)
            times.append(committer.first_ack_after(removed, old))
            chaos.cluster.add_node(num_cpus=1)
            chaos.wait_repaired()
    finally:
        committer.stop()
    return times


def measure_catch_up(chaos: Any, records: int, window: int) -> dict:
    """Grow partition 0's log to `records`, lose a follower's node, and time its replacement's catch-up."""
    import ray

    svc = chaos.svc
    svc.refresh()
    end = ray.get(svc.partition(0).role.remote())["end"]
    if end < records:
        commits_per_second_until(svc, records - end, window)
    described = svc.describe_partitions()[0]
    follower = next(n for n in described.replicas if n != described.leader and n != chaos.cluster.head_node.node_id)
    log_end = ray.get(svc.partition(0).role.remote())["end"]
    chaos.cluster.add_node(num_cpus=1)
    started = time.monotonic()
    chaos.lose_node(follower)
    chaos.wait_repaired()
    seconds = time.monotonic() - started
    return {"log_records": log_end, "seconds": seconds, "records_per_s": log_end / seconds}


def commits_per_second_until(svc: Any, count: int, window: int) -> None:
    """Send `count` commits to partition 0 (to grow its log)."""
    import ray

    from groupcoord.protocol import partition_for

    group = next(g for g in (f"fill-{i}" for i in range(10_000)) if partition_for(g, svc.num_partitions) == 0)
    handle, inflight = svc.partition(0), []
    for n in range(count):
        inflight.append(handle.commit_offsets.remote(_commit_request(group, n)))
        if len(inflight) >= window:
            _, inflight = ray.wait(inflight, num_returns=1)
    ray.get(inflight)


def run(args: argparse.Namespace) -> dict:
    """Every measurement on one cluster; the figures."""
    from rel_replication import NodeChaos, replicated_cluster

    from groupcoord.actors import start, stop

    with tempfile.TemporaryDirectory(prefix="bench-replication-") as tmp:
        with replicated_cluster(tmp, NAMESPACE, workers=3, num_partitions=1) as (cluster, svc, storage):
            common.step("throughput, factor 3 and factor 1")
            f3 = commits_per_second(svc, args.seconds, args.window)
            baseline = start(num_partitions=1, storage_path=f"{tmp}/f1", namespace=BASELINE_NAMESPACE)
            f1 = commits_per_second(baseline, args.seconds, args.window)
            stop(BASELINE_NAMESPACE)
            chaos = NodeChaos(cluster, svc, storage, groups=1, members_per_group=1, topic_partitions=1)
            try:
                common.step(f"failover, {args.failovers} leader node losses")
                failovers = measure_failovers(chaos, args.failovers)
                common.step(f"catch-up of a new replica over {args.catch_up_records} records")
                catch_up = measure_catch_up(chaos, args.catch_up_records, args.window)
            finally:
                chaos.close()
    return {"commits_per_s_factor3": f3, "commits_per_s_factor1": f1, "ratio": f3 / f1,
            "failover_s": failovers, "elected_s": chaos.failover_s[: len(failovers)], "catch_up": catch_up}


def report(r: dict) -> None:
    """Print the figures against their goals."""
    rates = [f"{r['commits_per_s_factor1']:.0f}", f"{r['commits_per_s_factor3']:.0f}", f"{r['ratio']:.2f}"]
    common.print_table("commits/s on one partition", ["factor 1", "factor 3", "ratio"], [rates])
    common.print_target(">= 0.5 of factor 1", f"{r['ratio']:.2f}", r["ratio"] >= 0.5)
    worst = max(r["failover_s"])
    common.print_table("node loss -> new leader elected / first ack on it (s)",
                       ["runs", "elected", "first ack", "worst"],
                       [[len(r["failover_s"]), " ".join(f"{s:.2f}" for s in r["elected_s"]),
                         " ".join(f"{s:.2f}" for s in r["failover_s"]), f"{worst:.2f}"]])
    common.print_target("< 2 s", f"{worst:.2f} s", worst < 2.0)
    c = r["catch_up"]
    common.print_table("catch-up of a new replica", ["records", "seconds", "records/s"],
                       [[c["log_records"], f"{c['seconds']:.1f}", f"{c['records_per_s']:.0f}"]])


def main(argv: list[str] | None = None) -> int:
    """Run on a cluster of its own, print, and write benchmarks/results/replication.json."""
    long_runs.use_test_helpers()
    parser = argparse.ArgumentParser(prog="python -m benchmarks replication", description=__doc__)
    add_arguments(parser)
    args = parser.parse_args(argv)
    if args.quick:
        args.seconds, args.failovers, args.catch_up_records = 3.0, 2, 20_000
    started = time.perf_counter()
    results = run(args)
    results["machine"] = common.machine()
    print(common.machine_line(results["machine"]))
    report(results)
    print(f"\nwrote {common.write_results('replication', args, results, time.perf_counter() - started)}")
    long_runs.write_json(args.json, results)
    return 0


if __name__ == "__main__":
    sys.exit(main())
