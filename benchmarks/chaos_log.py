"""Long crash-consistency run of the partition log: writer processes SIGKILLed at random, for N minutes.

Run from the repository root: `python -m benchmarks.chaos_log --minutes 5`. Rotates append
runs and compaction runs with the cleaner in a thread and in its child process
(tests/reliability/rel_crash_runner.crash_run), each on a fresh log
directory of `--rounds` kills, verifying after every kill that the reopened log holds every
acknowledged record, decodes, and replays to the right state. Prints the figures (and writes
them as JSON to --json PATH if given); exits non-zero on the first violation (an AssertionError).
"""

from __future__ import annotations

import json
import sys
import tempfile
import time
from pathlib import Path

from benchmarks import long_runs

long_runs.use_test_helpers()

from rel_crash_runner import crash_run  # noqa: E402


def main(argv: list[str] | None = None) -> int:
    """Kill writers until the time is up; print and save the figures."""
    p = long_runs.parser(__doc__)
    p.add_argument("--rounds", type=int, default=40, help="kills per log directory before starting a fresh one")
    p.add_argument("--kill-p", type=float, default=0.003, help="self-kill chance per fsync (x4 per compaction step)")
    p.add_argument("--max-run-s", type=float, default=0.8, help="longest a writer runs before the parent kills it")
    p.add_argument("--seed", type=int, default=1)
    args = p.parse_args(argv)
    deadline = time.monotonic() + args.minutes * 60
    keys = ("runs", "kills", "self_kills", "kills_while_cleaning", "acked", "records_verified")
    modes = ("append", "compact", "compact-child")
    totals = {m: dict.fromkeys(keys, 0) for m in modes}
    i = 0
    while time.monotonic() < deadline:
        mode = modes[i % len(modes)]
        with tempfile.TemporaryDirectory(prefix="gc-chaos-log-") as d:
            figures = crash_run(Path(d) / "log", mode, args.rounds, args.seed + i, args.max_run_s, args.kill_p)
        t = totals[mode]
        t["runs"] += 1
        t["kills"] += figures.kills
        t["self_kills"] += figures.self_kills
        t["kills_while_cleaning"] += figures.kills_while_cleaning
        t["acked"] += figures.acked
        t["records_verified"] += figures.records_checked
        i += 1
        print(f"{mode}: {figures.kills} kills, acked to {figures.acked}, end {figures.ends[-1]}", flush=True)
    print(json.dumps(totals))
    long_runs.write_json(args.json, {"args": vars(args), "totals": totals})
    return 0


if __name__ == "__main__":
    sys.exit(main())
