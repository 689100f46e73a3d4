"""Records, clocks and models shared by the storage tests."""

from __future__ import annotations

import os
import random
import shutil
from pathlib import Path
from typing import Iterable

from groupcoord.protocol.records import (
    GroupMetadataKey,
    GroupMetadataValue,
    MemberMetadata,
    OffsetCommitKey,
    OffsetCommitValue,
    Record,
)
from groupcoord.storage import PartitionLog
from groupcoord.storage.writer import EPOCH_FILE, LOCK_FILE


class ManualMs:
    """A clock callable in ms that only moves when told to."""

    def __init__(self, now: int = 1_700_000_000_000) -> None:
        self.now = now

    def __call__(self) -> int:
        return self.now

    def advance(self, ms: int) -> None:
        self.now += ms


class SimulatedCrash(BaseException):
    """Raised from a hook to stop a process dead between two steps."""


def commit(group: str, topic: str, partition: int, offset: int, metadata: str = "") -> Record:
    """An offset commit record."""
    return Record(
        OffsetCommitKey(group, topic, partition),
        OffsetCommitValue(offset, 3, metadata, 1_700_000_000_000 + offset, -1),
    )


def offset_tombstone(group: str, topic: str, partition: int) -> Record:
    """An offset commit tombstone."""
    return Record(OffsetCommitKey(group, topic, partition), None)


def group_metadata(group: str, generation: int, members: int = 2) -> Record:
    """A group metadata record with `members` members."""
    ms = tuple(
        MemberMetadata(
            f"{group}-member-{i}",
            None if i % 2 else f"instance-{i}",
            f"client-{i}",
            f"/10.0.0.{i}",
            300_000,
            45_000,
            bytes([0, 1, i, 255]),
            b"\x00assignment\xff" * (i + 1),
        )
        for i in range(members)
    )
    leader = ms[0].member_id if ms else None
    value = GroupMetadataValue("consumer", generation, "range" if ms else None, leader, 1_700_000_000_000, ms)
    return Record(GroupMetadataKey(group), value)


def group_tombstone(group: str) -> Record:
    """A group metadata tombstone."""
    return Record(GroupMetadataKey(group), None)


def random_batches(seed: int, batches: int, max_batch: int = 8, keys: int = 30) -> list[list[Record]]:
    """Batches of mixed records over a small key space, so that compaction has work to do."""
    rng = random.Random(seed)
    out = []
    offset = 0
    for _ in range(batches):
        batch = []
        for _ in range(rng.randint(1, max_batch)):
            g = f"group-{rng.randrange(keys // 10 + 1)}"
            roll = rng.random()
            if roll < 0.08:
                batch.append(offset_tombstone(g, "t", rng.randrange(keys)))
            elif roll < 0.15:
                batch.append(group_metadata(g, rng.randrange(100), rng.randrange(3)))
            elif roll < 0.17:
                batch.append(group_tombstone(g))
            else:
                batch.append(commit(g, "t", rng.randrange(keys), offset))
            offset += 1
        out.append(batch)
    return out


def state_of(records: Iterable[Record]) -> dict:
    """The latest value per key after applying `records` in order (a tombstone removes its key)."""
    state: dict = {}
    for key, value in records:
        k = (type(key), key)
        if value is None:
            state.pop(k, None)
        else:
            state[k] = value
    return state


def flat(batches: Iterable[list[Record]]) -> list[Record]:
    """All records of `batches`, in order."""
    return [r for b in batches for r in b]


def copy_dir(src: Path, dst: Path) -> Path:
    """A copy of a partition directory (a snapshot to crash against)."""
    shutil.copytree(src, dst)
    return dst


def files_in(directory: Path) -> list[str]:
    """Sorted names of the files in `directory`, leaving out the writer's lock and epoch files."""
    return sorted(n for n in os.listdir(directory) if n not in (LOCK_FILE, EPOCH_FILE))


def die(log: PartitionLog) -> None:
    """What the death of the process does to an open log: its file closes and its write lock goes."""
    log._active.close()
    log._fence.release()
