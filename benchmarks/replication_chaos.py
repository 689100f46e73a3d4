"""Long run of replicated partitions: random node losses (disks deleted) and paused leaders under load.

`python -m benchmarks replication-chaos --losses 30` starts a ray.cluster_utils.Cluster (head + 4
workers, one storage directory per node), a service with replication factor 3, and GroupMembers
that heartbeat and commit; then, until --losses nodes were lost, it either removes a worker node
hosting a leader (a fresh node joins, the lost replicas are repaired) or pauses a leader with
SIGSTOP until another replica leads (then SIGCONT), or, with --overlap (the default), a third of the
time both at once: a node hosting a leader (often the paused partition's new one) lost while a deposed
leader is still paused, or while a follower of the lost leader is paused (no majority until it
resumes); and faults of storage and of the router: the router restarted during the repair after a
loss, a live replica's directory wiped (a leader's a third of the time, half the time while another
partition's leader is paused), a learner's directory wiped while it catches up, a follower's disk full
(a real ENOSPC on a tmpfs). Afterwards no
acknowledged commit may be lost, the paused leaders must have acknowledged nothing, no offset fetch
may have gone back, the replicas must agree below their watermarks, the voters must agree after every
repair, and every group must end Stable. Exits 1 if not.
"""

from __future__ import annotations

import argparse
import os
import sys
import tempfile
import time

from benchmarks import long_runs

NAMESPACE = "gc-bench-replication-chaos"
LOSSES = ("lose_node", "pause_and_lose", "pause_follower_and_lose_leader", "router_restart_in_repair",
          "wipe_learner_in_repair")
RESULT = long_runs.ROOT / "benchmarks" / "results" / "replication-chaos.json"


def main(argv: list[str] | None = None) -> int:
    """Run until --losses node losses, verify, print and save the figures; 0 when every check passed."""
    long_runs.use_test_helpers()
    from rel_replication import NodeChaos, replicated_cluster

    p = argparse.ArgumentParser(prog="python -m benchmarks replication-chaos", description=__doc__)
    p.add_argument("--losses", type=int, default=30, help="node losses to survive")
    p.add_argument("--partitions", type=int, default=3)
    p.add_argument("--groups", type=int, default=4)
    p.add_argument("--seed", type=int, default=11)
    p.add_argument("--json", default=str(RESULT), help="write the figures to this file as JSON")
    p.add_argument("--overlap", action=argparse.BooleanOptionalAction, default=True,
                   help="also lose nodes while a deposed leader is paused (overlapping faults)")
    p.add_argument("--max-minutes", type=float, default=None,
                   help="start no new fault after this long (the figures then say how many losses were run)")
    p.add_argument("--only", nargs="*", help="draw only these fault kinds (see NodeChaos.kill_some)")
    args = p.parse_args(argv)
    started = time.monotonic()
    loads: list[float] = []
    with tempfile.TemporaryDirectory(prefix="bench-replication-chaos-") as tmp:
        with replicated_cluster(tmp, NAMESPACE, workers=4, num_partitions=args.partitions) as (cluster, svc, storage):
            chaos = NodeChaos(cluster, svc, storage, groups=args.groups, members_per_group=2,
                              topic_partitions=4, seed=args.seed)
            try:
                chaos.settle()
                for m in chaos.members:
                    m.committing.set()
                while chaos.node_losses < args.losses:
                    chaos.kill_some(overlap=args.overlap, only=args.only)
                    print(f"  {chaos.node_losses} node losses ({chaos.overlaps} overlapping a pause, "
                          f"{chaos.paused_followers} of a follower), "
                          f"{chaos.pauses} pauses, faults {chaos.fault_kinds}, {time.monotonic() - started:.0f} s, "
                          f"{chaos.ledger.counts()['NONE']} commits acknowledged, load {os.getloadavg()[0]:.1f}",
                          flush=True)
                    loads.append(os.getloadavg()[0])
                    if args.max_minutes is not None and time.monotonic() - started > args.max_minutes * 60:
                        print(f"  stopping after {args.max_minutes} minutes", flush=True)
                        break
                    if args.only and not any(k in args.only for k in LOSSES) and sum(chaos.fault_kinds.values()) \
                            >= args.losses:
                        break
                chaos.finish()
                chaos.check_replicas(full=True)
            finally:
                chaos.close()
    report = chaos.report
    failures = [*report.lost, *chaos.zombie_acks, *chaos.minority_leaders, *chaos.reads.went_back,
                *chaos.logs.disagreements, *chaos.voter_problems] + [repr(e) for e in chaos.fatal_errors()]
    if not chaos.real_failovers():
        failures.append(f"a counted node loss caused no failover: {chaos.failovers}")
    figures = {
        "node_losses": chaos.node_losses,
        "paused_leaders": chaos.pauses,
        "seconds": time.monotonic() - started,
        "failover_s": sorted(chaos.failover_s),  # only node losses that hit a leader (see NodeChaos.lose_node)
        "overlapped_failover_s": sorted(chaos.overlapped_s),  # losses during a pause, the pause's wait included
        "overlaps": chaos.overlaps,
        "paused_followers": chaos.paused_followers,  # of the overlaps, those with a follower paused
        "follower_losses": chaos.follower_losses,
        "fault_kinds": chaos.fault_kinds,  # every fault drawn, by kind
        "wiped_replicas": chaos.wipes,  # whose directory was deleted under the running actor
        "router_restarts_in_repair": chaos.router_restarts,  # by the repair's stage when the router was killed
        "full_disks": chaos.full_disks,  # how (tmpfs or rlimit), replicas that failed, commits acked meanwhile
        "tmpfs_unavailable": chaos.disks.why_not,
        "reads_checked": chaos.reads.reads,  # offset fetches, none of which may go back
        "log_records_compared": chaos.logs.records_compared,  # below the replicas' watermarks
        "log_checks": chaos.logs.replica_checks,
        "unreadable_logs_during_faults": len(chaos.logs.unreadable),
        "load_avg_1m": {"min": min(loads, default=0), "max": max(loads, default=0),
                        "mean": sum(loads) / len(loads) if loads else 0},
        "failovers": chaos.failovers,
        "quick": chaos.node_losses < 30,
        "losses_asked": args.losses,
        "commit_attempts": dict(chaos.ledger.counts()),
        "partitions_verified": report.partitions_checked,
        "offsets_checked_after_failovers": report.restart_partitions_checked,
        "failures": failures,
    }
    print(figures)
    return long_runs.conclude(args.json, figures)


if __name__ == "__main__":
    sys.exit(main())
