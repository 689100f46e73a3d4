"""The one place storage/ makes things durable: fsync of a file descriptor, a file or a directory.

Every module of storage/ that fsyncs goes through these functions (and takes an `FsyncFn` to
replace os.fsync), so that tests can count fsyncs or make them fail, and so that a directory
entry is always made durable the same way.
"""

from __future__ import annotations

import os
from typing import Callable

FsyncFn = Callable[[int], None]


def os_fsync(fd: int) -> None:
    """os.fsync, looked up at call time so that tests can monkeypatch it."""
    os.fsync(fd)


def fsync_directory(directory: str | os.PathLike[str], fsync: FsyncFn = os_fsync) -> None:
    """Make renames, creations and deletions in `directory` durable."""
    fd = os.open(directory, os.O_RDONLY | os.O_DIRECTORY)
    try:
        fsync(fd)
    finally:
        os.close(fd)


def fsync_file(path: str | os.PathLike[str], fsync: FsyncFn = os_fsync) -> None:
    """Make the contents of the file at `path` durable."""
    fd = os.open(path, os.O_RDONLY)
    try:
        fsync(fd)
    finally:
        os.close(fd)
