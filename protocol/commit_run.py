"""The OffsetCommit records of one commit, kept by column instead of as a Record per partition.

A commit writes one record per partition, as Kafka does, and at 100 partitions per request building,
encoding and replaying a Record each is most of what the shard does for it. An OffsetCommitRun is
those records as columns: to every reader a Sequence of the same Records, while the log encodes it
from its columns (`encode`) and the shard replays it by column (OffsetMetadataManager.replay_run).
Its encoding is the one encode_batch gives its Records, except that each integer column takes
one msgpack width for the whole run (the smallest that holds all its values): any msgpack
decoder reads the same records back.
"""

from __future__ import annotations

import struct
from typing import Iterator, Sequence, overload

import msgpack

from .records import OFFSET_COMMIT_KEY_TYPE, OFFSET_COMMIT_VALUE_VERSION, OffsetCommitKey, OffsetCommitValue, Record

_new = tuple.__new__
_KEY_HEAD = bytes([0x95, OFFSET_COMMIT_KEY_TYPE])  # a 5-element array: key type, group, topic, partition, value
_VALUE_HEAD = bytes([0x96, OFFSET_COMMIT_VALUE_VERSION])  # a 6-element array: version, offset, epoch, ...
_structs: dict[tuple[int, str, str, str, int], struct.Struct] = {}


def _packed(value: object) -> bytes:
    return msgpack.packb(value, use_bin_type=True)


def _width(column: Sequence[int]) -> tuple[str, bytes]:
    """The struct format and msgpack tag of one integer width that holds every value of `column`."""
    lo, hi = min(column), max(column)
    if lo >= -32 and hi < 0x80:
        return "b", b""  # a fixint: the value is its own byte
    if lo >= -(2**31) and hi < 2**31:
        return "i", b"\xd2"
    return "q", b"\xd3"


class OffsetCommitRun(Sequence[Record]):
    """One group's offset commits sharing a commit and an expire timestamp, by column; a Sequence of Records.

    The columns are parallel tuples, one entry per record, with values the log's columns hold (a str
    topic and metadata; a partition, offset and leader epoch that fit Kafka's int32 and int64 fields).
    """

    __slots__ = ("commit_timestamp", "epochs", "expire_timestamp", "group_id", "metadata", "offsets",
                 "partitions", "topics")

    def __init__(self, group_id: str, topics: Sequence[str], partitions: Sequence[int], offsets: Sequence[int],
                 epochs: Sequence[int], metadata: Sequence[str], commit_timestamp: int,
                 expire_timestamp: int = -1) -> None:
        if not len(topics) == len(partitions) == len(offsets) == len(epochs) == len(metadata):
            raise ValueError("the columns of an OffsetCommitRun differ in length")
        self.group_id = group_id
        self.topics, self.partitions, self.offsets = topics, partitions, offsets
        self.epochs, self.metadata = epochs, metadata
        self.commit_timestamp, self.expire_timestamp = commit_timestamp, expire_timestamp

    def __reduce__(self) -> tuple:
        return OffsetCommitRun, (self.group_id, self.topics, self.partitions, self.offsets, self.epochs,
                                 self.metadata, self.commit_timestamp, self.expire_timestamp)

    def __len__(self) -> int:
        return len(self.partitions)

    @overload
    def __getitem__(self, i: int) -> Record: ...

    @overload
    def __getitem__(self, i: slice) -> list[Record]: ...

    def __getitem__(self, i: int | slice) -> Record | list[Record]:
        if isinstance(i, slice):
            return list(self)[i]
        return _new(Record, (_new(OffsetCommitKey, (self.group_id, self.topics[i], self.partitions[i])),
                             _new(OffsetCommitValue, (self.offsets[i], self.epochs[i], self.metadata[i],
                                                      self.commit_timestamp, self.expire_timestamp))))

    def __iter__(self) -> Iterator[Record]:
        group, committed, expire = self.group_id, self.commit_timestamp, self.expire_timestamp
        new = _new
        for topic, partition, offset, epoch, metadata in zip(self.topics, self.partitions, self.offsets,
                                                             self.epochs, self.metadata, strict=True):
            yield new(Record, (new(OffsetCommitKey, (group, topic, partition)),
                               new(OffsetCommitValue, (offset, epoch, metadata, committed, expire))))

    def __eq__(self, other: object) -> bool:
        if isinstance(other, OffsetCommitRun | list | tuple):
            return len(self) == len(other) and all(a == b for a, b in zip(self, other, strict=True))
        return NotImplemented

    __hash__ = None  # type: ignore[assignment]

    def __repr__(self) -> str:
        return f"OffsetCommitRun({self.group_id!r}, {len(self)} records)"

    def encode(self) -> bytes:
        """The run's records packed back to back, as encode_batch packs a batch (a log entry's payload)."""
        if not self.partitions:
            return b""
        p_format, p_tag = _width(self.partitions)
        o_format, o_tag = _width(self.offsets)
        e_format, e_tag = _width(self.epochs)
        group = _packed(self.group_id)
        tail = _packed(self.commit_timestamp) + _packed(self.expire_timestamp)
        heads = {topic: _KEY_HEAD + group + _packed(topic) + p_tag for topic in set(self.topics)}
        rests = {m: _packed(m) + tail for m in set(self.metadata)}
        middle = _VALUE_HEAD + o_tag
        if len(heads) == 1 and len(rests) == 1:  # the usual commit: one topic, one metadata (often "")
            (head,), (rest,) = heads.values(), rests.values()
            pack = self._struct(len(head), p_format, o_format, e_format, len(rest)).pack
            return b"".join([pack(head, p, middle, o, e_tag, e, rest)
                             for p, o, e in zip(self.partitions, self.offsets, self.epochs, strict=True)])
        pack = self._struct(0, p_format, o_format, e_format, 0).pack
        parts: list[bytes] = []
        extend = parts.extend
        columns = (self.topics, self.partitions, self.offsets, self.epochs, self.metadata)
        for topic, p, o, e, m in zip(*columns, strict=True):
            extend((heads[topic], pack(b"", p, middle, o, e_tag, e, b""), rests[m]))
        return b"".join(parts)

    @staticmethod
    def _struct(head: int, p_format: str, o_format: str, e_format: str, rest: int) -> struct.Struct:
        """The layout of one record: its key's head, partition, the value's head, offset, epoch and the rest."""
        key = (head, p_format, o_format, e_format, rest)
        layout = _structs.get(key)
        if layout is None:
            # The middle is the value head and the offset's tag: 2 bytes, plus 1 for a tagged offset;
            # the epoch's tag is 0 or 1 byte.
            middle = 2 if o_format == "b" else 3
            epoch_tag = 0 if e_format == "b" else 1
            if len(_structs) >= 4096:  # heads and rests come in as many lengths as names and metadata
                _structs.clear()
            layout = _structs[key] = struct.Struct(
                f">{head}s{p_format}{middle}s{o_format}{epoch_tag}s{e_format}{rest}s")
        return layout
