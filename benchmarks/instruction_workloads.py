"""The hot paths whose CPU instructions the regression guard counts: the pure shard's and storage's.

Each workload is a `prepare()` that builds its inputs (not counted) and returns the function to
count. They are deterministic: a ManualClock, fixed ids, no threads, the log in a temporary
directory, so that the same code runs the same instructions on every run (with PYTHONHASHSEED
fixed by the runner). Sizes are small enough for valgrind (~50x slower) yet large enough that
per-call noise disappears.
"""

from __future__ import annotations

import functools
import sys
from pathlib import Path
from typing import Callable

from groupcoord.protocol import (
    GroupConfig,
    GroupCoordinator,
    HeartbeatRequest,
    JoinGroupRequest,
    ManualClock,
    MemoryLog,
    OffsetAndMetadata,
    OffsetCommitRequest,
    SyncGroupRequest,
    TopicPartition,
)

Workload = Callable[[], object]

COMMITS, COMMIT_PARTITIONS = 200, 10
HEARTBEAT_MEMBERS, HEARTBEAT_ROUNDS = 1000, 2
REBALANCE_MEMBERS = 1000
REPLAY_RECORDS = 100_000
_CONFIG = GroupConfig(min_session_timeout_ms=100, initial_rebalance_delay_ms=50)


class _NullLog:
    """Durable at once, keeps nothing: the shard's own work only."""

    def __init__(self) -> None:
        self.end = 0

    def append(self, records) -> int:
        self.end += len(records)
        return self.end

    @property
    def durable_offset(self) -> int:
        return self.end


def _shard() -> tuple[GroupCoordinator, ManualClock]:
    clock = ManualClock(1_700_000_000_000)
    return GroupCoordinator(_CONFIG, clock, _NullLog()), clock


def _form(coord: GroupCoordinator, clock: ManualClock, group: str, members: int) -> list[tuple[str, int]]:
    """Join `members` new members to `group` and sync them; their (member id, generation)."""
    joins = [coord.join_group(JoinGroupRequest(group, 10_000, 60_000, protocols=[("range", b"")],
                                               client_id=f"c{i}", require_known_member_id=False))
             for i in range(members)]
    for _ in range(100):  # the initial delay (KIP-134) ends once no member joined for a delay
        if joins[-1].done():
            break
        clock.advance(_CONFIG.initial_rebalance_delay_ms)
        coord.tick()
    answers = [j.result() for j in joins]
    leader = answers[0].leader
    assignments = {a.member_id: b"x" for a in answers}
    syncs = [coord.sync_group(SyncGroupRequest(group, a.generation_id, a.member_id,
                                               assignments=assignments if a.member_id == leader else {}))
             for a in answers]
    assert all(s.done() for s in syncs)
    return [(a.member_id, a.generation_id) for a in answers]


def commit_apply(data: Path) -> Workload:
    """OffsetCommit of 10 partitions, 200 times, by a simple consumer (generation -1)."""
    coord, _ = _shard()
    reqs = [OffsetCommitRequest("g", {TopicPartition("t", p): OffsetAndMetadata(i * 100 + p, "")
                                      for p in range(COMMIT_PARTITIONS)}) for i in range(COMMITS)]

    def run() -> object:
        for r in reqs:
            coord.commit_offsets(r)
        return coord

    return run


def heartbeat(data: Path) -> Workload:
    """Heartbeats of 1,000 members of 100 Stable groups, twice each."""
    coord, clock = _shard()
    members = [(f"hb-{g}", m, gen) for g in range(HEARTBEAT_MEMBERS // 10)
               for m, gen in _form(coord, clock, f"hb-{g}", 10)]
    reqs = [HeartbeatRequest(g, gen, m) for g, m, gen in members]

    def run() -> object:
        for _ in range(HEARTBEAT_ROUNDS):
            for r in reqs:
                coord.heartbeat(r)
        return coord

    return run


def join_sync_1000(data: Path) -> Workload:
    """One group of 1,000 members: every JoinGroup, the join phase completing, every SyncGroup."""
    coord, clock = _shard()

    def run() -> object:
        return _form(coord, clock, "big", REBALANCE_MEMBERS)

    return run


def _write_log(directory: str, records: int) -> None:
    """A partition log of `records` offset commits (100 per append, 1,000 groups' worth of keys)."""
    from groupcoord.storage import PartitionLog

    clock = ManualClock(1_700_000_000_000)
    with PartitionLog(directory, sync="never", clock=clock) as plog:
        coord = GroupCoordinator(_CONFIG, clock, plog)
        for i in range(records // 100):
            offsets = {TopicPartition(f"t{i % 7}", p): OffsetAndMetadata(i, "m") for p in range(100)}
            coord.commit_offsets(OffsetCommitRequest(f"g{i % 1000}", offsets))
        plog.flush()


def prepare_logs(data: Path) -> None:
    """Write the logs the storage workloads read (natively, before the counted run starts)."""
    _write_log(str(data / "replay"), REPLAY_RECORDS)


def replay_100k(data: Path) -> Workload:
    """Open a log of 100,000 offset commits (its checks and recovery) and replay it into a fresh shard."""
    from groupcoord.storage import PartitionLog

    directory = str(data / "replay")

    def run() -> object:
        with PartitionLog(directory, sync="never", clock=ManualClock(1_700_000_000_000)) as plog:
            coord = GroupCoordinator(_CONFIG, ManualClock(1_700_000_000_000), MemoryLog())
            coord.load(r for batch in plog.replay_batches() for r in batch)
        return coord

    return run


def columnar_read(data: Path) -> Workload:
    """Read the 100,000 records' entries in bulk for the columnar decoder (storage's half of columnar decoding).

    The decoder's compiled pass (numba) is not counted: importing numba under valgrind alone takes minutes.
    """
    from groupcoord.storage.columnar import read_entries

    directory = str(data / "replay")

    def run() -> object:
        return read_entries(directory)

    return run


WORKLOADS: dict[str, Callable[[Path], Workload]] = {
    "commit_apply": commit_apply,
    "heartbeat": heartbeat,
    "join_sync_1000": join_sync_1000,
    "replay_100k": replay_100k,
    "columnar_read": columnar_read,
}


def counted(fn: Workload) -> object:
    """Run `fn` inside functools.reduce, the C function whose calls the runner has callgrind count and dump."""
    return functools.reduce(lambda _a, _b: fn(), (0, 0))


def main(argv: list[str]) -> None:
    """In the process valgrind runs: `DATA NAME...` prepares and counts each named workload in turn."""
    data = Path(argv[0])
    for name in argv[1:]:
        counted(WORKLOADS[name](data))


if __name__ == "__main__":
    main(sys.argv[1:])
