"""Read-only access to partition logs, for replay and for analytics running beside the writer.

The reader never writes, truncates or deletes. It reads a consistent snapshot: it opens every
segment file up front (an open file stays readable when compaction later deletes or replaces
it), uses a committed compaction's `.swap` file in place of the segments it replaces, and stops
quietly at the last complete entry of the last segment, which the writer may still be appending
to. Damage anywhere else raises CorruptLogError.
"""

from __future__ import annotations

import logging
import os
from contextlib import closing
from pathlib import Path
from typing import BinaryIO, Generator, Iterator, NamedTuple, Sequence

from groupcoord.protocol.records import Record

from .compaction import SWAP_SUFFIX, swap_extent_end
from .errors import StorageError
from .framing import BatchDecoder, EntryScanner
from .segment import SEGMENT_SUFFIX, list_segment_files, parse_segment_file_name

log = logging.getLogger(__name__)

_SNAPSHOT_ATTEMPTS = 20


class LogRecord(NamedTuple):
    """A record with its offset and the timestamp (ms) of the append that wrote it."""

    offset: int
    timestamp_ms: int
    record: Record


class Batch(NamedTuple):
    """The records of one entry from `offset` on, with the timestamp (ms) of the append that wrote them."""

    offset: int
    timestamp_ms: int
    records: list[Record]


class OpenSegment(NamedTuple):
    """A segment file opened for reading: read up to byte `limit` (None: its size when reached)."""

    base_offset: int
    path: Path
    file: BinaryIO
    limit: int | None


def iter_batches(scanner: EntryScanner, start_offset: int = 0) -> Iterator[Batch]:
    """The decoded entries `scanner` walks, leaving out the records below `start_offset`."""
    decoder = BatchDecoder(scanner.path)
    for entry in scanner:
        base = entry.base_offset
        if base >= start_offset:
            yield Batch(base, entry.timestamp_ms, decoder.decode(entry))
        elif entry.next_offset > start_offset:
            yield Batch(start_offset, entry.timestamp_ms, decoder.decode(entry)[start_offset - base :])


def iter_log_records(batches: Generator[Batch, None, None]) -> Iterator[LogRecord]:
    """The records of `batches` one by one, each with its offset and timestamp; closes `batches` at the end."""
    with closing(batches):
        for offset, ts, records in batches:
            for i, record in enumerate(records, offset):
                yield LogRecord(i, ts, record)


def read_opened(
    opened: Sequence[OpenSegment], start_offset: int = 0, *, allow_torn_tail: bool = False
) -> Generator[Batch, None, None]:
    """The batches of consecutive open segments from `start_offset` on; closes every file at the end.

    With `allow_torn_tail`, the last segment may end in an incomplete entry (one being written).
    """
    try:
        last = len(opened) - 1
        for i, seg in enumerate(opened):
            if i < last and opened[i + 1].base_offset <= start_offset:
                continue
            f = seg.file
            limit = seg.limit if seg.limit is not None else os.fstat(f.fileno()).st_size
            scanner = EntryScanner(f, seg.path, limit, min_offset=seg.base_offset,
                                   allow_torn_tail=allow_torn_tail and i == last)
            yield from iter_batches(scanner, start_offset)
    finally:
        for seg in opened:
            seg.file.close()


def list_segments(directory: str | os.PathLike[str]) -> list[Path]:
    """The segment files of a partition directory, in offset order (a task can read each one)."""
    return [path for _, path in list_segment_files(directory)]


def read_segment(path: str | os.PathLike[str], start_offset: int = 0) -> Iterator[LogRecord]:
    """(offset, timestamp, record) of every complete entry of one segment file."""
    path = Path(path)
    base = parse_segment_file_name(path.name.removesuffix(SWAP_SUFFIX)) or 0
    opened = [OpenSegment(base, path, open(path, "rb"), None)]
    yield from iter_log_records(read_opened(opened, start_offset, allow_torn_tail=True))


def _open_snapshot(directory: Path) -> list[OpenSegment]:
    """Open the segments that make up the log right now (see the module docstring)."""
    for attempt in range(_SNAPSHOT_ATTEMPTS):
        opened: list[OpenSegment] = []
        try:
            try:
                names = sorted(os.listdir(directory))
            except FileNotFoundError:
                return []
            segments = dict(list_segment_files(directory))
            for name in names:
                if name.endswith(SEGMENT_SUFFIX + SWAP_SUFFIX):
                    base = parse_segment_file_name(name[: -len(SWAP_SUFFIX)])
                    if base is None:
                        continue
                    f = open(directory / name, "rb")
                    opened.append(OpenSegment(base, directory / name, f, None))
                    end = swap_extent_end(f, directory / name, base)
                    for b in [b for b in segments if base <= b < end]:
                        del segments[b]
            for base, path in sorted(segments.items()):
                opened.append(OpenSegment(base, path, open(path, "rb"), None))
            opened.sort(key=lambda seg: seg.base_offset)
            return opened
        except FileNotFoundError:
            log.debug("%s changed while being opened (attempt %d), retrying", directory, attempt + 1)
            for seg in opened:
                seg.file.close()
        except BaseException:
            for seg in opened:
                seg.file.close()
            raise
    raise StorageError(f"{directory}: the segments kept changing while being opened for reading")


def read_partition(directory: str | os.PathLike[str], start_offset: int = 0) -> Iterator[LogRecord]:
    """(offset, timestamp, record) of every complete entry of a partition directory, in order."""
    opened = _open_snapshot(Path(directory))
    yield from iter_log_records(read_opened(opened, start_offset, allow_torn_tail=True))


def read_log(path: str | os.PathLike[str], start_offset: int = 0) -> Iterator[LogRecord]:
    """read_partition for a directory, read_segment for a segment file."""
    if Path(path).is_dir():
        return read_partition(path, start_offset)
    return read_segment(path, start_offset)


def open_snapshot(directory: str | os.PathLike[str]) -> list[OpenSegment]:
    """The segments that make up a partition's log right now, opened for reading (the caller closes them)."""
    return _open_snapshot(Path(directory))
