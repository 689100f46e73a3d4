"""Long chaos run: partition actors killed at random while GroupMembers heartbeat and commit.

Run from the repository root: `python -m benchmarks.chaos --minutes 10` (see --help). It starts a
local Ray and a service of its own, runs tests/reliability/rel_chaos.Chaos for the given time,
then verifies that no acknowledged commit was lost (also after one more restart of every
partition), that no member was expired and that every group ends Stable. Prints the figures,
writes them as JSON to --json PATH if given and exits non-zero if a check failed.
"""

from __future__ import annotations

import argparse
import json
import os
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path[:0] = [str(ROOT / "tests" / "reliability"), str(ROOT / "tests")]  # rel_* helpers and waiting

import ray  # noqa: E402
from rel_chaos import Chaos  # noqa: E402

from groupcoord.actors import start, stop  # noqa: E402
from groupcoord.protocol import GroupConfig  # noqa: E402

NAMESPACE = "gc-bench-chaos"


def parse_args(argv: list[str] | None = None) -> argparse.Namespace:
    """The command line."""
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--json", default=None, help="write the figures to this file as JSON")
    p.add_argument("--minutes", type=float, default=5.0, help="how long to kill partitions for")
    p.add_argument("--partitions", type=int, default=4, help="offsets partitions of the service")
    p.add_argument("--groups", type=int, default=8)
    p.add_argument("--members", type=int, default=2, help="members per group")
    p.add_argument("--topic-partitions", type=int, default=6)
    p.add_argument("--seed", type=int, default=1)
    return p.parse_args(argv)


def write_json(path: str | None, text: str) -> None:
    """Write `text` to `path`, if one was given."""
    if path:
        Path(path).write_text(text)


def main(argv: list[str] | None = None) -> int:
    """Run the chaos, print and save the figures; 0 when every check passed."""
    args = parse_args(argv)
    os.environ.setdefault("RAY_USAGE_STATS_ENABLED", "0")
    ray.init(include_dashboard=False, log_to_driver=False, namespace=NAMESPACE)
    storage = tempfile.mkdtemp(prefix="gc-chaos-")
    svc = start(
        num_partitions=args.partitions,
        storage_path=storage,
        namespace=NAMESPACE,
        config=GroupConfig(min_session_timeout_ms=100, initial_rebalance_delay_ms=300),
    )
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
    write_json(args.json, json.dumps(result, indent=2) + "\n")
    for f in failures:
        print(f"FAILED: {f}", file=sys.stderr)
    return 1 if failures else 0


if __name__ == "__main__":
    sys.exit(main())
