"""The interface between a shard and its log, and a log kept in memory."""

from __future__ import annotations

from typing import Protocol, Sequence

from .records import Record


class RecordLog(Protocol):
    """Where a shard appends its records.

    append() stages records and returns the log end offset after them (the count of records
    ever appended). durable_offset says how far the log is durable; a log that makes records
    durable later tells the shard through GroupCoordinator.on_durable(offset).
    """

    def append(self, records: Sequence[Record]) -> int: ...

    @property
    def durable_offset(self) -> int: ...


class MemoryLog:
    """A RecordLog in memory whose appends are durable at once; `.records` holds them in order."""

    def __init__(self) -> None:
        self.records: list[Record] = []

    def append(self, records: Sequence[Record]) -> int:
        self.records.extend(records)
        return len(self.records)

    @property
    def end_offset(self) -> int:
        return len(self.records)

    @property
    def durable_offset(self) -> int:
        return len(self.records)
