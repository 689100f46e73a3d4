"""Parent side of the log crash runs: start rel_log_writer.py children, SIGKILL them, verify each recovery.

Used by test_rel_log_crash.py (short) and benchmarks/chaos_log.py (long).
"""

from __future__ import annotations

import os
import random
import subprocess
import sys
import time
from dataclasses import dataclass, field
from pathlib import Path

from rel_log_writer import verify
from waiting import wait_for_exit

WRITER = Path(__file__).with_name("rel_log_writer.py")


@dataclass
class CrashFigures:
    """What one crash run did: kills, acknowledged offsets, and recovered ends."""

    kills: int = 0
    self_kills: int = 0  # writers that SIGKILLed themselves inside an fsync or a compaction step
    compactions: int = 0  # compactions that completed (and rewrote something) before their writer died
    acked: int = 0
    ends: list[int] = field(default_factory=list)
    records_checked: int = 0
    kills_while_cleaning: int = 0  # writers the parent killed while their cleaner process ran


@dataclass(frozen=True)
class WriterRun:
    """How one writer ended."""

    acked: int  # the highest offset it acknowledged as durable
    self_killed: bool  # it killed itself inside an fsync or a compaction step
    compactions: int  # compactions that completed and rewrote something
    while_cleaning: bool  # the parent killed it while its cleaner process ran


def run_writer(directory: Path, mode: str, seed: int, run_s: float, kill_p: float) -> WriterRun:
    """Run one writer until `run_s` passed (or it killed itself); SIGKILL it; say how it ended."""
    proc = subprocess.Popen(
        [sys.executable, str(WRITER), str(directory), mode, str(seed), str(kill_p)],
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
    )
    # The run starts once the writer has opened (recovered) its log and says so: on a loaded machine
    # starting Python and importing take longer than a whole run, and a kill then tests nothing.
    opened = proc.stdout.readline() if proc.stdout is not None else ""
    deadline = time.monotonic() + run_s
    while time.monotonic() < deadline and proc.poll() is None:
        time.sleep(0.01)
    self_killed = proc.poll() is not None
    while_cleaning = not self_killed and bool(_cleaner_processes(proc.pid))
    proc.kill()
    out, err = proc.communicate()
    out = opened + out
    assert proc.returncode == -9, f"writer died by itself (status {proc.returncode}):\n{err[-3000:]}"
    _no_cleaner_outlives(proc.pid)
    lines = out.splitlines()
    acked = [int(line) for line in lines if line.isdigit()]
    return WriterRun(max(acked, default=0), self_killed, lines.count("compacted"), while_cleaning)


def _cleaner_processes(parent_pid: int) -> list[int]:
    """Cleaner processes (storage.cleaner_process) started by `parent_pid`, alive or not yet reaped."""
    marker = f"m.main({parent_pid})".encode()
    found = []
    for entry in os.listdir("/proc"):
        if entry.isdigit():
            try:
                with open(f"/proc/{entry}/cmdline", "rb") as f:
                    if marker in f.read():
                        found.append(int(entry))
            except OSError:
                pass  # it ended while we looked
    return found


def _no_cleaner_outlives(parent_pid: int) -> None:
    """A killed writer's cleaner process dies with it (the kernel's parent-death signal), within seconds."""
    left = [pid for pid in _cleaner_processes(parent_pid) if not wait_for_exit(pid, 10)]
    assert not left, f"cleaner processes {left} outlived their writer {parent_pid}"


def crash_run(
    directory: Path, mode: str, rounds: int, seed: int, max_run_s: float = 0.4, kill_p: float = 0.003,
    min_self_kills: int = 0, min_compactions: int = 0, max_rounds: int | None = None,
    min_kills_while_cleaning: int = 0,
) -> CrashFigures:
    """Kill `rounds` writers in a row on one log directory, verifying after each kill; then more (up to
    `max_rounds`) until at least `min_self_kills` writers killed themselves, `min_compactions` completed and
    `min_kills_while_cleaning` writers were killed while their cleaner process ran."""
    rng = random.Random(seed)
    figures = CrashFigures()
    i = 0
    while i < rounds or (
        (figures.self_kills < min_self_kills or figures.compactions < min_compactions
         or figures.kills_while_cleaning < min_kills_while_cleaning)
        and i < (max_rounds or rounds)
    ):
        run = run_writer(directory, mode, rng.randrange(2**31), rng.uniform(0.05, max_run_s), kill_p)
        end, count = verify(directory, mode, run.acked)
        figures.kills += 1
        figures.self_kills += run.self_killed
        figures.compactions += run.compactions
        figures.kills_while_cleaning += run.while_cleaning
        figures.acked = max(figures.acked, run.acked)
        figures.ends.append(end)
        figures.records_checked += count
        assert i == 0 or end >= figures.ends[-2], f"the log end went back from {figures.ends[-2]} to {end}"
        i += 1
    return figures
