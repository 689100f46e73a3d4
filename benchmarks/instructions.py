"""`python -m benchmarks instructions [--update]`: CPU instructions of the hot paths, against a committed baseline.

A shared machine moves wall-clock figures by 2x; the instructions a piece of code executes do
not move. Each workload of benchmarks/instruction_workloads.py runs once under valgrind's
callgrind, which counts only while the workload runs (inside one functools.reduce call) and
dumps the count after it; the workloads are split between two callgrind processes that run side
by side. Callgrind starts uninstrumented (--instr-atstart=no) and the workload process turns
instrumentation on around each counted call only (a client request, see instruction_workloads):
the interpreter's start, the imports and the inputs' preparation run ~5x faster that way, and
the counts are those of a fully instrumented run (within 0.3%). `make test` compares the counts
with benchmarks/baselines/instructions.json (tests/bench/test_instructions.py): a change of more
than 15% either way fails. A slower path is a regression; a faster one means the baseline is
stale. `--update` writes a new baseline, to be committed on purpose with a message that says why
the count moved.
"""

from __future__ import annotations

import argparse
import glob
import json
import os
import platform
import shutil
import subprocess
import sys
import tempfile
import time
from pathlib import Path

from benchmarks import common, instruction_workloads

BASELINE = Path(__file__).resolve().parent / "baselines" / "instructions.json"
TOLERANCE = 0.15
# The workloads each callgrind process counts, in order: the processes run side by side (8-10 s of CPU
# each), so the guard takes about half the wall time on two cores. A workload's count depends on what
# ran before it in its process (warmed caches, the interpreter's specialized code: join_sync_1000 counted
# first in its process is 15% higher), so the grouping is part of the baseline.
PROCESSES = (("heartbeat", "join_sync_1000", "session_timers"),
             ("commit_apply", "replay_20k", "columnar_read", "bulk_replay_20k", "consumer_lag"))


def environment() -> dict:
    """What the counts depend on besides our code: the interpreter and the msgpack build."""
    import msgpack

    return {"python": platform.python_version(), "implementation": platform.python_implementation(),
            "machine": platform.machine(), "msgpack": list(msgpack.version)}  # as the JSON baseline holds it


def measure(names: list[str] | None = None) -> dict[str, int]:
    """Instructions each workload executes, counted by callgrind in the processes of PROCESSES (run side by side)."""
    names = list(names or instruction_workloads.WORKLOADS)
    if shutil.which("valgrind") is None:
        raise RuntimeError("valgrind is not installed: the instruction guard needs valgrind --tool=callgrind")
    groups = [[n for n in group if n in names] for group in PROCESSES]
    groups = [g for g in groups if g] + [[n for n in names if not any(n in g for g in PROCESSES)]]
    with tempfile.TemporaryDirectory(prefix="gc-instructions-") as tmp:
        data = Path(tmp) / "data"
        data.mkdir()
        instruction_workloads.prepare_logs(data)  # natively: writing them under valgrind would take long
        runs = [_start(Path(tmp) / f"callgrind-{i}.out", group) for i, group in enumerate(groups) if group]
        counts: dict[str, int] = {}
        for out, group, process in runs:
            counts.update(_finish(out, group, process))
    return {n: counts[n] for n in names}


def _start(out: Path, names: list[str]) -> tuple[Path, list[str], subprocess.Popen]:
    """Start one callgrind process that counts `names` in turn, dumping one count per workload.

    It runs in the temporary directory and is given `data`, a relative path: the directory's random name
    would move the counts that touch paths (columnar_read's by ~1%).
    """
    # A fixed environment, not the caller's: its size and content move the counts a little (pytest's own
    # variables, the shell's OLDPWD), and a run that wrote bytecode would change the next run's imports.
    env = {"PATH": os.environ.get("PATH", os.defpath), "LC_ALL": "C.UTF-8", "PYTHONHASHSEED": "0",
           "PYTHONDONTWRITEBYTECODE": "1", "PYTHONPATH": os.pathsep.join(
               p for p in (str(common.REPO_ROOT), os.environ.get("PYTHONPATH", "")) if p)}
    # Instrumented only around each counted call where the workload process can ask for it.
    around = instruction_workloads.client_requests_work()
    instr = ["--instr-atstart=no"] if around else []
    cmd = ["valgrind", "--tool=callgrind", *instr, "--collect-atstart=no", "--toggle-collect=functools_reduce",
           "--dump-after=functools_reduce", f"--callgrind-out-file={out}",
           sys.executable, "-m", "benchmarks.instruction_workloads", "data",
           *([instruction_workloads.INSTRUMENT_COUNTED] if around else []), *names]
    process = subprocess.Popen(cmd, env=env, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, text=True,
                               cwd=out.parent)
    return out, names, process


def _finish(out: Path, names: list[str], process: subprocess.Popen) -> dict[str, int]:
    """Wait for a callgrind process of _start and read its per-workload counts."""
    _, stderr = process.communicate()
    if process.returncode != 0:
        raise RuntimeError(f"the counted run of {names} failed ({process.returncode}):\n{stderr[-3000:]}")
    parts = sorted(glob.glob(f"{out}.*"), key=lambda p: int(p.rsplit(".", 1)[1]))
    counts = [_total(p) for p in parts]
    if len(counts) != len(names):
        raise RuntimeError(f"expected one callgrind dump per workload ({len(names)}), got {len(counts)}")
    return dict(zip(names, counts, strict=True))


def _total(path: str) -> int:
    """A dump's count: its `totals:` line (the sum of its cost lines), at the end of the file.

    Not its `summary:` line near the top: once instrumentation was stopped and started again, the summary
    of a later dump is callgrind's global counter minus a stale one (off by ~90 M, or negative).
    """
    with open(path) as f:
        for line in f:
            if line.startswith("totals:"):
                return int(line.split()[1])
    raise RuntimeError(f"no totals in callgrind dump {path}")


def load_baseline(path: Path = BASELINE) -> dict:
    """The committed baseline: {"environment": ..., "instructions": {workload: count}}."""
    return json.loads(path.read_text())


def compare(counts: dict[str, int], baseline: dict, tolerance: float = TOLERANCE) -> list[dict]:
    """Each workload's count beside the baseline's, its relative change, and whether it is within tolerance."""
    rows = []
    for name, count in counts.items():
        base = baseline["instructions"].get(name)
        change = (count - base) / base if base else float("inf")
        rows.append({"workload": name, "instructions": count, "baseline": base, "change": change,
                     "ok": base is not None and abs(change) <= tolerance})
    return rows


def main(argv: list[str] | None = None) -> int:
    """Measure, print the comparison, and with --update write the new baseline."""
    parser = argparse.ArgumentParser(prog="python -m benchmarks instructions", description=__doc__)
    parser.add_argument("--update", action="store_true", help="write the counts as the new baseline")
    parser.add_argument("workloads", nargs="*", help=f"some of: {', '.join(instruction_workloads.WORKLOADS)}")
    args = parser.parse_args(argv)
    started = time.perf_counter()
    counts = measure(args.workloads or None)
    baseline = load_baseline() if BASELINE.exists() else {"instructions": {}, "environment": {}}
    rows = compare(counts, baseline)
    common.print_table(
        f"CPU instructions (callgrind), baseline {BASELINE.relative_to(common.REPO_ROOT)}, "
        f"tolerance {TOLERANCE:.0%} ({time.perf_counter() - started:.0f} s)",
        ["workload", "instructions", "baseline", "change", ""],
        [[r["workload"], f"{r['instructions']:,}", f"{r['baseline']:,}" if r["baseline"] else "-",
          f"{r['change']:+.1%}" if r["baseline"] else "-", "ok" if r["ok"] else "OUT"] for r in rows],
    )
    if baseline.get("environment") and baseline["environment"] != environment():
        print(f"note: the baseline was taken with {baseline['environment']}, this run with {environment()}")
    if args.update:
        BASELINE.parent.mkdir(parents=True, exist_ok=True)
        kept = {n: c for n, c in baseline.get("instructions", {}).items() if n in instruction_workloads.WORKLOADS}
        doc = {"environment": environment(), "tolerance": TOLERANCE, "instructions": {**kept, **counts}}
        BASELINE.write_text(json.dumps(doc, indent=2) + "\n")
        print(f"wrote {BASELINE}: commit it with a message that says why the counts moved")
        return 0
    return 0 if all(r["ok"] for r in rows) else 1


if __name__ == "__main__":
    sys.exit(main())
