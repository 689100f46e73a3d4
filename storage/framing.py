"""The on-disk entry format of a segment, and a scanner that walks and checks a segment's entries.

An entry is the batch of records of one append, framed once (all integers little-endian):

    offset size field
    0      4    payload_length   bytes of payload after the header
    4      4    payload_crc      CRC-32 (zlib) of the payload
    8      1    magic            entry format version, 1
    9      1    attributes       reserved, 0
    10     8    base_offset      offset of the first record; records are numbered from 0
    18     4    record_count     records in the payload; 0 marks an extent marker (see below)
    22     8    timestamp_ms     when the batch was appended (ms since the epoch)
    30     4    header_crc       CRC-32 (zlib) of bytes 0..30 of the header
    34     -    payload          `encode_batch(records)`: msgpack records back to back

The header has its own checksum so that a flipped bit in a length can never make the middle of
a log look like a half-written tail (which recovery would cut off). zlib's CRC-32 is used because
it is in the standard library and runs at several GB/s here; it detects every burst error up to
32 bits, which is what a torn or rotten sector looks like (Kafka uses CRC-32C for the same job;
Python has no fast CRC-32C built in).

An entry with record_count 0 and an empty payload is an extent marker: compaction ends every
segment it writes with one whose base_offset is the offset just after the range the segment
covers, so the segment still knows its extent when compaction dropped its last records.
"""

from __future__ import annotations

import logging
import os
import struct
import zlib
from dataclasses import dataclass
from typing import BinaryIO, Iterator

import msgpack

from groupcoord.protocol.records import Record, RecordFormatError, records_from_objs
from groupcoord.protocol.shard.log import RecordBatchTooLarge

from .errors import CorruptLogError

log = logging.getLogger(__name__)

HEADER = struct.Struct("<IIBBQIqI")
HEADER_SIZE = HEADER.size  # 34
_CRC_COVERED = HEADER_SIZE - 4
_PREFIX = struct.Struct("<IIBBQIq")
MAGIC = 1
MAX_PAYLOAD_BYTES = 256 * 1024 * 1024
DEFAULT_CHUNK_BYTES = 4 * 1024 * 1024


def entry_header(
    base_offset: int, record_count: int, timestamp_ms: int, payload: bytes, payload_crc: int | None = None
) -> bytes:
    """The 34-byte header of an entry holding `payload` (record_count records from base_offset)."""
    if len(payload) > MAX_PAYLOAD_BYTES:
        raise RecordBatchTooLarge(f"batch of {len(payload)} bytes exceeds the limit of {MAX_PAYLOAD_BYTES} bytes")
    if payload_crc is None:
        payload_crc = zlib.crc32(payload)
    prefix = _PREFIX.pack(len(payload), payload_crc, MAGIC, 0, base_offset, record_count, timestamp_ms)
    return prefix + zlib.crc32(prefix).to_bytes(4, "little")


def frame_entry(base_offset: int, record_count: int, timestamp_ms: int, payload: bytes) -> bytes:
    """A whole entry (header and payload) as bytes."""
    return entry_header(base_offset, record_count, timestamp_ms, payload) + payload


def marker_entry(end_offset: int, timestamp_ms: int) -> bytes:
    """An extent marker: the segment holding it covers offsets up to (not including) end_offset."""
    return frame_entry(end_offset, 0, timestamp_ms, b"")


@dataclass(slots=True, eq=False)
class Entry:
    """One checked entry of a segment; `payload` and `raw` are views of the scanner's read buffer, which it never
    writes again (it reads into a new one), so they stay valid for as long as they are held."""

    position: int
    base_offset: int
    record_count: int
    timestamp_ms: int
    payload: memoryview
    raw: memoryview

    @property
    def next_offset(self) -> int:
        """The offset just after this entry's records."""
        return self.base_offset + self.record_count

    @property
    def size(self) -> int:
        """Bytes of the entry on disk, header included."""
        return len(self.raw)


class EntryScanner:
    """Walks the entries of a segment file from `start` to `limit`, checking every checksum.

    Iterate it to get `Entry` objects. A problem raises CorruptLogError naming file and byte
    position, except a torn tail when `allow_torn_tail` is set: then iteration just ends and
    `torn_reason` says why. A torn tail is the end of the data being an incomplete header or
    entry, a last entry whose header or payload checksum fails (ending exactly at the end, or
    followed only by zero bytes: a torn write where the size grew), or a run of zero bytes to the
    end (a file extended but never written, as some file systems leave after a power loss).
    Damage anywhere else is corruption. Afterwards
    `end` is the byte position after the last good entry and `next_offset` the offset after its
    records (None when there was none).
    """

    def __init__(
        self,
        file: BinaryIO,
        path: str | os.PathLike[str],
        limit: int,
        *,
        start: int = 0,
        min_offset: int = 0,
        allow_torn_tail: bool = False,
        chunk_bytes: int = DEFAULT_CHUNK_BYTES,
    ) -> None:
        self.file = file
        self.path = os.fspath(path)
        self.limit = limit
        self.start = start
        self.min_offset = min_offset
        self.allow_torn_tail = allow_torn_tail
        self.chunk_bytes = chunk_bytes
        self.end = start
        self.next_offset: int | None = None
        self.torn_reason: str | None = None
        self.entries = 0

    def _torn(self, position: int, reason: str) -> None:
        if not self.allow_torn_tail:
            raise CorruptLogError(self.path, position, reason)
        self.torn_reason = reason

    def _zeros_to_end(self, position: int) -> bool:
        self.file.seek(position)
        remaining = self.limit - position
        while remaining > 0:
            chunk = self.file.read(min(remaining, self.chunk_bytes))
            if not chunk:
                break
            if chunk.count(0) != len(chunk):
                return False
            remaining -= len(chunk)
        return True

    def __iter__(self) -> Iterator[Entry]:
        f = self.file
        pos = self.start
        limit = self.limit
        expected = self.min_offset
        f.seek(pos)
        buf = b""
        view = memoryview(buf)
        bstart = pos  # file position of buf[0]
        eof = False  # the file ended before `limit`
        unpack = HEADER.unpack_from
        crc32 = zlib.crc32
        while True:
            data_end = bstart + len(buf)
            available = data_end - pos
            need = HEADER_SIZE
            if available >= HEADER_SIZE:
                i = pos - bstart
                plen, pcrc, magic, _attrs, base, count, ts, hcrc = unpack(buf, i)
                if crc32(view[i : i + _CRC_COVERED]) != hcrc:
                    if self._zeros_to_end(pos):
                        self._torn(pos, f"zero-filled tail of {limit - pos} bytes")
                    elif self._zeros_to_end(pos + HEADER_SIZE):
                        self._torn(pos, "torn entry header before a zero-filled tail")
                    else:
                        raise CorruptLogError(self.path, pos, "entry header checksum mismatch")
                    break
                if magic != MAGIC:
                    raise CorruptLogError(self.path, pos, f"unsupported entry format version {magic}")
                need = HEADER_SIZE + plen
            if available < need and not eof and data_end < limit:
                more = f.read(min(max(need - available, self.chunk_bytes), limit - data_end))
                eof = len(more) == 0
                buf = buf[pos - bstart :] + more
                bstart = pos
                view = memoryview(buf)
                continue
            if available == 0:
                break
            if available < need:
                what = "entry header" if need == HEADER_SIZE else "entry"
                self._torn(pos, f"incomplete {what} ({available} of {need} bytes)")
                break
            payload = view[i + HEADER_SIZE : i + need]
            if crc32(payload) != pcrc:
                if available == need:
                    self._torn(pos, "payload checksum mismatch in the last entry")
                elif self._zeros_to_end(pos + need):
                    self._torn(pos, "payload checksum mismatch in the last entry before a zero-filled tail")
                else:
                    raise CorruptLogError(self.path, pos, "entry payload checksum mismatch")
                break
            if base < expected:
                raise CorruptLogError(
                    self.path, pos, f"entry base offset {base} is below the expected offset {expected}"
                )
            if count == 0 and plen != 0:
                raise CorruptLogError(self.path, pos, "entry without records has a payload")
            expected = base + count
            self.next_offset = expected
            self.entries += 1
            yield Entry(pos, base, count, ts, payload, view[i : i + need])
            pos += need
            self.end = pos


class BatchDecoder:
    """Decodes entry payloads into records with one streaming msgpack unpacker."""

    def __init__(self, path: str | os.PathLike[str]) -> None:
        self.path = os.fspath(path)
        self._unpacker = msgpack.Unpacker(raw=False, use_list=True, max_buffer_size=MAX_PAYLOAD_BYTES)
        self._fed = 0

    def decode(self, entry: Entry) -> list[Record]:
        """The records of `entry`; raises CorruptLogError if they do not match its header."""
        unpacker = self._unpacker
        unpacker.feed(entry.payload)
        self._fed += len(entry.payload)
        try:
            records = records_from_objs(unpacker)
        except (RecordFormatError, ValueError, msgpack.FormatError, msgpack.StackError) as e:
            self._reset()
            raise CorruptLogError(self.path, entry.position, f"undecodable records: {e}") from e
        if len(records) != entry.record_count or unpacker.tell() != self._fed:
            self._reset()
            raise CorruptLogError(
                self.path,
                entry.position,
                f"payload holds {len(records)} whole records, header says {entry.record_count}",
            )
        return records

    def boundaries(self, entry: Entry) -> list[int]:
        """End positions (within the payload) of each record of `entry`, without decoding them."""
        unpacker = msgpack.Unpacker(raw=False, max_buffer_size=MAX_PAYLOAD_BYTES)
        unpacker.feed(entry.payload)
        ends = []
        try:
            for _ in range(entry.record_count):
                unpacker.skip()
                ends.append(unpacker.tell())
        except (msgpack.OutOfData, ValueError, msgpack.FormatError, msgpack.StackError) as e:
            raise CorruptLogError(self.path, entry.position, f"unreadable records: {e}") from e
        if ends and ends[-1] != len(entry.payload):
            raise CorruptLogError(self.path, entry.position, "payload has bytes after its last record")
        return ends

    def _reset(self) -> None:
        self._unpacker = msgpack.Unpacker(raw=False, use_list=True, max_buffer_size=MAX_PAYLOAD_BYTES)
        self._fed = 0
