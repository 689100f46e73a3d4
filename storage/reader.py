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
from pathlib import Path
from typing import BinaryIO, Iterator, NamedTuple

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


def iter_file_records(
    file: BinaryIO,
    path: str | os.PathLike[str],
    limit: int,
    *,
    min_offset: int = 0,
    start_offset: int = 0,
    allow_torn_tail: bool = False,
) -> Iterator[Record]:
    """The records of one open segment file up to byte `limit`, from `start_offset` on."""
    decoder = BatchDecoder(path)
    scanner = EntryScanner(file, path, limit, min_offset=min_offset, allow_torn_tail=allow_torn_tail)
    for entry in scanner:
        if entry.base_offset >= start_offset:
            yield from decoder.decode(entry)
        elif entry.next_offset > start_offset:
            yield from decoder.decode(entry)[start_offset - entry.base_offset :]


def iter_file_log_records(
    file: BinaryIO,
    path: str | os.PathLike[str],
    limit: int,
    *,
    min_offset: int = 0,
    start_offset: int = 0,
    allow_torn_tail: bool = False,
) -> Iterator[LogRecord]:
    """Like iter_file_records, but each record comes with its offset and timestamp."""
    decoder = BatchDecoder(path)
    scanner = EntryScanner(file, path, limit, min_offset=min_offset, allow_torn_tail=allow_torn_tail)
    for entry in scanner:
        if entry.next_offset <= start_offset:
            continue
        offset = entry.base_offset
        ts = entry.timestamp_ms
        for record in decoder.decode(entry):
            if offset >= start_offset:
                yield LogRecord(offset, ts, record)
            offset += 1


def list_segments(directory: str | os.PathLike[str]) -> list[Path]:
    """The segment files of a partition directory, in offset order (a task can read each one)."""
    return [path for _, path in list_segment_files(directory)]


def read_segment(path: str | os.PathLike[str], start_offset: int = 0) -> Iterator[LogRecord]:
    """(offset, timestamp, record) of every complete entry of one segment file."""
    path = Path(path)
    base = parse_segment_file_name(path.name.removesuffix(SWAP_SUFFIX)) or 0
    with open(path, "rb") as f:
        size = os.fstat(f.fileno()).st_size
        yield from iter_file_log_records(
            f, path, size, min_offset=base, start_offset=start_offset, allow_torn_tail=True
        )


def _open_snapshot(directory: Path) -> list[tuple[int, Path, BinaryIO]]:
    """Open the segments that make up the log right now (see the module docstring)."""
    for attempt in range(_SNAPSHOT_ATTEMPTS):
        opened: list[tuple[int, Path, BinaryIO]] = []
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
                    opened.append((base, directory / name, f))
                    end = swap_extent_end(f, directory / name, base)
                    for b in [b for b in segments if base <= b < end]:
                        del segments[b]
            for base, path in sorted(segments.items()):
                opened.append((base, path, open(path, "rb")))
            opened.sort(key=lambda t: t[0])
            return opened
        except FileNotFoundError:
            log.debug("%s changed while being opened (attempt %d), retrying", directory, attempt + 1)
            for _, _, f in opened:
                f.close()
        except BaseException:
            for _, _, f in opened:
                f.close()
            raise
    raise StorageError(f"{directory}: the segments kept changing while being opened for reading")


def read_partition(directory: str | os.PathLike[str], start_offset: int = 0) -> Iterator[LogRecord]:
    """(offset, timestamp, record) of every complete entry of a partition directory, in order."""
    directory = Path(directory)
    opened = _open_snapshot(directory)
    try:
        for i, (base, path, f) in enumerate(opened):
            if i + 1 < len(opened) and opened[i + 1][0] <= start_offset:
                continue
            size = os.fstat(f.fileno()).st_size
            yield from iter_file_log_records(
                f,
                path,
                size,
                min_offset=base,
                start_offset=start_offset,
                allow_torn_tail=i == len(opened) - 1,
            )
    finally:
        for _, _, f in opened:
            f.close()


def read_log(path: str | os.PathLike[str], start_offset: int = 0) -> Iterator[LogRecord]:
    """read_partition for a directory, read_segment for a segment file."""
    if Path(path).is_dir():
        return read_partition(path, start_offset)
    return read_segment(path, start_offset)

