"""Commits written by column (OffsetCommitRun) to a real log: what a restart reads back, one record at a time
and in bulk, is the state the shard held when it wrote them."""

from __future__ import annotations

import enum
import random
from pathlib import Path

import pytest

from groupcoord.protocol import GroupConfig, GroupCoordinator, ManualClock, MemoryLog, TopicPartition
from groupcoord.protocol.errors import Errors
from groupcoord.protocol.messages import OffsetCommitRequest
from groupcoord.protocol.values import OffsetAndMetadata
from groupcoord.storage import PartitionLog, kernels
from groupcoord.storage.bulk_replay import bulk_load
from groupcoord.storage.reader import read_partition

T0 = 1_700_000_000_000
LIMIT = 64  # offset.metadata.max.bytes, small enough to refuse some metadata


class Offset(enum.IntEnum):
    """An int subclass a caller may commit: validation takes it, the log stores a plain int."""

    START = 7


class Metadata(str):
    """A str subclass a caller may commit."""


def _commits(rng: random.Random) -> list[OffsetCommitRequest]:
    reqs = []
    for i in range(60):
        offsets = {}
        for _ in range(rng.randrange(0, 40)):
            tp = TopicPartition(rng.choice(["t", "orders", "ümlaut"]), rng.choice([rng.randrange(8), 300, 2**31 - 1]))
            offset = rng.choice([-1, rng.randrange(100), rng.randrange(2**33), 2**63 - 1, Offset.START])
            metadata = rng.choice(["", "", "m", "ü" * 40, "x" * (LIMIT + 1), Metadata("sub")])
            offsets[tp] = OffsetAndMetadata(offset, metadata, rng.choice([-1, 3, 2**31 - 1]))
        reqs.append(OffsetCommitRequest(f"g{i % 5}", offsets, retention_time_ms=rng.choice([-1, -1, 60_000])))
    return reqs


def _state(coord: GroupCoordinator) -> dict:
    return {gid: coord.offsets.offsets_of(gid) for gid, _ in coord.offsets.items()}


@pytest.mark.parametrize("seed", range(4))
def test_what_a_restart_reads_back_is_what_the_shard_held(tmp_path: Path, seed: int) -> None:
    rng = random.Random(seed)
    config = GroupConfig(offset_metadata_max_bytes=LIMIT)
    refused = 0
    with PartitionLog(tmp_path / "log", sync="never", clock=lambda: T0) as plog:
        live = GroupCoordinator(config, ManualClock(T0), plog)
        for req in _commits(rng):
            answer = live.commit_offsets(req)
            plog.flush()
            live.on_durable(plog.durable_offset)
            errors = answer.result().errors
            for tp, (_, metadata, _) in req.offsets.items():
                too_long = 2 * len(metadata) > LIMIT and len(metadata) > LIMIT  # all here are in the BMP
                assert errors[tp] == (Errors.OFFSET_METADATA_TOO_LARGE if too_long else Errors.NONE)
                refused += too_long
    expected = _state(live)
    assert refused and sum(map(len, expected.values())) > 100
    stored = [v for group in expected.values() for v in group.values()]
    assert all(type(v.offset) is int and type(v.metadata) is str for v in stored)  # no subclass kept
    assert {v.expire_timestamp for v in stored} == {-1, T0 + 60_000}

    one_by_one = GroupCoordinator(config, ManualClock(T0), MemoryLog())
    one_by_one.load([r.record for r in read_partition(tmp_path / "log")])
    assert _state(one_by_one) == expected
    plan = bulk_load(tmp_path / "log", compiled=kernels.precompiled())
    assert plan is not None
    bulk = GroupCoordinator(config, ManualClock(T0), MemoryLog())
    bulk.load_bulk(plan)
    assert _state(bulk) == expected
