"""Shared preamble of the long reliability runs (chaos, chaos_log, soak).

They drive the tests' reliability helpers (tests/reliability/rel_*) for a number of minutes, take
`--json PATH` and `--minutes`, and write their figures as JSON; chaos and soak start a local Ray
and a service of their own first. Ray and groupcoord are imported only when a service is started.
"""

from __future__ import annotations

import argparse
import json
import os
import sys
import tempfile
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parent.parent


def use_test_helpers() -> None:
    """Put tests/reliability (the rel_* helpers) and tests (waiting) first on sys.path, to import them."""
    sys.path[:0] = [str(ROOT / "tests" / "reliability"), str(ROOT / "tests")]


def parser(doc: str, minutes_help: str | None = None) -> argparse.ArgumentParser:
    """A parser described by the first line of `doc`, with the shared `--json PATH` and `--minutes` (default 5)."""
    p = argparse.ArgumentParser(description=doc.splitlines()[0])
    p.add_argument("--json", default=None, help="write the figures to this file as JSON")
    p.add_argument("--minutes", type=float, default=5.0, help=minutes_help)
    return p


def write_json(path: str | None, figures: dict) -> None:
    """Write `figures` as indented JSON to `path`, if one was given."""
    if path:
        Path(path).write_text(json.dumps(figures, indent=2) + "\n")


def conclude(path: str | None, figures: dict) -> int:
    """Write `figures` (see write_json), print each of its "failures" to stderr; the exit code (1 on failure)."""
    write_json(path, figures)
    for f in figures["failures"]:
        print(f"FAILED: {f}", file=sys.stderr)
    return 1 if figures["failures"] else 0


def start_service(namespace: str, partitions: int, storage_prefix: str, rebalance_delay_ms: int,
                  fsync: str = "always") -> Any:
    """Start a local Ray (no dashboard, no usage stats) and a service in `namespace` over a fresh temp dir.

    Sessions may be as short as 100 ms; a new group's first rebalance waits `rebalance_delay_ms`.
    """
    import ray

    from groupcoord.actors import start
    from groupcoord.protocol import GroupConfig

    os.environ.setdefault("RAY_USAGE_STATS_ENABLED", "0")
    ray.init(include_dashboard=False, log_to_driver=False, namespace=namespace)
    return start(
        num_partitions=partitions,
        storage_path=tempfile.mkdtemp(prefix=storage_prefix),
        namespace=namespace,
        fsync=fsync,
        config=GroupConfig(min_session_timeout_ms=100, initial_rebalance_delay_ms=rebalance_delay_ms),
    )
