"""The exceptions of the storage layer: broken storage, never a protocol error a client could act on."""

from __future__ import annotations

import os


class StorageError(Exception):
    """Base class of every storage failure; the partition should stop and recover from disk."""


class CorruptLogError(StorageError):
    """Bytes of a segment cannot be what the writer wrote: a bad checksum or an impossible entry."""

    def __init__(self, path: str | os.PathLike[str], position: int, reason: str) -> None:
        self.path = os.fspath(path)
        self.position = position
        self.reason = reason
        super().__init__(f"corrupt log segment {self.path} at byte {position}: {reason}")


class LogWriteError(StorageError):
    """A write, fsync or file operation of the log failed; the log now refuses further appends."""

    def __init__(self, path: str | os.PathLike[str], operation: str, cause: BaseException) -> None:
        self.path = os.fspath(path)
        self.operation = operation
        super().__init__(
            f"{operation} of {self.path} failed: {cause}; the log refuses further appends, "
            f"reopen it to recover from what is on disk"
        )


class LogClosedError(StorageError):
    """The log was closed, or failed earlier (the original failure is chained as __cause__)."""


class StorageConfigError(StorageError):
    """The storage root on disk does not match the configuration the service was started with."""


class CompactionError(StorageError):
    """Compaction failed; `committed` says whether the new segments had replaced the old ones yet."""

    def __init__(self, message: str, committed: bool) -> None:
        self.committed = committed
        super().__init__(message)
