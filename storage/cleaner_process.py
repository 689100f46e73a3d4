"""A compaction's reading and rewriting in a child process, so that the cleaner does not take the GIL
from the partition's request path.

The cleaner is CPU-bound Python: run in a thread of the partition actor, it held the GIL for
seconds, and the thread that appends and fsyncs waited for it each time (appends fell to a
third of their rate while it ran; `python -m benchmarks storage` measures it). `ChildCleaner`
is a CleanerWork whose two heavy steps run in `python -c ...` at a lower priority: the child
scans the segments once (the survivors) and writes each group's `.cleaned` file when the parent
asks for it. Everything else stays with the parent, unchanged: the groups, the writer fence,
and steps 2-4 of the swap protocol (see storage.compaction), one group at a time in log order,
so a crash at any point leaves what the thread version would. The child dies with its parent.

Messages are pickles over the child's stdin and stdout; the child logs to stderr.
"""

from __future__ import annotations

import contextlib
import ctypes
import errno
import functools
import logging
import os
import pickle
import signal
import subprocess
import sys
from pathlib import Path
from typing import Any, BinaryIO

from .compaction import Compactor, ScanHere
from .errors import CompactionError
from .segment import Segment

log = logging.getLogger(__name__)

NICE_INCREMENT = 10  # the child's priority below the partition's (ChildCleaner.nice_increment: what a child gets)
_PR_SET_PDEATHSIG = 1


def _segment_fields(seg: Segment, size: int | None = None) -> tuple[str, int, int, int, bool]:
    return str(seg.path), seg.base_offset, seg.size if size is None else size, seg.next_offset, seg.clean


class ChildCleaner:
    """CleanerWork in a child process (see the module docstring): whatever happens to the child fails the
    compaction before its commit (CompactionError, or an OSError from `write`, which the Compactor turns
    into one), never the log.

    `nice_increment` is how far below the parent's priority the child runs (NICE_INCREMENT). The test suite
    sets it to 0: on a machine whose cores are all busy, a child ten steps below everything else gets a
    tenth of a core, and the compaction the test waits on takes several times its CPU time.
    """

    nice_increment: int = NICE_INCREMENT

    def __init__(self, compactor: Compactor) -> None:
        c = compactor
        self.directory = c.directory
        plan = {"directory": str(c.directory), "closed": [_segment_fields(s) for s in c.closed],
                "active": _segment_fields(c.active, c.active_size), "segment_bytes": c.segment_bytes,
                "now_ms": c.now_ms, "retention_ms": c.retention_ms, "nice_increment": self.nice_increment}
        # The parent's import path, so that the child finds this module however the parent found it.
        env = dict(os.environ, PYTHONPATH=os.pathsep.join(p for p in sys.path if p))
        code = f"import {__name__} as m; m.main({os.getpid()})"
        try:
            self.proc = subprocess.Popen([sys.executable, "-c", code], stdin=subprocess.PIPE,
                                         stdout=subprocess.PIPE, env=env)
        except OSError as e:  # no process to be had (EAGAIN, ENOMEM): this compaction fails, the log carries on
            raise CompactionError(f"compaction of {c.directory} could not start its cleaner process: {e}",
                                  False) from e
        try:
            self._send(plan)
        except OSError as e:
            self.close()
            raise CompactionError(f"compaction of {c.directory} lost its cleaner process: {e}", False) from e

    def survivors(self) -> tuple[list[int], int, list[int]]:
        """See CleanerWork.survivors; a failure is a CompactionError that committed nothing."""
        try:
            return self._receive()
        except OSError as e:
            raise CompactionError(f"compaction of {self.directory} failed before its commit: {e}", False) from e

    def write(self, first: int, last: int, end: int, cleaned: Path) -> int:
        """See CleanerWork.write."""
        self._send(("write", first, last, end, str(cleaned)))
        return self._receive()

    def close(self) -> None:
        """Tell the child to exit; kill it if it does not."""
        with contextlib.suppress(OSError):
            self._send(("done",))
        try:
            self.proc.wait(timeout=10)
        except subprocess.TimeoutExpired:
            self.proc.kill()
            self.proc.wait()
        for stream in (self.proc.stdin, self.proc.stdout):
            if stream is not None:
                with contextlib.suppress(OSError):  # a pipe the child's death broke
                    stream.close()

    def _send(self, message: Any) -> None:
        stdin = self.proc.stdin
        assert stdin is not None
        try:
            pickle.dump(message, stdin)
            stdin.flush()
        except (BrokenPipeError, ValueError) as e:
            raise OSError(errno.EIO, f"the cleaner process is gone ({self._exit()})") from e

    def _receive(self) -> Any:
        stdout = self.proc.stdout
        assert stdout is not None
        try:
            kind, *rest = pickle.load(stdout)
        except (EOFError, pickle.UnpicklingError) as e:
            raise OSError(errno.EIO, f"the cleaner process ended without an answer ({self._exit()})") from e
        if kind == "ok":
            return rest[0]
        code, message = rest
        raise OSError(code or errno.EIO, f"in the cleaner process: {message}")

    def _exit(self) -> str:
        code = self.proc.poll()
        return "still running" if code is None else f"exit status {code}"


def main(parent_pid: int) -> None:
    """The child: scan once, then write the groups the parent asks for until it says done."""
    _die_with(parent_pid)
    logging.basicConfig(level=logging.WARNING, stream=sys.stderr)
    signal.signal(signal.SIGINT, signal.SIG_IGN)  # a Ctrl-C meant for the parent: the parent decides
    inp, out = sys.stdin.buffer, sys.stdout.buffer
    plan = pickle.load(inp)  # sent as soon as the child starts
    with contextlib.suppress(OSError):
        os.nice(plan["nice_increment"])
    scan = ScanHere(_compactor(plan))
    _answer(out, scan.survivors)
    while True:
        message = pickle.load(inp)
        if message[0] == "done":
            return
        _, first, last, end, cleaned = message
        _answer(out, functools.partial(scan.write, first, last, end, Path(cleaned)))


def _compactor(plan: dict) -> Compactor:
    closed = [Segment(Path(p), base, size, next_offset, clean) for p, base, size, next_offset, clean in plan["closed"]]
    p, base, size, next_offset, clean = plan["active"]
    return Compactor(Path(plan["directory"]), closed, Segment(Path(p), base, size, next_offset, clean), size,
                     segment_bytes=plan["segment_bytes"], now_ms=plan["now_ms"],
                     tombstone_retention_ms=plan["retention_ms"], lock=contextlib.nullcontext(),
                     replace=lambda old, new: None)


def _answer(out: BinaryIO, step: Any) -> None:
    try:
        reply: tuple = ("ok", step())
    except OSError as e:
        reply = ("error", e.errno, str(e))
    except Exception as e:  # a damaged segment, say: the parent fails this compaction, the log carries on
        log.exception("cleaner process failed")
        reply = ("error", errno.EIO, f"{type(e).__name__}: {e}")
    pickle.dump(reply, out)
    out.flush()


def _die_with(parent_pid: int) -> None:
    """Have the kernel kill this process when its parent dies (Linux); exit now if it already has."""
    with contextlib.suppress(OSError, AttributeError):
        ctypes.CDLL(None, use_errno=True).prctl(_PR_SET_PDEATHSIG, int(signal.SIGKILL))
    if os.getppid() != parent_pid:
        os._exit(1)
