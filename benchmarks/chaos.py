"""Long chaos run: partition actors killed at random while GroupMembers heartbeat and commit.

Run from the repository root: `python -m benchmarks.chaos --minutes 10` (see --help). It starts a
local Ray and a service of its own, runs tests/reliability/rel_chaos.Chaos for the given time,
then verifies that no acknowledged commit was lost (also after one more restart of every
partition), that no member was expired and that every group ends Stable. Prints the figures,
writes them as JSON to --json PATH if given and exits non-zero if a check failed.
"""

from __future__ import annotations

import argparse
import sys
import time

from benchmarks import long_runs

long_runs.use_test_helpers()

from rel_chaos import Chaos  # noqa: E402

from groupcoord.actors import stop  # noqa: E402

NAMESPACE = "gc-bench-chaos"


def parse_args(argv: list[str] | None = None) -> argparse.Namespace:
    """The command line."""
    p = long_runs.parser(__doc__, minutes_help="how long to kill partitions for")
    p.add_argument("--partitions", type=int, default=4, help="offsets partitions of the service")
    p.add_argument("--groups", type=int, default=8)
    p.add_argument("--members", type=int, default=2, help="members per group")
    p.add_argument("--topic-partitions", type=int, default=6)
    p.add_argument("--seed", type=int, default=1)
    return p.parse_args(argv)


def main(argv: list[str] | None = None) -> int:
    """Run the chaos, print and save the figures; 0 when every check passed."""
    args = parse_args(argv)
    svc = long_runs.start_service(NAMESPACE, args.partitions, "gc-chaos-", rebalance_delay_ms=300)
    chaos = Chaos(svc, args.groups, args.members, args.topic_partitions, seed=args.seed)
    started = time.time()
    try:
        report = chaos.run(args.minutes * 60)
    finally:
        chaos.close()
        stop(NAMESPACE)
    fatal = chaos.fatal_errors()
    failures = []
    if report.lost:
        failures.append(f"{len(report.lost)} partitions lost acknowledged commits: {report.lost[:5]}")
    if report.identity_changes or report.heartbeats.get("UNKNOWN_MEMBER_ID"):
        failures.append(f"members were expired: {report.identity_changes} id changes, {dict(report.heartbeats)}")
    if fatal:
        failures.append(f"member loops died: {fatal[:3]!r}")
    print(report.summary())
    result = {
        "started": started,
        "args": vars(args),
        "seconds": report.seconds,
        "kills": dict(report.kills),
        "restart_s": sorted(report.restart_s),
        "commit_attempts": dict(report.attempts),
        "partitions_verified": report.partitions_checked,
        "restart_checks": report.restart_checks,
        "offsets_checked_after_restarts": report.restart_partitions_checked,
        "lost": report.lost,
        "ambiguous_applied": report.ambiguous_applied,
        "heartbeats": dict(report.heartbeats),
        "member_id_changes": report.identity_changes,
        "generation_changes": report.generation_changes,
        "poll_errors": dict(report.poll_errors),
        "failures": failures,
    }
    return long_runs.conclude(args.json, result)


if __name__ == "__main__":
    sys.exit(main())
