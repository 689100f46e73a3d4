"""The columnar decoder and the incremental, checkpointed Parquet export (no Spark: pyarrow reads it back)."""

from __future__ import annotations

import random

import pyarrow as pa
import pyarrow.compute as pc
import pytest
import spark_history as h

from groupcoord.protocol.records import GroupMetadataKey, OffsetCommitKey, OffsetCommitValue, Record
from groupcoord.spark.columnar import decode_block
from groupcoord.spark.history import export_history, latest_checkpoint
from groupcoord.spark.history_read import history_tables
from groupcoord.spark.history_store import HistoryStore
from groupcoord.spark.loader import load_local
from groupcoord.spark.rows import records_to_tables
from groupcoord.storage import PartitionLog, StorageRoot, read_partition
from groupcoord.storage.columnar import EXPORT_FLOOR_FILE, LogPosition, read_entries, read_export_floor
from groupcoord.storage.writer import read_epoch

T0 = h.T0


class Crash(BaseException):
    """Stops an export dead between two of its steps."""


def _by_position(table: pa.Table) -> pa.Table:
    return table.sort_by([("log_partition", "ascending"), ("log_offset", "ascending")])


def _commit(i: int, key: int, tombstone: bool = False, metadata: str = "") -> Record:
    key_ = OffsetCommitKey(f"grüppe-{key % 7}", "tópic" if key % 2 else "t", key % 5)
    value = OffsetCommitValue(i + (0 if i % 3 else 2**40), -1 if i % 2 else 5, metadata, T0 + i, -1)
    return Record(key_, None if tombstone else value)


def _write_log(directory, batches, *, segment_bytes=2000, clock=None) -> PartitionLog:
    log = PartitionLog(directory, sync="never", segment_bytes=segment_bytes, clock=clock or (lambda: T0))
    for batch in batches:
        log.append(batch)
        log.flush()
    return log


def test_columnar_decoding_matches_record_by_record_decoding(tmp_path):
    rng = random.Random(7)
    records = []
    for i in range(600):
        if i % 97 == 5:
            records.append(h._group("g", i, "m1", ["m1", "m2"], T0 + i, True))
        elif i % 89 == 3:
            records.append(Record(GroupMetadataKey("g"), None))
        else:
            records.append(_commit(i, rng.randrange(40), tombstone=i % 13 == 0, metadata="x" * (i % 40)))
    batches = [records[i : i + rng.randrange(1, 30)] for i in range(0, 600, 20)]
    _write_log(tmp_path / "p", batches).close()
    for start in (0, 1, 137):  # 137 falls inside an entry: its first records are cut off
        commits, groups = decode_block(read_entries(tmp_path / "p", start), 3)
        ref_commits, ref_groups = records_to_tables(read_partition(tmp_path / "p", start), 3)
        assert commits.equals(ref_commits) and groups.equals(ref_groups)
        assert commits.num_rows + groups.num_rows == sum(len(b) for b in batches) - start


def test_a_block_the_fast_path_does_not_know_is_decoded_record_by_record(tmp_path):
    _write_log(tmp_path / "p", [[_commit(1, 1)], [_commit(2, 2)]]).close()
    block = read_entries(tmp_path / "p")
    # A commit value of another version than 0: the fast pass refuses, the reference path explains.
    bad = block.payload.replace(b"\x96\x00", b"\x96\x07", 1)
    from dataclasses import replace

    with pytest.raises(Exception, match="version 7"):
        decode_block(replace(block, payload=bad), 0)


def test_reading_resumes_at_a_checkpointed_byte_position(tmp_path):
    log = _write_log(tmp_path / "p", [[_commit(i, i)] for i in range(50)], segment_bytes=1 << 20)
    first = read_entries(tmp_path / "p", max_records=20)
    assert first.end.next_offset == 20 and first.end.position > 0
    rest = read_entries(tmp_path / "p", first.end)
    assert list(rest.base_offsets) == list(range(20, 50))
    # A position that no longer starts an entry (say, the segment was rewritten) falls back to offsets.
    moved = LogPosition(20, first.end.segment, first.end.position + 3)
    assert list(read_entries(tmp_path / "p", moved).base_offsets) == list(range(20, 50))
    log.close()


@pytest.fixture
def root(tmp_path):
    return h.write_history(tmp_path / "storage")


def test_the_export_holds_every_record_once_and_is_incremental(root, tmp_path):
    history = str(tmp_path / "history")
    first = export_history(root, history, step_records=30)
    commits, groups = history_tables(history)
    ref_commits, ref_groups = load_local(root, progress=None)
    assert _by_position(commits).equals(_by_position(ref_commits))
    assert _by_position(groups).equals(_by_position(ref_groups))
    assert first.total_rows == ref_commits.num_rows + ref_groups.num_rows and first.steps > 2
    assert export_history(root, history).total_rows == 0
    # More records arrive: the next run takes only those.
    storage = StorageRoot(root, 2)
    with storage.open_partition(1, sync="never", clock=lambda: h.NOW + 86_400_000) as log:
        log.append([_commit(i, i) for i in range(5)])
    second = export_history(root, history)
    assert second.rows == {0: 0, 1: 5}
    commits, _ = history_tables(history)
    assert commits.num_rows == ref_commits.num_rows + 5
    assert sorted(pc.unique(history_tables(history, since_ms=h.NOW + 1)[0]["log_offset"]).to_pylist()) == list(
        range(latest_checkpoint(HistoryStore(history), 1).next_offset - 5,
              latest_checkpoint(HistoryStore(history), 1).next_offset))


@pytest.mark.parametrize("step", ["staged", "checkpoint", "renamed"])
def test_a_crash_mid_export_neither_loses_nor_duplicates_a_row(root, tmp_path, step):
    history = str(tmp_path / "history")
    seen = []

    def crash_at_third(name):
        if name == step:
            seen.append(name)
            if len(seen) == 3:
                raise Crash(name)

    with pytest.raises(Crash):
        export_history(root, history, step_records=25, on_step=crash_at_third)
    export_history(root, history, step_records=25)
    commits, groups = history_tables(history)
    ref_commits, ref_groups = load_local(root, progress=None)
    assert _by_position(commits).equals(_by_position(ref_commits))
    assert _by_position(groups).equals(_by_position(ref_groups))
    leftovers = [p for p in (tmp_path / "history").rglob("*") if p.name.startswith("_staged")]
    assert leftovers == []


def test_the_history_may_live_on_any_fsspec_file_system(root):
    history = f"memory://history-{random.randrange(1 << 30)}"
    result = export_history(root, history, step_records=40)
    commits, _ = history_tables(history, until_ms=h.ms(100))
    ref_commits, _ = load_local(root, progress=None)
    expected = ref_commits.filter(pc.less_equal(ref_commits["log_timestamp"], h.ms(100)))
    assert result.total_rows > 0 and _by_position(commits).equals(_by_position(expected))


def test_compaction_keeps_every_record_the_export_has_not_taken(tmp_path):
    storage = StorageRoot(tmp_path / "storage", 1)
    directory = storage.partition_dir(0)
    log = _write_log(directory, [[_commit(i, i % 3) for i in range(j, j + 10)] for j in range(0, 200, 10)],
                     segment_bytes=600)
    log.close()
    history = str(tmp_path / "history")
    first = export_history(storage.path, history, step_records=50, partitions=[0])
    assert first.checkpoints[0].writer_epoch == read_epoch(directory) == 1  # storage.writer's writer-epoch
    floor = read_export_floor(directory)
    assert floor is not None and (directory / EXPORT_FLOOR_FILE).exists()
    log = storage.open_partition(0, sync="never", segment_bytes=600, clock=lambda: T0)
    log.append([_commit(i, i % 3) for i in range(200, 260)])
    log.flush()
    (directory / EXPORT_FLOOR_FILE).write_text("100\n")  # as if the export had stopped at offset 100
    log.compact()
    kept = [r.offset for r in read_partition(directory)]
    assert set(range(100, 260)) <= set(kept)  # nothing at or above the floor was dropped
    assert len([o for o in kept if o < 100]) < 100  # below it, compaction did its work
    log.close()
    again = export_history(storage.path, history, partitions=[0])
    assert again.checkpoints[0].writer_epoch == read_epoch(directory) == 2  # the log was reopened once
    commits, _ = history_tables(history)
    assert sorted(commits["log_offset"].to_pylist()) == list(range(260))
