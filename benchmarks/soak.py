"""Long soak: thousands of simulated members heartbeating (and committing) for minutes, with no false expiry.

Run from the repository root: `python -m benchmarks.soak --minutes 5 --members 3000` (see --help).
Members are tests/reliability/rel_sim.SimHost loops (JoinGroup/SyncGroup/Heartbeat/OffsetCommit
straight to the partition actors) spread over a few host actors. Prints heartbeat latency, the
longest gap between a member's heartbeats and the expiries (a "spurious" one is an expiry that
came sooner than a session after the member's last answered heartbeat, by the client's clock);
writes them as JSON to --json PATH if given and exits non-zero if any member was expired.
"""

from __future__ import annotations

import sys

from benchmarks import long_runs

long_runs.use_test_helpers()

from rel_chaos import spread_group_ids  # noqa: E402
from rel_sim import run_hosts  # noqa: E402

from groupcoord.actors import stop  # noqa: E402
from groupcoord.actors.client.admin import AdminClient  # noqa: E402

NAMESPACE = "gc-bench-soak"


def main(argv: list[str] | None = None) -> int:
    """Run the soak, print and save the figures; 0 when no member was expired."""
    p = long_runs.parser(__doc__)
    p.add_argument("--members", type=int, default=3000)
    p.add_argument("--group-size", type=int, default=10)
    p.add_argument("--hosts", type=int, default=4, help="SimHost actors the members are spread over")
    p.add_argument("--partitions", type=int, default=8)
    p.add_argument("--session-ms", type=int, default=10_000)
    p.add_argument("--heartbeat-ms", type=int, default=3_000)
    p.add_argument("--fsync", default="always", choices=("always", "interval", "never"))
    args = p.parse_args(argv)
    svc = long_runs.start_service(NAMESPACE, args.partitions, "gc-soak-", rebalance_delay_ms=1_000, fsync=args.fsync)
    groups_n = args.members // args.group_size
    groups = spread_group_ids(args.partitions, -(-groups_n // args.partitions), prefix="soak")[:groups_n]
    try:
        stats = run_hosts(svc, groups, args.group_size, args.hosts, args.minutes * 60, args.session_ms,
                          args.heartbeat_ms)
        described = AdminClient(svc, request_timeout_ms=120_000).describe_groups(groups)
        unstable = [g for g, d in described.items() if d.group_state != "Stable" or len(d.members) != args.group_size]
    finally:
        stop(NAMESPACE)
    print(f"soak: {stats.summary()}; groups not Stable with all members at the end: {len(unstable)}")
    lat = sorted(stats.latencies_ms) or [0.0]
    result = {
        "args": vars(args),
        "members": stats.members,
        "groups": stats.groups_formed,
        "heartbeats": dict(stats.heartbeats),
        "commits": dict(stats.commits),
        "expiries": stats.expiries,
        "spurious_expiries": stats.spurious_expiries[:50],
        "latency_ms": {"p50": lat[len(lat) // 2], "p99": lat[int(len(lat) * 0.99)], "max": lat[-1]},
        "max_heartbeat_gap_ms": stats.max_send_gap_ms,
        "unstable_groups": unstable[:50],
    }
    long_runs.write_json(args.json, result)
    return 1 if stats.expiries or unstable else 0


if __name__ == "__main__":
    sys.exit(main())
