"""`python -m benchmarks test-mutations`: break a behaviour the fault tests name, and show a test turns red.

Each mutation replaces one exact piece of product code (found by its text under a room of the
repository, so that files may move) in a temporary copy of the worktree, never in the worktree
itself, and runs the tests that should catch it against that copy (the copy's rooms are put first
on PYTHONPATH as the `groupcoord` package, ahead of the editable install). A mutation is caught when
the tests fail; a control run of the same tests on the unmutated copy must pass, so that a red run
means the break and not a flaky test. Writes benchmarks/results/mutations.json; exits 1 if any
mutation survived or any control failed.
"""

from __future__ import annotations

import argparse
import json
import os
import shutil
import subprocess
import sys
import tempfile
import time
from dataclasses import dataclass
from pathlib import Path

from benchmarks.common import REPO_ROOT, RESULTS_DIR, machine

ROOMS = ("protocol", "storage", "actors", "spark")


@dataclass(frozen=True)
class Mutation:
    """One deliberate break: the text `old` (unique under `room`) becomes `new`; `tests` should turn red."""

    name: str
    room: str
    old: str
    new: str
    tests: tuple[str, ...]


MUTATIONS = (
    Mutation(
        "a follower answers the leader before its records are fsynced",
        "actors",
        "            self._queue(base, records)\n        plog.flush()\n",
        "            self._queue(base, records)\n",
        ("tests/actors/test_follower_durability.py",),
    ),
    Mutation(
        "a crashed partition keeps its process (no restart, the pid stays)",
        "actors",
        '        """End this process at once, as a crash would (for fault tests and the demo)."""\n'
        "        os._exit(1)\n",
        '        """End this process at once, as a crash would (for fault tests and the demo)."""\n',
        ("tests/actors/test_partition_actors.py::test_restart_during_rebalance_forces_a_rejoin",),
    ),
    Mutation(
        "a failed compaction step is swallowed (the compaction reports success)",
        "storage",
        "            try:\n                result = compactor.run()\n            except BaseException as e:\n"
        "                if compactor.committed:\n                    self._fail(e)\n                raise\n",
        "            try:\n                result = compactor.run()\n            except Exception:\n"
        "                return CompactionResult()\n",
        ("tests/storage/test_compaction_failures.py",),
    ),
    Mutation(
        "compaction never runs (returns at once, as a dead compaction thread would leave the log)",
        "storage",
        '        """Compact the closed segments now (see storage.compaction); safe beside append and flush."""\n',
        '        """Compact the closed segments now (see storage.compaction); safe beside append and flush."""\n'
        "        return CompactionResult()\n",
        ("tests/reliability/test_rel_log_crash.py::test_rel_sigkilled_writer_loses_no_acknowledged_record[compact]",),
    ),
    Mutation(
        "poll answers an empty assignment for an invalid group id",
        "actors",
        "        if error in _FATAL_JOIN_ERRORS:\n",
        "        if error == Errors.INVALID_GROUP_ID:\n            return None\n"
        "        if error in _FATAL_JOIN_ERRORS:\n",
        ("tests/reliability/test_rel_bad_input_ray.py::"
         "test_rel_group_member_with_a_bad_group_id_fails_clearly_on_poll",),
    ),
    Mutation(
        "the coalescer resends a batch lost with its actor (an answer after the kill)",
        "actors",
        "            results = ray.get(ref, timeout=_ABANDON_AFTER_S)\n",
        "            for _ in range(30):  # resent until the restarted actor answers\n"
        "                try:\n                    results = ray.get(ref, timeout=_ABANDON_AFTER_S)\n"
        "                    break\n"
        "                except (ray.exceptions.RayActorError, ray.exceptions.ActorUnavailableError):\n"
        "                    time.sleep(1)\n"
        "                    ref = self.handle.batch.remote([(a, r) for a, r, _ in live])\n",
        ("tests/actors/test_coalescer.py::"
         "test_a_batch_held_by_a_killed_actor_fails_with_an_actor_error_and_the_next_one_is_served",),
    ),
    Mutation(
        "a log segment's fsync does nothing (appends acknowledged undurable)",
        "storage",
        "            self.files.fsync(self.fd)\n",
        "            pass\n",
        ("tests/storage/test_powerloss.py",),
    ),
    Mutation(
        "a heartbeat during a rebalance is answered NONE instead of REBALANCE_IN_PROGRESS",
        "protocol",
        "        return Errors.REBALANCE_IN_PROGRESS if group.in_state(PREPARING) else Errors.NONE\n",
        "        return Errors.NONE\n",
        ("tests/reliability/test_rel_bad_input_shard.py",),
    ),
)


def copy_worktree(dest: Path) -> Path:
    """The tracked (and new, unignored) files of the worktree under `dest`/tree, and `dest`/src/groupcoord
    pointing at its rooms; returns the tree."""
    listed = subprocess.run(["git", "ls-files", "-co", "--exclude-standard", "-z"], cwd=REPO_ROOT,
                            capture_output=True, check=True).stdout.decode().split("\0")
    tree = dest / "tree"
    for rel in filter(None, listed):
        src = REPO_ROOT / rel
        if src.is_file():
            (tree / rel).parent.mkdir(parents=True, exist_ok=True)
            shutil.copy2(src, tree / rel)
    package = dest / "src" / "groupcoord"
    package.mkdir(parents=True)
    for room in ROOMS:
        (package / room).symlink_to(tree / room, target_is_directory=True)
    return tree


def apply(tree: Path, mutation: Mutation) -> Path:
    """Replace the mutation's text in the one file of its room that holds it; that file."""
    holders = [p for p in sorted((tree / mutation.room).rglob("*.py")) if mutation.old in p.read_text()]
    if len(holders) != 1 or holders[0].read_text().count(mutation.old) != 1:
        raise LookupError(f"{mutation.name}: the text to break is in {len(holders)} files, not exactly once in one")
    path = holders[0]
    text = path.read_text().replace(mutation.old, mutation.new)
    if "time.sleep" in mutation.new and "\nimport time\n" not in text:
        text = text.replace("\nimport ray\n", "\nimport time\n\nimport ray\n", 1)
    path.write_text(text)
    return path


INFRASTRUCTURE = ("timed out during startup",)  # a machine too loaded to start Ray: no verdict, run again


def run_tests(tree: Path, src: Path, tests: tuple[str, ...], timeout_s: float, attempts: int = 3) -> dict:
    """Run pytest on `tests` in the copy (again, up to `attempts` times, when Ray could not even start); its
    exit status, the tests that failed, and the lines that say why."""
    env = dict(os.environ, PYTHONPATH=f"{src}{os.pathsep}{os.environ.get('PYTHONPATH', '')}".rstrip(os.pathsep))
    cmd = [sys.executable, "-m", "pytest", "-x", "-q", "-p", "no:cacheprovider", "--no-header", *tests]
    tries = 0
    while tries < attempts:
        tries += 1
        started = time.monotonic()
        try:
            done = subprocess.run(cmd, cwd=tree, env=env, capture_output=True, text=True, timeout=timeout_s)
            status, out = done.returncode, done.stdout + done.stderr
        except subprocess.TimeoutExpired as e:
            status, out = None, f"timed out after {timeout_s:.0f} s: {e.stdout!r:.2000}"
        if not any(marker in out for marker in INFRASTRUCTURE):
            break
    lines = [line for line in out.splitlines() if line.strip()]
    return {"status": status, "attempts": tries, "seconds": round(time.monotonic() - started, 1),
            "failed": [line for line in lines if line.startswith("FAILED")],
            "tail": [line for line in lines if line.startswith(("FAILED", "ERROR", "E  "))][:6] + lines[-2:]}


def imported_from(tree: Path, src: Path) -> str:
    """Where the copy's Python imports groupcoord.storage from (must be the copy)."""
    env = dict(os.environ, PYTHONPATH=str(src))
    return subprocess.run([sys.executable, "-c", "import groupcoord.storage as s; print(s.__file__)"], cwd=tree,
                          env=env, capture_output=True, text=True, check=True).stdout.strip()


def main(argv: list[str] | None = None) -> int:
    """Apply each mutation to a fresh copy, run its tests, and write the table."""
    parser = argparse.ArgumentParser(prog="python -m benchmarks test-mutations", description=__doc__)
    parser.add_argument("--only", default="", help="run only mutations whose name contains one of these texts "
                        "(separated by |)")
    parser.add_argument("--no-control", action="store_true", help="skip the control runs on unmutated copies")
    parser.add_argument("--timeout", type=float, default=900.0, help="seconds per pytest run")
    parser.add_argument("--json", default=str(RESULTS_DIR / "mutations.json"))
    parser.add_argument("--check", action="store_true", help="only check that every text to break is found")
    args = parser.parse_args(argv)
    if args.check:
        for mutation in MUTATIONS:
            with tempfile.TemporaryDirectory(prefix="gc-mutation-check-") as tmp:
                shutil.copytree(REPO_ROOT / mutation.room, Path(tmp) / mutation.room)
                print(f"{mutation.name}: {apply(Path(tmp), mutation).relative_to(tmp)}")
        return 0
    rows = []
    for mutation in MUTATIONS:
        if args.only and not any(part in mutation.name for part in args.only.split("|")):
            continue
        with tempfile.TemporaryDirectory(prefix="gc-mutation-") as tmp:
            tree = copy_worktree(Path(tmp))
            src = Path(tmp) / "src"
            where = imported_from(tree, src)
            if not where.startswith(tmp):
                raise RuntimeError(f"the copy imports groupcoord from {where}, not from itself")
            control = None if args.no_control else run_tests(tree, src, mutation.tests, args.timeout)
            path = apply(tree, mutation)
            broken = run_tests(tree, src, mutation.tests, args.timeout)
        row = {"mutation": mutation.name, "file": str(path.relative_to(tree)), "tests": list(mutation.tests),
               # Caught: a test failed (an error in a fixture, such as Ray not starting, or a timeout is no catch).
               "caught": bool(broken["failed"]),
               "control_passed": None if control is None else control["status"] == 0,
               "run": broken, "control": control}
        rows.append(row)
        control_note = "" if control is None else f", control {'green' if row['control_passed'] else 'RED'}"
        print(f"{'caught  ' if row['caught'] else 'SURVIVED'} {mutation.name} ({row['file']}; "
              f"{broken['seconds']:.0f} s{control_note})\n         by {', '.join(mutation.tests)}", flush=True)
    if args.only and Path(args.json).exists():  # a partial run updates its rows of the last full one
        ran = {r["mutation"] for r in rows}
        earlier = json.loads(Path(args.json).read_text()).get("mutations", [])
        order = [m.name for m in MUTATIONS]
        rows = sorted([r for r in earlier if r["mutation"] not in ran] + rows,
                      key=lambda r: order.index(r["mutation"]) if r["mutation"] in order else len(order))
    doc = {"benchmark": "test-mutations", "machine": machine(),
           "finished": time.strftime("%Y-%m-%d %H:%M UTC", time.gmtime()), "mutations": rows}
    Path(args.json).parent.mkdir(parents=True, exist_ok=True)
    Path(args.json).write_text(json.dumps(doc, indent=2) + "\n")
    print(f"wrote {args.json}")
    bad = [r for r in rows if not r["caught"] or r["control_passed"] is False]
    return 1 if bad else 0


if __name__ == "__main__":
    sys.exit(main())
