"""The records of an offsets partition's log and their versioned msgpack encoding.

A record is a key and a value; a value of None is a tombstone. Keys carry Kafka's key versions
as their type tag (1: offset commit, 2: group metadata, 3-8: the consumer group records of
consumer/records.py). A record is encoded as one msgpack
array `[key_type, *key_fields, value]`, where value is nil or `[value_version, *value_fields]`,
so a batch is just records packed back to back and a streaming unpacker decodes it.
"""

from __future__ import annotations

import logging
from typing import Any, Iterable, Iterator, NamedTuple, Union

import msgpack

from .consumer.records import CONSUMER_KEY_TYPES, consumer_record_from_obj, consumer_record_obj

log = logging.getLogger(__name__)

OFFSET_COMMIT_KEY_TYPE = 1
GROUP_METADATA_KEY_TYPE = 2
OFFSET_COMMIT_VALUE_VERSION = 0
GROUP_METADATA_VALUE_VERSION = 0

_new = tuple.__new__


class RecordFormatError(ValueError):
    """A stored record cannot be decoded: the log holds bytes this version does not understand."""


class OffsetCommitKey(NamedTuple):
    """Key of a committed offset: one per (group, topic, partition)."""

    group: str
    topic: str
    partition: int


class OffsetCommitValue(NamedTuple):
    """A committed offset as stored; expire_timestamp -1 means no explicit expiry."""

    offset: int
    leader_epoch: int
    metadata: str
    commit_timestamp: int
    expire_timestamp: int = -1


class GroupMetadataKey(NamedTuple):
    """Key of a group's metadata: one per group."""

    group: str


class MemberMetadata(NamedTuple):
    """A member as stored in its group's record (subscription: metadata of the selected protocol)."""

    member_id: str
    group_instance_id: str | None
    client_id: str
    client_host: str
    rebalance_timeout: int
    session_timeout: int
    subscription: bytes
    assignment: bytes


_MEMBER_FIELDS = len(MemberMetadata._fields)


class GroupMetadataValue(NamedTuple):
    """A group's persisted state: generation, protocol, leader and members with assignments."""

    protocol_type: str
    generation: int
    protocol: str | None
    leader: str | None
    current_state_timestamp: int
    members: tuple[MemberMetadata, ...] = ()


RecordKey = Union[OffsetCommitKey, GroupMetadataKey, tuple]  # tuple: a consumer group key (consumer/records.py)
RecordValue = Union[OffsetCommitValue, GroupMetadataValue, tuple, None]


class Record(NamedTuple):
    """One log record; value None is a tombstone for its key."""

    key: RecordKey
    value: RecordValue

    @property
    def is_tombstone(self) -> bool:
        """Whether this record deletes its key."""
        return self.value is None


def record_to_obj(record: Record) -> list:
    """The msgpack-ready form of a record."""
    key: Any
    value: Any
    key, value = record
    if type(key) is OffsetCommitKey:
        v = None if value is None else [OFFSET_COMMIT_VALUE_VERSION, *value]
        return [OFFSET_COMMIT_KEY_TYPE, key.group, key.topic, key.partition, v]
    if type(key) is GroupMetadataKey:
        if value is None:
            v = None
        else:
            v = [
                GROUP_METADATA_VALUE_VERSION,
                value.protocol_type,
                value.generation,
                value.protocol,
                value.leader,
                value.current_state_timestamp,
                [list(m) for m in value.members],
            ]
        return [GROUP_METADATA_KEY_TYPE, key.group, v]
    if type(key) in CONSUMER_KEY_TYPES:
        return consumer_record_obj(key, value)
    raise TypeError(f"not a record key: {key!r}")


def record_from_obj(obj: list) -> Record:
    """Rebuild a record from its unpacked msgpack form; raises RecordFormatError if unknown."""
    try:
        kind = obj[0]
        if kind == OFFSET_COMMIT_KEY_TYPE or kind == 0:
            v = obj[4]
            if v is not None:
                if v[0] != OFFSET_COMMIT_VALUE_VERSION:
                    raise RecordFormatError(f"offset commit value version {v[0]} is not supported")
                if len(v) < 6:
                    raise IndexError("offset commit value has too few fields")
                v = _new(OffsetCommitValue, v[1:6])
            # tuple.__new__ builds the NamedTuples without their Python-level __new__ (replay's hot path).
            return _new(Record, (_new(OffsetCommitKey, obj[1:4]), v))
        if kind == GROUP_METADATA_KEY_TYPE:
            v = obj[2]
            if v is not None:
                if v[0] != GROUP_METADATA_VALUE_VERSION:
                    raise RecordFormatError(f"group metadata value version {v[0]} is not supported")
                # Built with tuple.__new__ (a restart decodes one per group); a member of the wrong arity still fails.
                v = _new(GroupMetadataValue, (v[1], v[2], v[3], v[4], v[5], tuple(
                    _new(MemberMetadata, m) if len(m) == _MEMBER_FIELDS else MemberMetadata(*m) for m in v[6])))
            return _new(Record, (_new(GroupMetadataKey, (obj[1],)), v))
        try:
            consumer = consumer_record_from_obj(obj)
        except ValueError as e:
            raise RecordFormatError(str(e)) from e
        if consumer is not None:
            return Record(*consumer)
    except (IndexError, TypeError) as e:
        raise RecordFormatError(f"malformed record {obj!r}: {e}") from e
    raise RecordFormatError(f"unknown record key type {obj[0]!r}")


def records_from_objs(objs: Iterable[list]) -> list[Record]:
    """Rebuild the records of a batch, as record_from_obj does one by one (replay's hot path)."""
    out: list[Record] = []
    append = out.append
    new = _new
    for obj in objs:
        # The common record, an offset commit with a version-0 value, without a function call.
        if type(obj) is list and len(obj) == 5 and obj[0] == OFFSET_COMMIT_KEY_TYPE:
            v = obj[4]
            if type(v) is list and len(v) == 6 and v[0] == OFFSET_COMMIT_VALUE_VERSION:
                append(new(Record, (new(OffsetCommitKey, obj[1:4]), new(OffsetCommitValue, v[1:]))))
                continue
        append(record_from_obj(obj))
    return out


def encode_record(record: Record) -> bytes:
    """One record as msgpack bytes."""
    return msgpack.packb(record_to_obj(record), use_bin_type=True)


def decode_record(data: bytes) -> Record:
    """The record encoded in `data` by encode_record."""
    return record_from_obj(msgpack.unpackb(data, raw=False, use_list=True))


def encode_batch(records: Iterable[Record]) -> bytes:
    """Records packed back to back: the payload of one log entry."""
    packer = msgpack.Packer(use_bin_type=True, autoreset=False)
    pack = packer.pack
    for r in records:
        key, value = r
        if type(key) is OffsetCommitKey:  # record_to_obj inlined for the common record
            pack([OFFSET_COMMIT_KEY_TYPE, *key, None if value is None else [OFFSET_COMMIT_VALUE_VERSION, *value]])
        else:
            pack(record_to_obj(r))
    return packer.bytes()


def iter_batch(payload: bytes) -> Iterator[Record]:
    """Decode the records of one batch payload, in order."""
    unpacker = msgpack.Unpacker(raw=False, use_list=True, max_buffer_size=max(len(payload), 1))
    unpacker.feed(payload)
    try:
        for obj in unpacker:
            yield record_from_obj(obj)
    except (ValueError, msgpack.ExtraData, msgpack.FormatError, msgpack.StackError) as e:
        if isinstance(e, RecordFormatError):
            raise
        raise RecordFormatError(f"undecodable batch payload: {e}") from e


def decode_batch(payload: bytes) -> list[Record]:
    """All records of one batch payload."""
    return list(iter_batch(payload))
