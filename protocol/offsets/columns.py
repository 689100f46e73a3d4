"""One group's committed offsets stored by column: parallel arrays of rows, not a Python object per offset.

A row holds one committed offset: its offset, leader epoch and commit timestamp in `array` columns,
its metadata string in a list (every empty metadata is the one interned ""; None marks a free row),
and an expire timestamp only when one was given (a dict of the few rows that have one). One int32
array maps partition -> row (-1: none) for all the group's topics, each topic a run of it that
starts at its base: `topics` maps a topic to base << 13 | the run's length. An OffsetCommitValue is
built only when asked for.

What does not fit that layout (a partition past DENSE_PARTITIONS, a value outside the columns'
integer ranges, metadata that is not a str) is kept as it came, in a small dict beside the columns,
so every value the shard may replay round-trips exactly. Reads see the offsets as a Mapping
TopicPartition -> OffsetCommitValue, ordered by topic name, then partition.

A bulk load (storage.bulk_replay) hands over its groups pending: each group's columns are copied out
of the load's shared ones the first time the group is used, not at load. A restart with a million
live offsets in 10,000 groups spent a fifth of its replay building columns most groups would not
need for a while.
"""

from __future__ import annotations

import sys
from array import array
from dataclasses import dataclass
from typing import Container, Iterator, Mapping, Protocol, Sequence

from ..records import OffsetCommitValue, Record
from ..values import TopicPartition

# Partitions below this are indexed densely (4 bytes per partition up to the highest one committed);
# a higher one (Kafka topics rarely have a thousand partitions) is kept in the side dict.
DENSE_PARTITIONS = 4096
RUN_BITS = 13  # a topic's entry in `topics`: base << RUN_BITS | length of its run (at most DENSE_PARTITIONS)
_RUN_MASK = (1 << RUN_BITS) - 1

_new = tuple.__new__
intern = sys.intern
_NONE = array("i", [-1])


Columns = tuple[dict[str, int], array, array, array, array, list[str | None], dict[int, int] | None]


class ColumnSource(Protocol):
    """Where a pending group's columns come from: a bulk load's shared columns."""

    def columns(self, key: int) -> Columns:
        """Group `key`'s topics, index, offset, epoch and committed columns, metadata and expire timestamps."""
        ...


class GroupOffsets(Mapping[TopicPartition, OffsetCommitValue]):
    """The committed offsets of one group, by column; a read-only Mapping to its readers."""

    __slots__ = ("committed", "dead", "epoch", "expire", "free", "index", "meta", "offset", "pending", "sparse",
                 "topics")

    def __init__(self) -> None:
        self.topics: dict[str, int] = {}  # topic -> base << RUN_BITS | run length, its run of `index`
        self.index = array("i")  # partition -> row (-1: none), topic by topic
        self.dead = 0  # entries of `index` no topic's run covers any more
        self.offset = array("q")
        self.epoch = array("i")
        self.committed = array("q")
        self.meta: list[str | None] = []  # None: a free row
        self.expire: dict[int, int] | None = None  # row -> expire timestamp, for rows that have one
        self.sparse: dict[TopicPartition, OffsetCommitValue] | None = None
        self.free = 0  # rows not in use (their metadata None), until the columns are compacted
        self.pending: tuple[ColumnSource, int, int] | None = None  # (source, key, rows) until the columns are built

    @classmethod
    def from_source(cls, source: ColumnSource, key: int, rows: int,
                    sparse: dict[TopicPartition, OffsetCommitValue] | None = None) -> GroupOffsets:
        """A bulk-loaded group of `rows` offsets (all in use) in the columns, plus `sparse`: its columns are
        `source.columns(key)`, built the first time the group is read or written."""
        self = cls.__new__(cls)
        self.pending, self.sparse = (source, key, rows), sparse or None
        return self

    def _build(self) -> None:
        """Build a pending group's columns (each method that reads or writes them calls this first, if pending)."""
        assert self.pending is not None
        source, key, _ = self.pending
        self.topics, self.index, self.offset, self.epoch, self.committed, self.meta, expire = source.columns(key)
        self.expire, self.dead, self.free, self.pending = expire or None, 0, 0, None

    # --- writes (replay only) --------------------------------------------------------------

    def put(self, topic: str, partition: int, value: OffsetCommitValue) -> bool:
        """Store `value` as the committed offset of (topic, partition); True if the key was new."""
        if self.pending is not None:
            self._build()
        offset, epoch, metadata, committed, expire = value
        run = self.topics.get(topic)
        if run is not None and type(partition) is int and 0 <= partition < run & _RUN_MASK:
            at = (run >> RUN_BITS) + partition
            row = self.index[at]
            if row >= 0:
                if type(metadata) is str:
                    try:
                        self.offset[row] = offset
                        self.epoch[row] = epoch
                        self.committed[row] = committed
                    except (OverflowError, TypeError):
                        pass
                    else:
                        self.meta[row] = metadata if metadata else ""
                        if expire != -1 or self.expire:
                            self._set_expire(row, expire)
                        return False
                self._free(topic, run, at, row)
                return self._put_sparse(topic, partition, value, new=False)
        sparse = self.sparse
        was_sparse = sparse is not None and sparse.pop(_new(TopicPartition, (topic, partition)), None) is not None
        if type(partition) is not int or not 0 <= partition < DENSE_PARTITIONS or type(metadata) is not str:
            return self._put_sparse(topic, partition, value, new=not was_sparse)
        row = len(self.meta)
        try:
            self.offset.append(offset)
            self.epoch.append(epoch)
            self.committed.append(committed)
        except (OverflowError, TypeError):
            del self.offset[row:], self.epoch[row:], self.committed[row:]
            return self._put_sparse(topic, partition, value, new=not was_sparse)
        self.meta.append(metadata if metadata else "")
        if expire != -1:
            self._set_expire(row, expire)
        index = self.index
        if run is None:  # the topic's first offset: a run at the end
            # One str per topic name, not one per group (replay decodes a new one each time).
            self.topics[intern(topic) if type(topic) is str else topic] = len(index) << RUN_BITS | (partition + 1)
            if partition:
                index.extend(_NONE * partition)
            index.append(row)
        elif partition < run & _RUN_MASK:
            index[(run >> RUN_BITS) + partition] = row
        elif (run >> RUN_BITS) + (run & _RUN_MASK) == len(index):  # the last run grows in place, doubling
            length = run & _RUN_MASK
            grown = min(DENSE_PARTITIONS, max(partition + 1, 2 * length))
            index.extend(_NONE * (grown - length))
            index[(run >> RUN_BITS) + partition] = row
            self.topics[topic] = run - length + grown
        else:
            at = self._moved(topic, run, partition)  # which may lay `index` out again: a new array
            self.index[at] = row
        return not was_sparse

    def put_run(self, topics: Sequence[str], partitions: Sequence[int], offsets: Sequence[int],
                epochs: Sequence[int], metadata: Sequence[str], committed: int, expire: int) -> int:
        """Store one commit's values, record by record as `put` would (a run's columns; see OffsetCommitRun);
        returns how many keys were new. A partition that already has a row is written in place here."""
        if self.pending is not None:
            self._build()
        new = 0
        runs, offset_column, epoch_column, committed_column, meta = (
            self.topics, self.offset, self.epoch, self.committed, self.meta)
        plain = expire == -1 and not self.expire  # no row's expire timestamp to set or clear
        for topic, partition, offset, epoch, md in zip(topics, partitions, offsets, epochs, metadata, strict=True):
            run = runs.get(topic)
            if run is not None and plain and 0 <= partition < run & _RUN_MASK:
                row = self.index[(run >> RUN_BITS) + partition]
                if row >= 0 and type(md) is str:
                    try:
                        offset_column[row] = offset
                        epoch_column[row] = epoch
                        committed_column[row] = committed
                    except (OverflowError, TypeError):
                        pass  # put keeps what the columns cannot hold
                    else:
                        meta[row] = md if md else ""
                        continue
            if self.put(topic, partition, _new(OffsetCommitValue, (offset, epoch, md, committed, expire))):
                new += 1
        return new

    def _moved(self, topic: str, run: int, partition: int) -> int:
        """Where `partition` of `topic` sits in `index` once the topic's run, too short, moved to the end, grown."""
        index = self.index
        base, length = run >> RUN_BITS, run & _RUN_MASK
        grown = min(DENSE_PARTITIONS, max(partition + 1, 2 * length))
        moved = index[base : base + length]
        self.dead += length
        if self.dead > 64 and 2 * self.dead > len(index):
            del self.topics[topic]
            self._compact_index()
            index = self.index
        new_base = len(index)
        index.extend(moved)
        index.extend(_NONE * (grown - length))
        self.topics[topic] = new_base << RUN_BITS | grown
        return new_base + partition

    def _compact_index(self) -> None:
        """Lay the topics' runs out again back to back, without the entries no run covers."""
        index, packed = self.index, array("i")
        for topic, run in self.topics.items():
            base, length = run >> RUN_BITS, run & _RUN_MASK
            self.topics[topic] = len(packed) << RUN_BITS | length
            packed.extend(index[base : base + length])
        self.index, self.dead = packed, 0

    def _put_sparse(self, topic: str, partition: int, value: OffsetCommitValue, new: bool) -> bool:
        if self.sparse is None:
            self.sparse = {}
        self.sparse[_new(TopicPartition, (topic, partition))] = value
        return new

    def _set_expire(self, row: int, expire: int) -> None:
        if expire == -1:
            if self.expire is not None:
                self.expire.pop(row, None)
        else:
            if self.expire is None:
                self.expire = {}
            self.expire[row] = expire

    def delete(self, topic: str, partition: int) -> bool:
        """Remove the committed offset of (topic, partition); True if there was one."""
        if self.pending is not None:
            self._build()
        run = self.topics.get(topic)
        if run is not None and type(partition) is int and 0 <= partition < run & _RUN_MASK:
            at = (run >> RUN_BITS) + partition
            row = self.index[at]
            if row >= 0:
                self._free(topic, run, at, row)
                if self.free > len(self.meta) - self.free + 32:
                    self._compact()
                return True
        sparse = self.sparse
        if sparse is not None and sparse.pop(_new(TopicPartition, (topic, partition)), None) is not None:
            if not sparse:
                self.sparse = None
            return True
        return False

    def _free(self, topic: str, run: int, at: int, row: int) -> None:
        self.index[at] = -1
        self.meta[row] = None
        if self.expire:
            self.expire.pop(row, None)
        self.free += 1
        base, length = run >> RUN_BITS, run & _RUN_MASK
        if self.index[base : base + length].count(-1) == length:  # the topic's last offset: its run goes
            del self.topics[topic]
            self.dead += length
            if not self.topics:
                self.index, self.dead = array("i"), 0

    def _compact(self) -> None:
        """Drop the free rows: every column rebuilt from the rows in use, the index renumbered."""
        meta = self.meta
        keep = [row for row in range(len(meta)) if meta[row] is not None]
        renumber = {old: new for new, old in enumerate(keep)}
        offset, epoch, committed = self.offset, self.epoch, self.committed
        self.offset = array("q", [offset[r] for r in keep])
        self.epoch = array("i", [epoch[r] for r in keep])
        self.committed = array("q", [committed[r] for r in keep])
        self.meta, self.free = [meta[r] for r in keep], 0
        if self.expire:
            self.expire = {renumber[r]: ts for r, ts in self.expire.items()}
        self._compact_index()
        index = self.index
        for at, row in enumerate(index):
            if row >= 0:
                index[at] = renumber[row]

    # --- reads -----------------------------------------------------------------------------

    def _value(self, row: int) -> OffsetCommitValue:
        expire = -1 if not self.expire else self.expire.get(row, -1)
        return _new(OffsetCommitValue, (self.offset[row], self.epoch[row], self.meta[row], self.committed[row], expire))

    def __getitem__(self, tp: TopicPartition) -> OffsetCommitValue:
        value = self.get(tp)
        if value is None:
            raise KeyError(tp)
        return value

    def get(self, tp: TopicPartition, default: OffsetCommitValue | None = None) -> OffsetCommitValue | None:  # type: ignore[override]
        """The committed offset of `tp`, or `default`."""
        if self.pending is not None:
            self._build()
        topic, partition = tp
        run = self.topics.get(topic)
        if run is not None and type(partition) is int and 0 <= partition < run & _RUN_MASK:
            row = self.index[(run >> RUN_BITS) + partition]
            if row >= 0:
                return self._value(row)
        if self.sparse is not None:
            return self.sparse.get(_new(TopicPartition, (topic, partition)), default)
        return default

    def __contains__(self, tp: object) -> bool:
        if not isinstance(tp, tuple) or len(tp) != 2:
            return False
        return self.get(tp) is not None  # type: ignore[arg-type]

    def __len__(self) -> int:
        dense = len(self.meta) - self.free if self.pending is None else self.pending[2]
        return dense + (len(self.sparse) if self.sparse else 0)

    def committed_of(self, topics: Container[str]) -> list[tuple[str, int, int]]:
        """(topic, partition, committed offset) of the partitions of `topics` that have one, read from the columns
        without building values: consumer lag reads every group this way, and skips the topics it has no end for.
        A list, read at once: the caller may let other work change the group before it has gone through it."""
        if self.pending is not None:
            self._build()
        index, offset = self.index, self.offset
        out = [(topic, partition, offset[row])
               for topic, run in self.topics.items() if topic in topics
               for partition, row in enumerate(index[run >> RUN_BITS : (run >> RUN_BITS) + (run & _RUN_MASK)])
               if row >= 0]
        if self.sparse:
            out += [(topic, partition, value.offset) for (topic, partition), value in self.sparse.items()
                    if topic in topics]
        return out

    def _rows(self) -> Iterator[tuple[TopicPartition, int]]:
        """(partition, row) of the rows in use, by topic name, then partition."""
        new, index, topics = _new, self.index, self.topics
        for topic in sorted(topics):
            base = topics[topic] >> RUN_BITS
            for p, row in enumerate(index[base : base + (topics[topic] & _RUN_MASK)]):
                if row >= 0:
                    yield new(TopicPartition, (topic, p)), row

    def __iter__(self) -> Iterator[TopicPartition]:
        if self.pending is not None:
            self._build()
        if not self.sparse:
            return (tp for tp, _ in self._rows())
        return iter(sorted([*(tp for tp, _ in self._rows()), *self.sparse]))

    def items(self) -> Iterator[tuple[TopicPartition, OffsetCommitValue]]:  # type: ignore[override]
        """(partition, committed offset) pairs, values built as they are read."""
        if self.pending is not None:
            self._build()
        value = self._value
        if not self.sparse:
            return ((tp, value(row)) for tp, row in self._rows())
        pairs = [*((tp, value(row)) for tp, row in self._rows()), *self.sparse.items()]
        pairs.sort(key=lambda pair: pair[0])
        return iter(pairs)


@dataclass(frozen=True)
class BulkLoad:
    """A log decoded in bulk for a fresh shard: what replaying it record by record would leave.

    `events` are, in log order, the records other than offset commits and, as a group id (a str),
    each point where an offset commit of a group came before the next such record (where replay
    would create the group as a simple group if it did not exist). `offsets` are the committed
    offsets left at the end (the last record of each key), by group. `records` counts the log's records.
    """

    events: Sequence[Record | str]
    offsets: dict[str, GroupOffsets]
    records: int
