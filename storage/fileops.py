"""The one seam for every file operation of storage/ that changes what is on disk.

Every module of storage/ creates, writes, fsyncs, renames, links, unlinks, truncates and locks
files and directories through a `FileOps` (reads go straight to the file system: they change
nothing a power loss could undo). The default is the real operating system; tests pass an
implementation that records what each fsync made durable and can simulate a power loss, or
one that fails a chosen operation (ENOSPC, EIO, EACCES).

The write lock is `fcntl.flock` on a lock file. On a local file system it is exclusive between
processes and released when the holder dies. On network file systems it is only as good as the
server's locking: NFSv4 maps it to byte-range locks through the server (held by a lease that can
expire under a network partition), NFSv3 without lockd and some FUSE file systems lock only on
the local machine. The writer epoch (storage.writer) fences a writer the lock failed to stop.
"""

from __future__ import annotations

import fcntl
import os
from pathlib import Path

PathLike = str | os.PathLike[str]


class FileOps:
    """The file operations of storage/, done on the real file system (override them in tests)."""

    def open_append(self, path: PathLike) -> int:
        """Open `path` for appending, creating it if missing; returns a file descriptor."""
        return os.open(path, os.O_WRONLY | os.O_CREAT | os.O_APPEND, 0o644)

    def create(self, path: PathLike, *, exclusive: bool = False) -> int:
        """Create `path` empty for writing (truncating an existing file unless `exclusive`)."""
        flags = os.O_WRONLY | os.O_CREAT | (os.O_EXCL if exclusive else os.O_TRUNC)
        return os.open(path, flags, 0o644)

    def open_existing(self, path: PathLike) -> int:
        """Open an existing file for writing in place (no truncation); returns a file descriptor."""
        return os.open(path, os.O_WRONLY)

    def write_at(self, fd: int, data: bytes, offset: int) -> int:
        """Write some of `data` at `offset` of a file opened by open_existing; returns how many bytes."""
        return os.pwrite(fd, data, offset)

    def write(self, fd: int, data: bytes | memoryview) -> int:
        """Write some of `data` at the descriptor's position; returns how many bytes were written."""
        return os.write(fd, data)

    def fsync(self, fd: int) -> None:
        """Make the contents of an open file durable."""
        os.fsync(fd)

    def close(self, fd: int) -> None:
        """Close a descriptor returned by open_append or create."""
        os.close(fd)

    def fsync_directory(self, directory: PathLike) -> None:
        """Make the creations, renames and deletions of entries in `directory` durable."""
        fd = os.open(directory, os.O_RDONLY | os.O_DIRECTORY)
        try:
            os.fsync(fd)
        finally:
            os.close(fd)

    def rename(self, src: PathLike, dst: PathLike) -> None:
        """Rename `src` to `dst` atomically, replacing `dst` if it exists (same directory)."""
        os.replace(src, dst)

    def link(self, src: PathLike, dst: PathLike) -> None:
        """A second name `dst` for the file `src`; FileExistsError if `dst` exists."""
        os.link(src, dst)

    def unlink(self, path: PathLike) -> None:
        """Remove the directory entry `path`."""
        os.unlink(path)

    def truncate(self, path: PathLike, size: int) -> None:
        """Cut the file at `path` to `size` bytes."""
        os.truncate(path, size)

    def mkdir(self, path: PathLike) -> None:
        """Create the directory `path` (its parent must exist); FileExistsError if it exists."""
        os.mkdir(path)

    def lock(self, path: PathLike) -> int | None:
        """Take an exclusive lock on the lock file `path` without waiting; None if another holds it.

        The returned descriptor holds the lock until `unlock`; the lock file is never removed.
        """
        fd = os.open(path, os.O_RDWR | os.O_CREAT, 0o644)
        try:
            fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
        except BlockingIOError:
            os.close(fd)
            return None
        except BaseException:
            os.close(fd)
            raise
        return fd

    def unlock(self, handle: int) -> None:
        """Release a lock taken by `lock`."""
        os.close(handle)


OS_FILES = FileOps()


def write_all(files: FileOps, fd: int, data: bytes | memoryview) -> None:
    """Write all of `data`, looping on short writes."""
    view = memoryview(data)
    while view:
        n = files.write(fd, view)
        view = view[n:]


def makedirs_durably(files: FileOps, directory: PathLike) -> bool:
    """Create `directory` and its missing parents, each made durable in its parent; True if created."""
    if os.path.isdir(directory):  # the usual answer, without building a Path
        return False
    d = Path(directory)
    if d.is_dir():
        return False
    if not d.parent.is_dir():
        makedirs_durably(files, d.parent)
    try:
        files.mkdir(d)
    except FileExistsError:
        if d.is_dir():
            return False  # created concurrently
        raise
    files.fsync_directory(d.parent)
    return True


def replace_file_durably(files: FileOps, path: PathLike, data: bytes) -> None:
    """Replace the file at `path` with `data` atomically and durably (temp file, fsync, rename, fsync dir)."""
    path = Path(path)
    tmp = path.with_name(path.name + ".tmp")
    fd = files.create(tmp)
    try:
        write_all(files, fd, data)
        files.fsync(fd)
    finally:
        files.close(fd)
    files.rename(tmp, path)
    files.fsync_directory(path.parent)
