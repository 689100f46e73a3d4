"""Segment files: their names, the directory listing, and one segment's file handle and bookkeeping."""

from __future__ import annotations

import logging
import os
import re
from dataclasses import dataclass
from pathlib import Path

from .errors import LogWriteError
from .fileops import OS_FILES, FileOps, write_all

log = logging.getLogger(__name__)

SEGMENT_SUFFIX = ".log"
OFFSET_DIGITS = 20
_SEGMENT_NAME = re.compile(r"^(\d{20})\.log$")


def segment_file_name(base_offset: int) -> str:
    """The file name of the segment whose first offset is base_offset, e.g. 00000000000000000000.log."""
    if base_offset < 0:
        raise ValueError(f"negative base offset {base_offset}")
    return f"{base_offset:0{OFFSET_DIGITS}d}{SEGMENT_SUFFIX}"


def parse_segment_file_name(name: str) -> int | None:
    """The base offset encoded in a segment file name, or None if `name` is not a segment file."""
    m = _SEGMENT_NAME.match(name)
    return int(m.group(1)) if m else None


def list_segment_files(directory: str | os.PathLike[str]) -> list[tuple[int, Path]]:
    """(base offset, path) of every segment file in `directory`, by base offset; [] if it is missing."""
    d = Path(directory)
    try:
        names = os.listdir(d)
    except FileNotFoundError:
        return []
    found = []
    for name in names:
        base = parse_segment_file_name(name)
        if base is not None:
            found.append((base, d / name))
    found.sort()
    return found


@dataclass(slots=True, eq=False, repr=False)
class Segment:
    """One segment file: where it is, the offsets it covers, and (while active) its append handle.

    `size` counts only whole entries that were written, `synced_size` the bytes the last fsync
    made durable; `next_offset` is the offset after the segment's last record or extent marker
    (its base offset while it is empty); `clean` says the segment was written by compaction.
    Segments compare by identity; `files` is the storage file-operation seam.
    """

    path: Path
    base_offset: int
    size: int
    next_offset: int
    clean: bool
    files: FileOps = OS_FILES
    fd: int | None = None
    synced_size: int = -1

    def __post_init__(self) -> None:
        if self.synced_size < 0:
            self.synced_size = self.size

    def __repr__(self) -> str:
        return (
            f"Segment({self.path.name}, size={self.size}, next_offset={self.next_offset}, "
            f"clean={self.clean})"
        )

    def open_for_append(self) -> None:
        """Open the file for appending (creating it if missing)."""
        try:
            self.fd = self.files.open_append(self.path)
        except OSError as e:
            raise LogWriteError(self.path, "open for append", e) from e

    def write(self, data: bytes | memoryview) -> None:
        """Append `data` (whole entries) with one write call, looping only on a short write."""
        assert self.fd is not None, "segment is not open for append"
        try:
            write_all(self.files, self.fd, data)
        except OSError as e:
            raise LogWriteError(self.path, "write", e) from e
        self.size += len(data)

    def sync(self) -> None:
        """fsync the segment file; `synced_size` then covers everything written."""
        assert self.fd is not None, "segment is not open for append"
        size = self.size
        try:
            self.files.fsync(self.fd)
        except OSError as e:
            raise LogWriteError(self.path, "fsync", e) from e
        self.synced_size = size

    def truncate(self, size: int) -> None:
        """Cut the file to `size` bytes (recovery of a torn tail)."""
        try:
            self.files.truncate(self.path, size)
        except OSError as e:
            raise LogWriteError(self.path, "truncate", e) from e
        self.size = size
        self.synced_size = min(self.synced_size, size)

    def close(self) -> None:
        """Close the append handle, if open."""
        if self.fd is not None:
            fd, self.fd = self.fd, None
            self.files.close(fd)
