"""groupcoord.protocol: the pure group protocol (no Ray, no I/O, no wall clock inside the shard)."""

from .clock import Clock, ManualClock, SystemClock
from .deferred import Deferred
from .errors import Errors
from .log import MemoryLog, RecordLog
from .messages import *  # noqa: F403
from .partitioner import partition_for
from .values import OffsetAndMetadata, TopicPartition
