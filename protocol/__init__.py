"""groupcoord.protocol: the pure group protocol (no Ray, no I/O, no wall clock inside the shard).

Everything API.md names is importable from here.
"""

from .config import GroupConfig
from .errors import Errors
from .messages import *  # noqa: F403  (every request and response; messages.__all__ lists them)
from .messages import __all__ as _messages_all
from .partitioner import partition_for
from .shard.clock import Clock, ManualClock, SystemClock
from .shard.coordinator import GroupCoordinator
from .shard.deferred import Deferred
from .shard.log import MemoryLog, RecordBatchTooLarge, RecordLog
from .values import GroupState, OffsetAndMetadata, TopicPartition

__all__ = [
    "Clock",
    "Deferred",
    "Errors",
    "GroupConfig",
    "GroupCoordinator",
    "GroupState",
    "ManualClock",
    "MemoryLog",
    "OffsetAndMetadata",
    "RecordBatchTooLarge",
    "RecordLog",
    "SystemClock",
    "TopicPartition",
    "partition_for",
    *_messages_all,
]
