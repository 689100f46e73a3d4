"""Decode an offset range of one offsets partition's log into Arrow tables of commits and groups.

This is the unit of loading work: it runs in a Ray task (or on the driver for the local,
pandas-based reports) and reads through groupcoord.storage's reader, which takes a consistent
snapshot of the partition and stops at the last complete entry of a segment still being written.
"""

from __future__ import annotations

import os
from dataclasses import dataclass
from pathlib import Path

import pyarrow as pa
import pyarrow.compute as pc

from groupcoord.storage import list_segments
from groupcoord.storage.columnar import read_entries
from groupcoord.storage.segment import parse_segment_file_name


@dataclass(frozen=True)
class LogRange:
    """Offsets [start_offset, end_offset) of one offsets partition's log; end None means to the end."""

    log_partition: int
    directory: str
    start_offset: int
    end_offset: int | None
    size_bytes: int = 0


@dataclass
class DecodedRange:
    """The commits and group-metadata records of one LogRange, as Arrow tables."""

    commits: pa.Table
    groups: pa.Table
    records: int
    next_offset: int


def decode_range(part: LogRange) -> DecodedRange:
    """Read `part` in bulk (storage.columnar) and decode it column by column into the two tables."""
    from .columnar import decode_block

    block = read_entries(part.directory, part.start_offset, end_offset=part.end_offset)
    commits, groups = decode_block(block, part.log_partition)
    if part.end_offset is not None and commits.num_rows and block.end.next_offset > part.end_offset:
        commits = commits.filter(pc.less(commits["log_offset"], part.end_offset))
        groups = groups.filter(pc.less(groups["log_offset"], part.end_offset))
    return DecodedRange(commits, groups, commits.num_rows + groups.num_rows,
                        min(block.end.next_offset, part.end_offset or block.end.next_offset))


def plan_ranges(directory: str | os.PathLike[str], log_partition: int) -> list[LogRange]:
    """One LogRange per segment file of a partition directory (the last one open-ended).

    Ranges are offset ranges, not files: a task reads its range from a fresh snapshot of the
    partition, so a compaction that replaces segments meanwhile cannot make it miss a file.
    """
    paths = list_segments(directory)
    bases = [parse_segment_file_name(p.name) or 0 for p in paths]
    ranges = []
    for i, (base, path) in enumerate(zip(bases, paths, strict=True)):
        end = bases[i + 1] if i + 1 < len(bases) else None
        try:
            size = path.stat().st_size
        except FileNotFoundError:
            size = 0
        ranges.append(LogRange(log_partition, str(Path(directory)), base, end, size))
    return ranges
