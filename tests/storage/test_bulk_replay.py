"""The bulk replay (storage.bulk_replay + GroupCoordinator.load_bulk) leaves a shard exactly as replaying the
same log record by record does: random logs of commits, overwrites, tombstones, group records and deletes,
consumer group records, in random appends, read in blocks small enough to cut entries apart."""

from __future__ import annotations

import random
from pathlib import Path

import msgpack
import pytest

from groupcoord.protocol import GroupConfig, GroupCoordinator, ManualClock, MemoryLog, TopicPartition
from groupcoord.protocol.consumer.records import ConsumerGroupMetadataKey, ConsumerGroupMetadataValue
from groupcoord.protocol.offsets.columns import DENSE_PARTITIONS
from groupcoord.protocol.records import (
    GroupMetadataKey,
    GroupMetadataValue,
    OffsetCommitKey,
    OffsetCommitValue,
    Record,
)
from groupcoord.storage import PartitionLog, kernels
from groupcoord.storage.bulk_replay import bulk_load
from groupcoord.storage.errors import CorruptLogError
from groupcoord.storage.framing import frame_entry
from groupcoord.storage.reader import read_partition
from groupcoord.storage.segment import segment_file_name

T0 = 1_700_000_000_000
# Names of one length that differ only in their first, middle or last 8 bytes: the scan compares names 8 bytes at a
# time (the last 8 overlapping), and one compare too few would merge two groups' or topics' offsets.
GROUPS = ["g0", "g1", "grüppe-2", "a-much-longer-group-id-0003", "a-much-longer-group-id-0004",
          "b-much-longer-group-id-0003", "a-much-longer-gruop-id-0003"]
TOPICS = ["t", "orders", "ümlaut", "orders-1", "orders-2"]


def _record(rng: random.Random, i: int) -> Record:
    group = rng.choice(GROUPS)
    roll = rng.random()
    if roll < 0.05:
        return Record(GroupMetadataKey(group), None)  # the group deleted, offsets or not
    if roll < 0.10:
        return Record(GroupMetadataKey(group), GroupMetadataValue("consumer", rng.randrange(5), None, None, T0))
    if roll < 0.13:
        return Record(ConsumerGroupMetadataKey(group), None if rng.random() < 0.5 else ConsumerGroupMetadataValue(3))
    partition = rng.choice([rng.randrange(12), rng.randrange(12), DENSE_PARTITIONS + 1, 2**31 - 1])
    key = OffsetCommitKey(group, rng.choice(TOPICS), partition)
    if roll < 0.30:
        return Record(key, None)
    epoch = rng.choice([-1, 7, 2**40])  # 2**40: past the int32 column
    metadata = rng.choice(["", "", "", "m", f"meta-{i}", "ünïcode"])
    return Record(key, OffsetCommitValue(rng.randrange(-1, 2**40), epoch, metadata, T0 + i,
                                         rng.choice([-1, -1, T0 + 10 * i])))


def _write(directory: Path, rng: random.Random, records: int) -> list[Record]:
    written: list[Record] = []
    with PartitionLog(directory, sync="never", clock=lambda: T0) as plog:
        while len(written) < records:
            batch = [_record(rng, len(written) + k) for k in range(rng.randrange(1, 30))]
            plog.append(batch)
            written.extend(batch)
        plog.flush()
    return written


def _state(coord: GroupCoordinator) -> dict:
    """Everything a load sets up that a caller can see: groups (in order, with kind and state) and offsets."""
    groups = [(gid, type(g).__name__, str(g.state), getattr(g, "generation_id", None))
              for gid, g in zip(coord.registry, coord.registry.values(), strict=True)]
    offsets = {gid: list(coord.offsets.offsets_of(gid).items()) for gid, _ in coord.offsets.items()}
    return {"groups": groups, "offsets": offsets, "total": coord.offsets.total_offsets(),
            "has": {g: coord.offsets.has_offsets(g) for g in GROUPS}}


@pytest.mark.parametrize("kind", ["precompiled", "numba"])
@pytest.mark.parametrize("seed", range(12))
def test_a_bulk_load_leaves_the_state_a_record_by_record_load_leaves(tmp_path: Path, seed: int, kind: str) -> None:
    compiled = kernels.precompiled() if kind == "precompiled" else kernels.numba_kernels()
    assert compiled is not None and compiled.kind == kind
    rng = random.Random(seed)
    written = _write(tmp_path / "log", rng, rng.choice([50, 400, 1500]))
    one_by_one = GroupCoordinator(GroupConfig(), ManualClock(T0), MemoryLog())
    one_by_one.load(written)
    # Slots reserved up front for none, too few, all or ten times the records: the same state.
    plan = bulk_load(tmp_path / "log", block_records=rng.choice([7, 64, 100_000]), compiled=compiled,
                     records_at_most=rng.choice([0, 1, len(written), 10 * len(written)]))
    assert plan is not None and plan.records == len(written)
    bulk = GroupCoordinator(GroupConfig(), ManualClock(T0), MemoryLog())
    bulk.load_bulk(plan)
    expected = _state(one_by_one)
    assert expected["total"] > 0 and expected["groups"]  # the logs are not trivially empty
    assert _state(bulk) == expected
    # Events carry only what is not an offset commit: the offsets came as columns.
    assert not any(type(e) is not str and type(e.key) is OffsetCommitKey for e in plan.events)



def _pending(coord: GroupCoordinator) -> int:
    return sum(offsets.pending is not None for _, offsets in coord.offsets.items())


@pytest.mark.parametrize("seed", range(6))
def test_bulk_loaded_groups_are_built_when_first_used_and_then_written_as_any(tmp_path: Path, seed: int) -> None:
    """A bulk load leaves its groups' columns unbuilt; the first write, delete or read of a group builds them,
    and whatever comes first leaves the state a record-by-record load of the same records leaves."""
    rng = random.Random(100 + seed)
    written = _write(tmp_path / "log", rng, 1500)
    later = [_record(rng, len(written) + i) for i in range(300)]  # commits, tombstones, group deletes
    expected = GroupCoordinator(GroupConfig(), ManualClock(T0), MemoryLog())
    expected.load(written)
    totals = (expected.offsets.total_offsets(), {g: expected.offsets.has_offsets(g) for g in GROUPS})
    expected.replay_replicated(later)
    plan = bulk_load(tmp_path / "log", records_at_most=len(written))
    assert plan is not None
    bulk = GroupCoordinator(GroupConfig(), ManualClock(T0), MemoryLog())
    bulk.load_bulk(plan)
    pending = _pending(bulk)
    assert pending == len(list(bulk.offsets.items())) > 0  # nothing built at load
    assert (bulk.offsets.total_offsets(), {g: bulk.offsets.has_offsets(g) for g in GROUPS}) == totals
    bulk.replay_replicated(later)
    assert _pending(bulk) < pending  # the later records built the groups they touched
    assert _state(bulk) == _state(expected)


def test_no_room_to_reserve_slots_up_front_replays_the_same(tmp_path: Path, monkeypatch) -> None:
    """A host that does not overcommit refuses the up-front reserve: the columns then grow block by block."""
    from groupcoord.storage import bulk_replay

    written = _write(tmp_path / "log", random.Random(7), 400)
    expected = GroupCoordinator(GroupConfig(), ManualClock(T0), MemoryLog())
    expected.load(written)
    sizes = []
    fill = bulk_replay._Keys._slot_columns

    def refuse_large(keys, n: int) -> None:
        sizes.append(n)
        if n > 1 << 14:
            raise MemoryError(f"cannot allocate {n} slots")
        fill(keys, n)

    monkeypatch.setattr(bulk_replay._Keys, "_slot_columns", refuse_large)
    plan = bulk_load(tmp_path / "log", block_records=64, records_at_most=1 << 30)
    assert sizes == [bulk_replay.RESERVED_SLOTS_MAX + DENSE_PARTITIONS + 1, 1 << 14]
    assert plan is not None and plan.records == len(written)
    bulk = GroupCoordinator(GroupConfig(), ManualClock(T0), MemoryLog())
    bulk.load_bulk(plan)
    assert _state(bulk) == _state(expected)


def test_a_group_deleted_after_its_last_commit_stays_deleted_and_one_committed_to_after_is_simple(tmp_path):
    with PartitionLog(tmp_path / "log", sync="never", clock=lambda: T0) as plog:
        plog.append([Record(OffsetCommitKey("gone", "t", 0), OffsetCommitValue(5, -1, "", T0, -1)),
                     Record(OffsetCommitKey("back", "t", 0), OffsetCommitValue(6, -1, "", T0, -1))])
        plog.append([Record(GroupMetadataKey("gone"), None), Record(GroupMetadataKey("back"), None)])
        plog.append([Record(OffsetCommitKey("back", "t", 1), OffsetCommitValue(7, -1, "", T0, -1))])
        plog.flush()
    plan = bulk_load(tmp_path / "log")
    assert plan is not None
    coord = GroupCoordinator(GroupConfig(), ManualClock(T0), MemoryLog())
    coord.load_bulk(plan)
    assert "gone" not in coord.registry and "back" in coord.registry
    assert coord.offsets.offsets_of("gone")  # its offsets had no tombstones: they stay, as replay leaves them
    assert [tp.partition for tp in coord.offsets.offsets_of("back")] == [0, 1]


@pytest.mark.parametrize("record", [[1, "g", "t", 0, [1, 5, -1, "", T0, -1]],  # a value version it does not know
                                    [99, "g", None]])  # a key type no one knows
def test_a_record_the_bulk_scan_does_not_know_sends_the_load_record_by_record(tmp_path: Path, record: list) -> None:
    good = msgpack.packb([1, "g", "t", 0, [0, 5, -1, "", T0, -1]])
    directory = tmp_path / "log"
    directory.mkdir()
    segment = directory / segment_file_name(0)
    segment.write_bytes(frame_entry(0, 1, T0, good))
    plan = bulk_load(directory, block_records=1)
    assert plan is not None and plan.offsets["g"][TopicPartition("t", 0)].offset == 5
    segment.write_bytes(frame_entry(0, 1, T0, good) + frame_entry(1, 1, T0, msgpack.packb(record)))
    assert bulk_load(directory, block_records=1) is None
    with pytest.raises(CorruptLogError):  # which the record-by-record replay reports as damage
        list(read_partition(directory))


def test_offset_keys_too_sparse_for_runs_by_partition_send_the_load_record_by_record(tmp_path: Path) -> None:
    # Each record a new topic at partition 4000: a run of 4,000+ slots per record.
    with PartitionLog(tmp_path / "log", sync="never", clock=lambda: T0) as plog:
        plog.append([Record(OffsetCommitKey("g", f"t{i}", 4000), OffsetCommitValue(i, -1, "", T0, -1))
                     for i in range(300)])
        plog.flush()
    assert bulk_load(tmp_path / "log") is None
    with PartitionLog(tmp_path / "dense", sync="never", clock=lambda: T0) as plog:
        plog.append([Record(OffsetCommitKey("g", f"t{i}", 3), OffsetCommitValue(i, -1, "", T0, -1))
                     for i in range(300)])
        plog.flush()
    plan = bulk_load(tmp_path / "dense")
    assert plan is not None and len(plan.offsets["g"]) == 300


def test_nil_metadata_sends_the_load_record_by_record_which_keeps_it(tmp_path: Path) -> None:
    # The column store keeps only string metadata; the bulk pass would have read nil as "".
    for name, metadata in (("nil", None), ("empty", "")):
        with PartitionLog(tmp_path / name, sync="never", clock=lambda: T0) as plog:
            plog.append([Record(OffsetCommitKey("g", "t", p), OffsetCommitValue(p, -1, metadata if p == 7 else "",
                                                                                 T0, -1)) for p in range(10)])
            plog.flush()
    assert bulk_load(tmp_path / "nil") is None
    plan = bulk_load(tmp_path / "empty")
    assert plan is not None and plan.offsets["g"][TopicPartition("t", 7)].metadata == ""
    coord = GroupCoordinator(GroupConfig(), ManualClock(T0), MemoryLog())
    with PartitionLog(tmp_path / "nil", sync="never", clock=lambda: T0) as plog:
        coord.load(r for batch in plog.replay_batches() for r in batch)
    assert coord.offsets.offsets_of("g")[TopicPartition("t", 7)].metadata is None
