"""The interface between a shard and its log, and a log kept in memory."""

from __future__ import annotations

from typing import Protocol, Sequence

from ..records import Record


class RecordBatchTooLarge(ValueError):
    """A log refused a batch larger than one entry may be; nothing of it was staged.

    Kafka's MESSAGE_TOO_LARGE / RECORD_LIST_TOO_LARGE: the shard answers the request with an
    error code (UNKNOWN_SERVER_ERROR, as Kafka's Java coordinator does) and changes nothing.
    """


class RecordLog(Protocol):
    """Where a shard appends its records.

    append() stages records and returns the log end offset after them (the count of records
    ever appended); a batch the log cannot hold raises RecordBatchTooLarge with nothing staged.
    durable_offset says how far the log is durable; a log that makes records durable later tells
    the shard through GroupCoordinator.on_durable(offset).
    """

    def append(self, records: Sequence[Record]) -> int:
        """Stage `records` and return the log end offset after them."""
        ...

    @property
    def durable_offset(self) -> int:
        """How many records of the log are durable."""
        ...


class MemoryLog:
    """A RecordLog in memory whose appends are durable at once; `.records` holds them in order."""

    def __init__(self) -> None:
        self.records: list[Record] = []

    def append(self, records: Sequence[Record]) -> int:
        """Keep `records` (durable at once) and return the number of records kept so far."""
        self.records.extend(records)
        return len(self.records)

    @property
    def end_offset(self) -> int:
        """The number of records appended so far."""
        return len(self.records)

    @property
    def durable_offset(self) -> int:
        """The number of durable records: all of them."""
        return len(self.records)
