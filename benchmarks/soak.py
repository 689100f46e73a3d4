"""Long soak: thousands of simulated members heartbeating (and committing) for minutes, with no false expiry.

Run from the repository root: `python -m benchmarks.soak --minutes 5 --members 3000` (see --help).
Members are tests/reliability/rel_sim.SimHost loops (JoinGroup/SyncGroup/Heartbeat/OffsetCommit
straight to the partition actors) spread over a few host actors. Prints heartbeat latency, the
longest gap between a member's heartbeats and the expiries (a "spurious" one is an expiry that
came sooner than a session after the member's last answered heartbeat, by the client's clock);
writes them as JSON to --json PATH if given and exits non-zero if any member was expired.
"""

from __future__ import annotations

import argparse
import json
import os
import sys
import tempfile
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path[:0] = [str(ROOT / "tests" / "reliability"), str(ROOT / "tests")]  # rel_* helpers and waiting

import ray  # noqa: E402
from rel_chaos import spread_group_ids  # noqa: E402
from rel_sim import run_hosts  # noqa: E402

from groupcoord.actors import start, stop  # noqa: E402
from groupcoord.actors.admin import AdminClient  # noqa: E402
from groupcoord.protocol import GroupConfig  # noqa: E402

NAMESPACE = "gc-bench-soak"


def write_json(path: str | None, text: str) -> None:
    """Write `text` to `path`, if one was given."""
    if path:
        Path(path).write_text(text)


def main(argv: list[str] | None = None) -> int:
    """Run the soak, print and save the figures; 0 when no member was expired."""
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--json", default=None, help="write the figures to this file as JSON")
    p.add_argument("--minutes", type=float, default=5.0)
    p.add_argument("--members", type=int, default=3000)
    p.add_argument("--group-size", type=int, default=10)
    p.add_argument("--hosts", type=int, default=4, help="SimHost actors the members are spread over")
    p.add_argument("--partitions", type=int, default=8)
    p.add_argument("--session-ms", type=int, default=10_000)
    p.add_argument("--heartbeat-ms", type=int, default=3_000)
    p.add_argument("--fsync", default="always", choices=("always", "interval", "never"))
    args = p.parse_args(argv)
    os.environ.setdefault("RAY_USAGE_STATS_ENABLED", "0")
    ray.init(include_dashboard=False, log_to_driver=False, namespace=NAMESPACE)
    svc = start(
        num_partitions=args.partitions,
        storage_path=tempfile.mkdtemp(prefix="gc-soak-"),
        namespace=NAMESPACE,
        fsync=args.fsync,
        config=GroupConfig(min_session_timeout_ms=100, initial_rebalance_delay_ms=1_000),
    )
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
    write_json(args.json, json.dumps(result, indent=2) + "\n")
    return 1 if stats.expiries or unstable else 0


if __name__ == "__main__":
    sys.exit(main())
