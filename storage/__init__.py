"""groupcoord.storage: the durable, segmented, compacted log of each offsets partition.

It imports only groupcoord.protocol (never Ray). See PartitionLog for the writer, StorageRoot
for the directory of a whole service, and reader for read-only access by analytics.
"""

from .compaction import CompactionResult
from .errors import (
    CompactionError,
    CorruptLogError,
    LogClosedError,
    LogWriteError,
    StorageConfigError,
    StorageError,
)
from .fileops import FileOps
from .partition_log import SYNC_POLICIES, PartitionLog
from .reader import LogRecord, list_segments, read_log, read_partition, read_segment
from .root import LostPartitionError, RootInUseError, StorageRoot
from .writer import LogLockedError, StaleWriterError

__all__ = [
    "SYNC_POLICIES",
    "CompactionError",
    "CompactionResult",
    "CorruptLogError",
    "FileOps",
    "LogClosedError",
    "LogLockedError",
    "LogRecord",
    "LogWriteError",
    "LostPartitionError",
    "PartitionLog",
    "RootInUseError",
    "StaleWriterError",
    "StorageConfigError",
    "StorageError",
    "StorageRoot",
    "list_segments",
    "read_log",
    "read_partition",
    "read_segment",
]
