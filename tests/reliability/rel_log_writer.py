"""A child process that appends to (and compacts) a PartitionLog until it is killed; run as a script.

`python rel_log_writer.py DIR MODE SEED KILL_P` opens the log in DIR (recovering it), appends
the deterministic records `record_at(offset)` from its end offset on, in batches of random size,
and after each flush prints the durable offset on stdout (one line, flushed): everything below
it was acknowledged. MODE "append" only appends; MODE "compact" also compacts the closed
segments in a background thread, over and over, printing "compacted" after each compaction that
rewrote something (a failing compaction ends the process with status 3), with the cleaner in that
thread; MODE "compact-child" does the same with the cleaner in its child process
(storage.cleaner_process), which the kernel kills with the writer. With probability KILL_P per
fsync (and per compaction step) the process SIGKILLs itself right there, so that kills also land
between a write and its fsync and inside the compaction swap protocol; the parent kills it too.
A cleaner process takes a Python start to begin, so in "compact-child" an fsync kills ten times
less often and the writer waits for the cleaner once it is MAX_UNCOMPACTED records ahead: it has to
live long enough, and its log stay small enough, for compactions to finish, and for the parent's kills
to land while one runs.
`verify` is the parent's check of a recovered log against these records.
"""

from __future__ import annotations

import os
import random
import signal
import sys
import threading
import time
import traceback
from typing import Any

from groupcoord.protocol.records import OffsetCommitKey, OffsetCommitValue, Record

SEGMENT_BYTES = {"append": 64 * 1024, "compact": 16 * 1024}
CLEANERS = {"append": "thread", "compact": "thread", "compact-child": "process"}
# With the cleaner in a process the appends no longer wait for it, and outran it: in that mode, once this
# many records were appended since the last finished compaction began, the writer waits for the next one to
# finish, so that the log stays small enough for compactions to finish within a run.
MAX_UNCOMPACTED = 5000
COMPACT_KEYS = 24


def records_mode(mode: str) -> str:
    """The records and segment size a mode uses: the two compaction modes write the same log."""
    return mode.removesuffix("-child")


def record_at(offset: int, mode: str) -> Record:
    """The record the writer appends at `offset`: a pure function of offset and mode."""
    if records_mode(mode) == "compact":
        key = OffsetCommitKey(f"g{offset % 3}", "t", offset % COMPACT_KEYS)
        if offset % 11 == 0:
            return Record(key, None)
    else:
        key = OffsetCommitKey(f"g{offset % 7}", f"topic-{offset % 5}", offset % 13)
    metadata = "m" * (offset % 97) + ("x" * 4000 if offset % 10 == 0 else "")
    return Record(key, OffsetCommitValue(offset, offset % 5, metadata, 1_700_000_000_000 + offset, -1))


def model_state(end: int, mode: str) -> dict[Any, tuple[int, Record]]:
    """Key -> (offset, record) of the latest live record among offsets [0, end): what replay must give."""
    state: dict[Any, tuple[int, Record]] = {}
    for offset in range(end):
        record = record_at(offset, mode)
        if record.value is None:
            state.pop(record.key, None)
        else:
            state[record.key] = (offset, record)
    return state


def verify(directory: str | os.PathLike[str], mode: str, acked: int) -> tuple[int, int]:
    """Reopen the log and check it against the writer's records; returns (end offset, records read)."""
    from groupcoord.storage import PartitionLog

    segment_bytes = SEGMENT_BYTES[records_mode(mode)]
    with PartitionLog(directory, sync="always", segment_bytes=segment_bytes, tombstone_retention_ms=0) as plog:
        end = plog.end_offset
        read = list(plog.read())
    leftovers = [n for n in os.listdir(directory) if n.endswith((".swap", ".cleaned"))]
    assert not leftovers, f"recovery left compaction files behind: {leftovers}"
    assert end >= acked, f"acknowledged up to offset {acked} but the log ends at {end}"
    offsets = [r.offset for r in read]
    if mode == "append":
        assert offsets == list(range(end)), "offsets are not contiguous from 0 to the end"
    else:
        assert offsets == sorted(set(offsets)) and (not offsets or offsets[-1] < end)
    for r in read:
        assert r.record == record_at(r.offset, mode), f"offset {r.offset} holds {r.record!r:.200}"
    state: dict = {}
    for r in read:
        if r.record.value is None:
            state.pop(r.record.key, None)
        else:
            state[r.record.key] = (r.offset, r.record)
    assert state == model_state(end, mode), "replay does not give the latest record of every key"
    return end, len(read)


def _suicide() -> None:
    os.kill(os.getpid(), signal.SIGKILL)


def main(directory: str, mode: str, seed: int, kill_p: float) -> None:
    """Append (and compact) until killed, reporting each durable offset."""
    from groupcoord.storage import FileOps, PartitionLog

    rng = random.Random(seed)
    fsync_kill_p = kill_p / 10 if CLEANERS[mode] == "process" else kill_p

    class DyingFiles(FileOps):
        """The real file system, where the process may die just before or just after any fsync."""

        def fsync(self, fd: int) -> None:
            if rng.random() < fsync_kill_p:
                _suicide()
            super().fsync(fd)
            if rng.random() < fsync_kill_p:
                _suicide()

    def on_step(step: str) -> None:
        if rng.random() < kill_p * 4:
            _suicide()

    plog = PartitionLog(
        directory, sync="always", segment_bytes=SEGMENT_BYTES[records_mode(mode)], tombstone_retention_ms=0,
        files=DyingFiles(), cleaner=CLEANERS[mode],
    )
    print(f"open {plog.end_offset}", flush=True)
    compacted = threading.Condition()
    compaction_began = [plog.end_offset]  # the log's end when the last finished compaction began
    if mode != "append":

        def compact_forever() -> None:
            try:
                while True:
                    began = plog.end_offset
                    if plog.compact(on_step=on_step).groups_rewritten:
                        print("compacted", flush=True)
                    with compacted:
                        compaction_began[0] = began
                        compacted.notify_all()
                    time.sleep(0.002)
            except BaseException:  # a dead compaction thread must end the run, not turn it into an append-only one
                traceback.print_exc()
                os._exit(3)

        threading.Thread(target=compact_forever, daemon=True).start()
    while True:
        start = plog.end_offset
        n = rng.choice((1, 2, 5, 20, 60, 200))
        plog.append([record_at(o, mode) for o in range(start, start + n)])
        durable = plog.flush()
        print(durable, flush=True)
        if CLEANERS[mode] == "process":
            with compacted:
                compacted.wait_for(lambda: plog.end_offset - compaction_began[0] <= MAX_UNCOMPACTED)


if __name__ == "__main__":
    main(sys.argv[1], sys.argv[2], int(sys.argv[3]), float(sys.argv[4]))
