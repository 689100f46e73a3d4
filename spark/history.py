"""The incremental export of the partition logs into an append-only columnar history (Parquet).

Layout under the history URL (a local path or any fsspec URL: s3://, gs://, abfs://, ...):

    commits/date=YYYY-MM-DD/log_partition=N/<first offset>-<next offset>.parquet
    groups/date=YYYY-MM-DD/log_partition=N/<first offset>-<next offset>.parquet
    _checkpoints/log_partition=N/<next offset>.json

`date` is the UTC day of the append time (log_timestamp); the two partition columns live only in
the paths. A run exports each offsets partition's new records from where its last checkpoint
stopped (the next offset, the segment and byte position there, the writer epoch), in steps:

1. write every data file of the step under a hidden name (`_staged.<name>`: Spark and pyarrow
   skip names starting with `_`);
2. write the checkpoint, which lists the step's files: the commit point;
3. rename the staged files to their final names;
4. record the checkpoint's offset as the log's export floor (storage.columnar), below which
   compaction may now drop records.

A crash before 2 leaves staged files that no checkpoint names: the next run deletes them and
exports the same records again. A crash after 2 leaves the checkpoint: the next run finishes its
renames (each one idempotent) before going on. Either way every record is in the history once.
"""

from __future__ import annotations

import json
import logging
import time
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Callable, Iterable

import numpy as np
import pyarrow as pa
import pyarrow.parquet as pq

from groupcoord.storage.columnar import LogPosition, read_entries, write_export_floor

from .history_store import HistoryStore
from .loader import storage_partitions

log = logging.getLogger(__name__)

CHECKPOINTS = "_checkpoints"
STAGED_PREFIX = "_staged."
TABLES = ("commits", "groups")
DAY_MS = 86_400_000
DEFAULT_STEP_RECORDS = 2_000_000

StepHook = Callable[[str], None]


@dataclass(frozen=True)
class Checkpoint:
    """What the history holds of one offsets partition: everything below `next_offset`, and where that is."""

    log_partition: int
    next_offset: int = 0
    segment: int = 0
    position: int = 0
    writer_epoch: int = 0
    start_offset: int = 0
    files: tuple[str, ...] = ()
    rows: int = 0
    exported_ms: int = 0

    @property
    def log_position(self) -> LogPosition:
        """Where the next export of this partition resumes."""
        return LogPosition(self.next_offset, self.segment, self.position, self.writer_epoch)


@dataclass
class ExportResult:
    """What one export run did, per offsets partition and in total."""

    rows: dict[int, int] = field(default_factory=dict)
    files: int = 0
    steps: int = 0
    seconds: float = 0.0
    checkpoints: dict[int, Checkpoint] = field(default_factory=dict)

    @property
    def total_rows(self) -> int:
        """Rows added to the history by this run."""
        return sum(self.rows.values())


def partition_dir(table: str, day: str, log_partition: int) -> str:
    """The directory of one table's files for one day and offsets partition, relative to the history."""
    return f"{table}/date={day}/log_partition={log_partition}"


def checkpoint_dir(log_partition: int) -> str:
    """The directory of one offsets partition's checkpoints, relative to the history."""
    return f"{CHECKPOINTS}/log_partition={log_partition}"


def latest_checkpoint(store: HistoryStore, log_partition: int) -> Checkpoint:
    """The newest checkpoint of an offsets partition (an empty one before its first export)."""
    names = sorted(n for n in store.list(checkpoint_dir(log_partition)) if n.endswith(".json"))
    if not names:
        return Checkpoint(log_partition)
    data = json.loads(store.read_bytes(f"{checkpoint_dir(log_partition)}/{names[-1]}"))
    data["files"] = tuple(data.get("files", ()))
    return Checkpoint(**data)


def _recover(store: HistoryStore, checkpoint: Checkpoint) -> None:
    """Finish the renames of the latest checkpoint and drop staged files no checkpoint names."""
    named = set(checkpoint.files)
    for table in TABLES:
        for relative in store.find_staged(table, checkpoint.log_partition, STAGED_PREFIX):
            directory, name = relative.rsplit("/", 1)
            final = f"{directory}/{name[len(STAGED_PREFIX):]}"
            if final in named:
                if store.exists(final):
                    store.remove(relative)
                else:
                    store.rename(relative, final)
            else:
                log.info("history: removing %s, staged by an export that never committed", relative)
                store.remove(relative)


def _days(log_timestamps: np.ndarray) -> np.ndarray:
    return log_timestamps // DAY_MS


def _day_name(day: int) -> str:
    return str(np.datetime64(int(day), "D"))


def _split_by_day(table: pa.Table) -> Iterable[tuple[str, pa.Table]]:
    if table.num_rows == 0:
        return
    days = _days(table["log_timestamp"].to_numpy())
    data = table.drop_columns(["log_partition"])
    for day in np.unique(days):
        yield _day_name(day), data.filter(pa.array(days == day))


def _write_step(store: HistoryStore, log_partition: int, tables: dict[str, pa.Table], start: int, end: int,
                on_step: StepHook | None) -> list[str]:
    files = []
    name = f"{start:020d}-{end:020d}.parquet"
    for table_name, table in tables.items():
        for day, part in _split_by_day(table):
            final = f"{partition_dir(table_name, day, log_partition)}/{name}"
            staged = f"{partition_dir(table_name, day, log_partition)}/{STAGED_PREFIX}{name}"
            sink = pa.BufferOutputStream()
            pq.write_table(part, sink, compression="snappy")
            store.write_bytes(staged, sink.getvalue().to_pybytes())
            files.append(final)
    _hook(on_step, "staged")
    return files


def _hook(on_step: StepHook | None, name: str) -> None:
    if on_step is not None:
        on_step(name)


def export_partition(store: HistoryStore, log_partition: int, directory: str | Path, *,
                     step_records: int = DEFAULT_STEP_RECORDS, on_step: StepHook | None = None,
                     set_floor: bool = True) -> tuple[int, int, int, Checkpoint]:
    """Export one offsets partition's new records; returns (rows, files, steps, last checkpoint)."""
    from .columnar import decode_block  # compiled on first use: imported only when exporting

    checkpoint = latest_checkpoint(store, log_partition)
    _recover(store, checkpoint)
    rows = files = steps = 0
    while True:
        block = read_entries(directory, checkpoint.log_position, max_records=step_records)
        if not block.record_counts:
            break
        commits, groups = decode_block(block, log_partition)
        start, end = block.start.next_offset, block.end.next_offset
        written = _write_step(store, log_partition, {"commits": commits, "groups": groups}, start, end, on_step)
        pos = block.end
        checkpoint = Checkpoint(log_partition, pos.next_offset, pos.segment, pos.position, pos.writer_epoch,
                                start, tuple(written), commits.num_rows + groups.num_rows,
                                time.time_ns() // 1_000_000)
        store.write_bytes(f"{checkpoint_dir(log_partition)}/{end:020d}.json",
                          json.dumps(asdict(checkpoint), indent=1).encode(), atomic=True)
        _hook(on_step, "checkpoint")
        for final in written:
            directory_name, name = final.rsplit("/", 1)
            store.rename(f"{directory_name}/{STAGED_PREFIX}{name}", final)
        _hook(on_step, "renamed")
        if set_floor:
            write_export_floor(directory, checkpoint.next_offset)
        rows += checkpoint.rows
        files += len(written)
        steps += 1
        log.info("history: offsets partition %d exported [%d, %d): %d rows in %d files",
                 log_partition, start, end, checkpoint.rows, len(written))
    return rows, files, steps, checkpoint


def export_history(root: str | Path, history: str, *, partitions: Iterable[int] | None = None,
                   step_records: int = DEFAULT_STEP_RECORDS, on_step: StepHook | None = None,
                   set_floor: bool = True) -> ExportResult:
    """Export every (chosen) offsets partition under `root` into the history at `history` (path or URL).

    With `set_floor` (the default) each partition's log is told how far the export got, so that
    compaction keeps every record not yet exported (see storage.columnar.EXPORT_FLOOR_FILE).
    """
    started = time.perf_counter()
    store = HistoryStore(history)
    wanted = None if partitions is None else set(partitions)
    result = ExportResult()
    for i, directory in storage_partitions(root):
        if wanted is not None and i not in wanted:
            continue
        rows, files, steps, checkpoint = export_partition(store, i, directory, step_records=step_records,
                                                          on_step=on_step, set_floor=set_floor)
        result.rows[i] = rows
        result.files += files
        result.steps += steps
        result.checkpoints[i] = checkpoint
    result.seconds = time.perf_counter() - started
    log.info("history: exported %d rows in %d files from %d partitions in %.1fs", result.total_rows,
             result.files, len(result.rows), result.seconds)
    return result
