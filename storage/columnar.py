"""Bulk reading of a partition log for columnar decoding: many entries' payloads in one buffer.

`read_entries` walks the checked entries of a partition (the reader's consistent snapshot, the
last segment read up to its last complete entry) and returns their payloads back to back in one
`bytes` with, per entry, its base offset, record count, append timestamp and where its payload
ends. Records are left encoded: a columnar decoder (groupcoord.spark.columnar) parses the buffer
in one pass instead of building a Python object per record. No pyarrow here.

Where to resume is a `LogPosition`: the next offset, plus the segment (its base offset) and the
byte position in it where the entry holding that offset starts, as an export checkpoint records
them. A position that no longer matches the file (compaction rewrote the segment) is detected by
the entry checks and the segment is scanned from its start instead. It also carries the log's
writer epoch (see `writer_epoch`).

The export floor (`EXPORT_FLOOR_FILE` in the partition's directory) is the one hook into the
writer: the offset below which an exporter has taken every record. PartitionLog compacts only
segments that end at or below it, so compaction never drops a record the export has not taken.
"""

from __future__ import annotations

import logging
import os
from array import array
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path

from .errors import CorruptLogError
from .fileops import OS_FILES, FileOps, replace_file_durably
from .framing import EntryScanner
from .reader import OpenSegment, open_snapshot
from .segment import Segment
from .writer import read_epoch

log = logging.getLogger(__name__)

EXPORT_FLOOR_FILE = "export.floor"


@dataclass(frozen=True)
class LogPosition:
    """Where a reader stands in one partition's log: next offset, its segment and byte position, writer epoch."""

    next_offset: int = 0
    segment: int = 0
    position: int = 0
    writer_epoch: int = 0


@dataclass(frozen=True)
class EntryBlock:
    """Entries read in bulk: payloads back to back, with per-entry offsets, counts, times and payload ends.

    `end` is where the next read resumes. Offsets of an entry's records are consecutive from its
    base offset; entries can be apart (compaction leaves gaps).
    """

    payload: bytes
    base_offsets: array
    record_counts: array
    timestamps: array
    payload_ends: array
    start: LogPosition
    end: LogPosition

    @property
    def records(self) -> int:
        """How many records the block holds."""
        return sum(self.record_counts)


def writer_epoch(directory: str | os.PathLike[str]) -> int:
    """The partition's writer epoch as storage.writer records it (0 when no writer ever opened the log)."""
    return read_epoch(Path(directory))


def read_export_floor(directory: str | os.PathLike[str]) -> int | None:
    """The offset below which the export has taken every record, or None when no export is set up."""
    try:
        with open(os.path.join(directory, EXPORT_FLOOR_FILE), encoding="locale") as f:  # at every compaction check
            text = f.read().strip()
    except FileNotFoundError:
        return None
    try:
        return int(text)
    except ValueError:
        log.warning("%s: unreadable %s %r; compaction is held back entirely", directory, EXPORT_FLOOR_FILE, text)
        return 0


def exported_prefix(closed: list[Segment], active: Segment, floor: int | None) -> list[Segment]:
    """The closed segments compaction may rewrite: all of them without a floor, else those wholly below it.

    A closed segment ends where the next one starts, so it may be compacted once that base is at or
    below the floor: the export has then taken every record it holds.
    """
    if floor is None:
        return closed
    bases = [s.base_offset for s in closed[1:]] + [active.base_offset]
    return [seg for seg, end in zip(closed, bases, strict=True) if end <= floor]


def write_export_floor(directory: str | os.PathLike[str], offset: int, files: FileOps = OS_FILES) -> None:
    """Record that the export has taken every record below `offset` (atomically, durably, through `files`)."""
    replace_file_durably(files, Path(directory, EXPORT_FLOOR_FILE), f"{int(offset)}\n".encode())


def _first_segment(opened: list[OpenSegment], offset: int) -> int:
    """Index of the segment holding `offset` (the last one whose base is at or below it)."""
    index = 0
    for i, seg in enumerate(opened):
        if seg.base_offset <= offset:
            index = i
    return index


class _Taken:
    """The entries a read_entries call has taken so far, and where the next read resumes."""

    def __init__(self, start: LogPosition) -> None:
        self.chunks: list[memoryview] = []
        self.bases, self.counts, self.times, self.ends = array("q"), array("q"), array("q"), array("q")
        self.size = self.records = 0
        self.next_offset, self.segment, self.position = start.next_offset, start.segment, start.position

    def take(self, entries: Iterator[tuple], seg_base: int, start_offset: int, end_offset: int | None,
             max_records: int | None) -> bool:
        """Take `entries` of the segment based at seg_base; True once the block is full or reached end_offset."""
        for base, count, ts, payload, entry_end in entries:
            if end_offset is not None and base >= end_offset:
                return True
            if base < start_offset:  # cut the records below the start offset
                cut = start_offset - base
                payload, base, count = _skip_records(payload, cut), base + cut, count - cut
            self.chunks.append(payload)
            self.size += len(payload)
            self.bases.append(base)
            self.counts.append(count)
            self.times.append(ts)
            self.ends.append(self.size)
            self.records += count
            self.next_offset, self.segment, self.position = base + count, seg_base, entry_end
            if max_records is not None and self.records >= max_records:
                return True
        return False


def read_entries(
    directory: str | os.PathLike[str],
    start: LogPosition | int = 0,
    *,
    max_records: int | None = None,
    end_offset: int | None = None,
) -> EntryBlock:
    """The entries of a partition from `start` on, in bulk, up to about `max_records` records.

    With `end_offset`, only entries that start below it (the last one may reach past it). Records
    of the first entry below the start offset are cut off by offset. Raises
    CorruptLogError for damage before the last segment's tail, as the reader does. A segment is
    checked only as far as the block takes entries from it.
    """
    directory = Path(directory)
    if isinstance(start, int):
        start = LogPosition(start)
    epoch = writer_epoch(directory)
    opened = open_snapshot(directory)
    got = _Taken(start)
    try:
        first = _first_segment(opened, start.next_offset)
        for i in range(first, len(opened)):
            seg = opened[i]
            if end_offset is not None and seg.base_offset >= end_offset and i > first:
                break
            limit = os.fstat(seg.file.fileno()).st_size
            torn_ok = i == len(opened) - 1
            resume = i == first and seg.base_offset == start.segment and 0 < start.position <= limit
            try:
                entries = _scan(seg, limit, start.position if resume else 0, torn_ok, start.next_offset)
                full = got.take(entries, seg.base_offset, start.next_offset, end_offset, max_records)
            except CorruptLogError:
                if not resume:
                    raise
                log.info("%s: byte %d no longer starts an entry; scanning the segment", seg.path, start.position)
                got = _Taken(start)  # only the first segment resumes: drop what this scan of it took
                entries = _scan(seg, limit, 0, torn_ok, start.next_offset)
                full = got.take(entries, seg.base_offset, start.next_offset, end_offset, max_records)
            if full:
                break
    finally:
        for seg in opened:
            seg.file.close()
    end = LogPosition(got.next_offset, got.segment, got.position, epoch)
    return EntryBlock(b"".join(got.chunks), got.bases, got.counts, got.times, got.ends, start, end)


def _scan(seg: OpenSegment, limit: int, position: int, torn_ok: bool, min_offset: int) -> Iterator[tuple]:
    """(base, count, timestamp, payload view, end position) of each entry holding records at or above min_offset,
    checked as it is reached."""
    scanner = EntryScanner(seg.file, seg.path, limit, start=position, min_offset=seg.base_offset,
                           allow_torn_tail=torn_ok)
    return ((e.base_offset, e.record_count, e.timestamp_ms, e.payload, e.position + e.size)
            for e in scanner if e.record_count and e.base_offset + e.record_count > min_offset)


def _skip_records(payload: memoryview, n: int) -> memoryview:
    """The payload without its first `n` records."""
    import msgpack

    unpacker = msgpack.Unpacker(raw=False)
    unpacker.feed(payload)
    for _ in range(n):
        unpacker.skip()
    return payload[unpacker.tell():]
