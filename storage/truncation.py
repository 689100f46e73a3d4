"""Cutting a closed partition log back to an offset: a follower dropping the suffix a new leader does not have.

KIP-101/KIP-279: a follower truncates its log to where it diverges from the leader's before
copying from it. The cut must fall between two entries; when it does not (an entry spanning it,
say in a compacted segment), TruncationError tells the caller to copy the whole log again.
The truncating follower is the log's writer: it takes the write lock and a new writer epoch
(storage.writer) for the cut, and makes every change through the file-operation seam.
"""

from __future__ import annotations

import logging
import os
from pathlib import Path

from .fileops import OS_FILES, FileOps
from .framing import EntryScanner
from .segment import list_segment_files
from .writer import WriterFence

log = logging.getLogger(__name__)


class TruncationError(ValueError):
    """The log cannot be cut at the asked offset (it falls inside an entry)."""


def truncate_partition_dir(directory: str | os.PathLike[str], offset: int, files: FileOps | None = None) -> None:
    """Remove every record at or past `offset` from the (closed) log in `directory`, durably.

    LogLockedError if the log is open for writing elsewhere; TruncationError (changing nothing)
    if `offset` falls inside an entry.
    """
    files = files if files is not None else OS_FILES
    directory = Path(directory)
    fence = WriterFence(directory, files)
    try:
        _truncate(directory, offset, files, fence)
    finally:
        fence.release()


def _truncate(directory: Path, offset: int, files: FileOps, fence: WriterFence) -> None:
    for base, path in reversed(list_segment_files(directory)):
        if base >= offset and base > 0:
            fence.check()
            log.warning("%s: truncation to %d removes segment %s", directory, offset, path.name)
            files.unlink(path)
            continue
        cut = _entry_boundary(path, base, offset)
        if cut is not None:
            fence.check()
            files.truncate(path, cut)
            fd = files.open_existing(path)
            try:
                files.fsync(fd)
            finally:
                files.close(fd)
            log.warning("%s: truncated %s to byte %d (offset %d)", directory, path.name, cut, offset)
        break
    files.fsync_directory(directory)


def _entry_boundary(path: Path, base: int, offset: int) -> int | None:
    """The byte position where records at `offset` and after begin in segment `path`; None if none are there."""
    with open(path, "rb") as f:
        size = os.fstat(f.fileno()).st_size
        for entry in EntryScanner(f, path, size, min_offset=base, allow_torn_tail=True):
            if entry.base_offset >= offset:
                return entry.position
            if entry.next_offset > offset:
                raise TruncationError(f"{path}: offset {offset} falls inside the entry at byte {entry.position}")
    return None
