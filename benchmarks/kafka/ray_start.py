"""Starting Ray nodes on a loaded machine: why they fail there, and the priority that lets them start.

Ray 2.60's raylet, once started, waits a fixed 15 s for its dashboard agent (a Python process it
spawns) to write its metrics port file, and aborts if it is late ("Timed out waiting for file
.../metrics_agent_port_<node>" in raylet.out; RAY_agent_register_timeout_ms does not change that wait);
the driver then gives up 30 s later with "The current node timed out during startup". The agent needs
about 1.5 s of CPU to get there, which at a load average of 40-60 on this machine's two cores is
more than 15 s of wall time: that, not stale processes or ports, is why Ray's node did not start in
the earlier combined vs-kafka runs. `starting_priority()` runs a node's start with a raised scheduling
priority (which the processes it spawns inherit), and puts every process it started, thread by thread,
and this process back to their former priority afterwards, so the measurements themselves run at
the same priority as Kafka's JVMs and everyone else's work.
"""

from __future__ import annotations

import contextlib
import logging
import os
from pathlib import Path
from typing import Iterator

logger = logging.getLogger(__name__)

BOOST = 10  # niceness points taken off while a node starts (root only)


def _threads(pid: int) -> list[int]:
    try:
        return [int(t.name) for t in Path(f"/proc/{pid}/task").iterdir()]
    except (FileNotFoundError, ProcessLookupError, PermissionError):
        return []


def _descendants(pid: int) -> set[int]:
    """Every process below `pid` (from /proc's parent links)."""
    children: dict[int, list[int]] = {}
    for entry in Path("/proc").iterdir():
        if not entry.name.isdigit():
            continue
        try:
            ppid = int((entry / "stat").read_text().rsplit(")", 1)[1].split()[1])
        except (OSError, IndexError, ValueError):
            continue
        children.setdefault(ppid, []).append(int(entry.name))
    out: set[int] = set()
    todo = [pid]
    while todo:
        for child in children.get(todo.pop(), []):
            if child not in out:
                out.add(child)
                todo.append(child)
    return out


def _set_niceness(pids: set[int], niceness: int) -> int:
    """Set every thread of `pids` to `niceness`; how many threads were changed."""
    changed = 0
    for pid in pids:
        for tid in _threads(pid):
            with contextlib.suppress(ProcessLookupError, PermissionError):
                os.setpriority(os.PRIO_PROCESS, tid, niceness)
                changed += 1
    return changed


@contextlib.contextmanager
def starting_priority(boost: int = BOOST) -> Iterator[None]:
    """Run the block (a Ray node's start) `boost` niceness points ahead, then put back every thread of this
    process and of the processes started meanwhile. Without root (no negative niceness) it only runs the block."""
    me = os.getpid()
    base = os.getpriority(os.PRIO_PROCESS, 0)
    if os.geteuid() != 0 or boost <= 0:
        yield
        return
    before = _descendants(me)
    os.setpriority(os.PRIO_PROCESS, 0, base - boost)  # this thread: what it forks now inherits the boost
    try:
        yield
    finally:
        started = _descendants(me) - before
        changed = _set_niceness(started | {me}, base)
        logger.debug("put %d threads of %d processes back to niceness %d", changed, len(started), base)
