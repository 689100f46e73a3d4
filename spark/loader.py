"""Load the committed-offset and group-metadata histories of a storage root into Spark DataFrames.

Ray tasks read the partition logs through groupcoord.storage's reader, one task per segment's
offset range, and put each range's rows into Ray's object store as an Arrow IPC stream. RayDP's
JVM side then reads those blocks straight from the object store into a Spark DataFrame, so the
rows never pass through the driver: the driver only sees each task's small statistics, which
drive the progress lines. The blocks stay in the object store until LoadedLog.release() or
stop_spark().
"""

from __future__ import annotations

import json
import logging
import sys
import time
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Callable, Iterable, TextIO

import pyarrow as pa

from groupcoord.storage.root import METADATA_FILE, StorageRoot

from .blocks import blocks_to_spark, release
from .decode import LogRange, decode_range, plan_ranges
from .schema import COMMITS_SCHEMA, GROUPS_SCHEMA, table_to_ipc

log = logging.getLogger(__name__)


@dataclass(frozen=True)
class LoadProgress:
    """One finished range: which one, what it held, and how far the whole load is.

    `done` of `total` ranges are loaded; `seconds` counts from the start of the load.
    """

    done: int
    total: int
    log_partition: int
    start_offset: int
    next_offset: int
    records: int
    commits: int
    groups: int
    seconds: float

    def line(self) -> str:
        """A plain one-line description, e.g. for a terminal or a log."""
        return (
            f"loaded {self.done}/{self.total}: offsets partition {self.log_partition} "
            f"[{self.start_offset}, {self.next_offset}) {self.records} records "
            f"({self.commits} commits, {self.groups} group records) at {self.seconds:.1f}s"
        )


ProgressFn = Callable[[LoadProgress], None]


def log_progress(event: LoadProgress) -> None:
    """The default progress callback: one INFO log line per loaded range."""
    log.info("%s", event.line())


def print_progress(event: LoadProgress, file: TextIO | None = None) -> None:
    """A progress callback that prints one plain line per loaded range (stderr by default)."""
    print(event.line(), file=file or sys.stderr, flush=True)


@dataclass
class LoadedLog:
    """The loaded histories as Spark DataFrames (`commits`, `groups`; see schema.py for columns)."""

    commits: Any
    groups: Any
    records: int
    commit_rows: int
    group_rows: int
    ranges: int
    seconds: float
    pins: tuple[int, ...] = ()

    def release(self) -> None:
        """Drop the Ray objects behind the DataFrames (else kept until stop_spark); unusable afterwards."""
        for df in (self.commits, self.groups):
            if df.is_cached:
                df.unpersist()
        for key in self.pins:
            release(key)


def storage_partitions(root: str | Path, num_partitions: int | None = None) -> list[tuple[int, Path]]:
    """(partition, directory) of each offsets partition of an existing storage root, read-only."""
    root = Path(root)
    meta_path = root / METADATA_FILE
    if not meta_path.exists():
        raise FileNotFoundError(f"{root} is not a groupcoord storage root (it has no {METADATA_FILE})")
    if num_partitions is None:
        num_partitions = int(json.loads(meta_path.read_text())["num_partitions"])
    # With the metadata file present StorageRoot only reads and checks it.
    storage = StorageRoot(root, num_partitions, create=False)
    return [(i, storage.partition_dir(i)) for i in range(num_partitions)]


def plan_load(
    root: str | Path, num_partitions: int | None = None, partitions: Iterable[int] | None = None
) -> list[LogRange]:
    """The ranges to read: one per segment of every (chosen) offsets partition that has a log."""
    wanted = None if partitions is None else set(partitions)
    ranges: list[LogRange] = []
    for i, directory in storage_partitions(root, num_partitions):
        if wanted is None or i in wanted:
            ranges.extend(plan_ranges(directory, i))
    return ranges


def _decode_to_blocks(part: LogRange) -> tuple[bytes, bytes, dict[str, int]]:
    started = time.perf_counter()
    decoded = decode_range(part)
    stats = {
        "records": decoded.records,
        "commits": decoded.commits.num_rows,
        "groups": decoded.groups.num_rows,
        "next_offset": decoded.next_offset,
        "decode_ms": int((time.perf_counter() - started) * 1000),
    }
    return table_to_ipc(decoded.commits), table_to_ipc(decoded.groups), stats


_remote_decode = None


def _decode_task(cpus: float):
    global _remote_decode
    import ray

    if _remote_decode is None:
        _remote_decode = ray.remote(num_returns=3, max_retries=3)(_decode_to_blocks)
    return _remote_decode.options(num_cpus=cpus)


def load_history(
    spark: Any,
    root: str | Path,
    *,
    num_partitions: int | None = None,
    partitions: Iterable[int] | None = None,
    progress: ProgressFn | None = log_progress,
    task_cpus: float = 1.0,
    rows_per_partition: int = 1_000_000,
    cache: bool = False,
) -> LoadedLog:
    """Read every offsets partition under `root` into Spark DataFrames inside the Ray cluster.

    `partitions` limits the load to some offsets partitions; `progress` is called once per
    loaded range (None for silence); `task_cpus` is what each decoding Ray task reserves.
    Small blocks are coalesced into Spark partitions of about `rows_per_partition` rows. With
    `cache`, both DataFrames are cached in Spark (memory, spilling to disk) and materialized
    here, which makes every later report faster.
    """
    import ray

    started = time.perf_counter()
    ranges = plan_load(root, num_partitions, partitions)
    log.info("loading %s: %d ranges in %d offsets partitions", root, len(ranges),
             len({r.log_partition for r in ranges}))
    task = _decode_task(task_cpus)
    pending: dict[Any, tuple[int, Any, Any]] = {}
    for i, part in enumerate(ranges):
        commits_ref, groups_ref, stats_ref = task.remote(part)
        pending[stats_ref] = (i, commits_ref, groups_ref)
    commit_blocks: list[Any] = []
    group_blocks: list[Any] = []
    done = records = commit_rows = group_rows = 0
    finished: dict[int, tuple[Any, Any, dict]] = {}
    while pending:
        ready, _ = ray.wait(list(pending), num_returns=1)
        for ref in ready:
            i, commits_ref, groups_ref = pending.pop(ref)
            stats = ray.get(ref)
            finished[i] = (commits_ref, groups_ref, stats)
            done += 1
            records += stats["records"]
            commit_rows += stats["commits"]
            group_rows += stats["groups"]
            if progress is not None:
                part = ranges[i]
                progress(LoadProgress(done, len(ranges), part.log_partition, part.start_offset,
                                      stats["next_offset"], stats["records"], stats["commits"],
                                      stats["groups"], time.perf_counter() - started))
    for i in sorted(finished):
        commits_ref, groups_ref, stats = finished[i]
        if stats["commits"]:
            commit_blocks.append(commits_ref)
        if stats["groups"]:
            group_blocks.append(groups_ref)
    commits, commits_pin = blocks_to_spark(spark, COMMITS_SCHEMA, commit_blocks)
    groups, groups_pin = blocks_to_spark(spark, GROUPS_SCHEMA, group_blocks)
    commits = _coalesced(commits, commit_rows, rows_per_partition)
    groups = _coalesced(groups, group_rows, rows_per_partition)
    if cache:
        commits, groups = commits.cache(), groups.cache()
        cached = commits.count() + groups.count()
        log.info("cached %d rows in Spark at %.1fs", cached, time.perf_counter() - started)
    seconds = time.perf_counter() - started
    log.info("loaded %d records (%d commits, %d group records) from %d ranges in %.1fs",
             records, commit_rows, group_rows, len(ranges), seconds)
    return LoadedLog(commits, groups, records, commit_rows, group_rows, len(ranges), seconds,
                     (commits_pin, groups_pin))


def _coalesced(df: Any, rows: int, rows_per_partition: int) -> Any:
    # One Spark partition per block makes many tiny tasks; merging them (no shuffle) is faster.
    target = max(1, -(-rows // max(1, rows_per_partition)))
    return df.coalesce(target) if target < df.rdd.getNumPartitions() else df


def load_local(
    root: str | Path,
    *,
    num_partitions: int | None = None,
    partitions: Iterable[int] | None = None,
    progress: ProgressFn | None = log_progress,
) -> tuple[pa.Table, pa.Table]:
    """Read the same histories on the driver into two Arrow tables: the input of pandas_reports (no Spark)."""
    started = time.perf_counter()
    ranges = plan_load(root, num_partitions, partitions)
    commits, groups = [COMMITS_SCHEMA.empty_table()], [GROUPS_SCHEMA.empty_table()]
    for i, part in enumerate(ranges):
        decoded = decode_range(part)
        commits.append(decoded.commits)
        groups.append(decoded.groups)
        if progress is not None:
            progress(LoadProgress(i + 1, len(ranges), part.log_partition, part.start_offset,
                                  decoded.next_offset, decoded.records, decoded.commits.num_rows,
                                  decoded.groups.num_rows, time.perf_counter() - started))
    return pa.concat_tables(commits), pa.concat_tables(groups)
