"""groupcoord.protocol: the pure group protocol (no Ray, no I/O, no wall clock inside the shard).

Every public name of the protocol is importable from here: the requests and responses (messages.py,
consumer/messages.py), `GroupCoordinator` and what drives it (shard/). How to use them is in
docs/clients.md ("the coordinator itself is a pure class you can drive directly"); how the sub-rooms
fit together is the Architecture section of README.md.

The names load on first use (PEP 562), so that a process which needs one sub-room (storage's
cleaner process reads records, and only those) does not import the whole coordinator.
"""

from __future__ import annotations

import importlib
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from .apis import Api as Api
    from .config import GroupConfig as GroupConfig
    from .errors import Errors as Errors
    from .messages import *  # noqa: F403
    from .partitioner import partition_for as partition_for
    from .shard.clock import Clock as Clock
    from .shard.clock import ManualClock as ManualClock
    from .shard.clock import SystemClock as SystemClock
    from .shard.coordinator import GroupCoordinator as GroupCoordinator
    from .shard.deferred import Deferred as Deferred
    from .shard.log import MemoryLog as MemoryLog
    from .shard.log import RecordBatchTooLarge as RecordBatchTooLarge
    from .shard.log import RecordLog as RecordLog
    from .values import GroupState as GroupState
    from .values import OffsetAndMetadata as OffsetAndMetadata
    from .values import TopicPartition as TopicPartition

# name -> the module (relative to this package) that defines it; every request and response is in `.messages`.
_HOMES = {
    "Api": ".apis",
    "Clock": ".shard.clock",
    "Deferred": ".shard.deferred",
    "Errors": ".errors",
    "GroupConfig": ".config",
    "GroupCoordinator": ".shard.coordinator",
    "GroupState": ".values",
    "ManualClock": ".shard.clock",
    "MemoryLog": ".shard.log",
    "OffsetAndMetadata": ".values",
    "RecordBatchTooLarge": ".shard.log",
    "RecordLog": ".shard.log",
    "SystemClock": ".shard.clock",
    "TopicPartition": ".values",
    "partition_for": ".partitioner",
}


def _messages_all() -> list[str]:
    return list(importlib.import_module(".messages", __name__).__all__)


if not TYPE_CHECKING:  # mypy reads the imports above, and so still reports a name this package does not have

    def __getattr__(name: str) -> Any:
        if name == "__all__":
            value = [*_HOMES, *_messages_all()]
        elif name in _HOMES:
            value = getattr(importlib.import_module(_HOMES[name], __name__), name)
        elif name in _messages_all():
            value = getattr(importlib.import_module(".messages", __name__), name)
        else:
            raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
        globals()[name] = value
        return value

    def __dir__() -> list[str]:
        return sorted({*globals(), *_HOMES, *_messages_all()})
