"""One writer per partition log: an OS lock held while the log is open for writing, and a writer epoch.

Opening a log for writing takes `writer.lock` in its directory (see storage.fileops for what the
lock is worth on network file systems), then reads the epoch recorded in `writer-epoch`, adds one
and records it durably. Before every write the writer checks that the recorded epoch is still its
own (one small read): a writer that a newer one replaced --
a zombie partition actor, or a second service on a file system whose locks do not work -- gets
StaleWriterError and writes nothing. Readers (replay by analytics) take neither.
"""

from __future__ import annotations

import errno
import logging
import os
from pathlib import Path

from .errors import LogWriteError, StorageError
from .fileops import FileOps, replace_file_durably

log = logging.getLogger(__name__)

LOCK_FILE = "writer.lock"
EPOCH_FILE = "writer-epoch"
EPOCH_DIGITS = 20


class LogLockedError(StorageError):
    """Another process holds the write lock of the log: it is open for writing elsewhere."""


class StaleWriterError(StorageError):
    """A newer writer opened the log (its epoch is higher): this one must stop and never write again."""


def read_epoch(directory: Path) -> int:
    """The writer epoch recorded in `directory` (0 if none was ever recorded)."""
    path = os.path.join(directory, EPOCH_FILE)  # read before every write: plain os calls, no pathlib or decoding
    try:
        with open(path, "rb") as f:
            data = f.read()
    except FileNotFoundError:
        return 0
    try:
        return int(data.strip())
    except ValueError:
        raise StorageError(f"writer epoch file {path} holds {data[:40]!r}, not an integer") from None


class WriterFence:
    """The write lock and writer epoch of one open log (see the module docstring)."""

    def __init__(self, directory: Path, files: FileOps) -> None:
        self.directory = directory
        self.files = files
        self.epoch_path = directory / EPOCH_FILE
        try:
            self._handle = files.lock(directory / LOCK_FILE)
        except OSError as e:
            raise LogWriteError(directory / LOCK_FILE, "lock", e) from e
        if self._handle is None:
            raise LogLockedError(
                f"log {directory} is open for writing by another process (it holds {directory / LOCK_FILE}); "
                f"stop that writer first -- one partition log has one writer"
            )
        try:
            self.epoch = read_epoch(directory) + 1
            try:
                self._record()
            except OSError as e:
                raise LogWriteError(self.epoch_path, "recording the writer epoch", e) from e
        except BaseException:
            self.release()
            raise
        log.info("%s: writer epoch %d", directory, self.epoch)

    def _record(self) -> None:
        # Overwritten in place once it exists (no new space needed, so a partition still opens, and
        # serves reads, on a full disk); fixed-width digits, so a torn overwrite never goes backwards.
        data = f"{self.epoch:0{EPOCH_DIGITS}d}\n".encode()
        try:
            same_size = os.path.getsize(self.epoch_path) == len(data)
        except FileNotFoundError:
            same_size = False
        if not same_size:
            replace_file_durably(self.files, self.epoch_path, data)
            return
        fd = self.files.open_existing(self.epoch_path)
        try:
            if self.files.write_at(fd, data, 0) != len(data):
                raise OSError(errno.EIO, "short write of the writer epoch")
            self.files.fsync(fd)
        finally:
            self.files.close(fd)

    def check(self) -> None:
        """Raise StaleWriterError unless the recorded epoch is still this writer's (one small read)."""
        try:
            recorded = read_epoch(self.directory)
        except OSError as e:
            raise LogWriteError(self.epoch_path, "reading the writer epoch", e) from e
        if recorded != self.epoch:
            raise StaleWriterError(
                f"log {self.directory} was opened by a newer writer (epoch {recorded}, this writer has "
                f"{self.epoch}); this writer is fenced and writes nothing more"
            )

    def release(self) -> None:
        """Release the write lock (the epoch stays recorded)."""
        handle, self._handle = self._handle, None
        if handle is not None:
            self.files.unlock(handle)
