"""Decode a block of log entries into Arrow tables column by column, without a Python object per record.

storage.columnar.read_entries hands over the entries' msgpack payloads back to back. A compiled
pass (numba) walks them once and writes each offset commit's fields straight into NumPy columns,
strings as (start, length) spans into the buffer that a second pass copies into Arrow's string
layout. Offset commits, almost every record of a log, never become Python objects; the few group
metadata records are decoded the ordinary way (their nested members). A block the fast pass does
not understand (a record version it does not know) is decoded record by record instead, so the
result never depends on which path ran.
"""

from __future__ import annotations

import logging

import msgpack
import numpy as np
import pyarrow as pa
from numba import njit

from groupcoord.protocol.records import GroupMetadataKey, records_from_objs
from groupcoord.storage.columnar import EntryBlock

from .rows import add_group_row, records_to_tables
from .schema import COMMITS_SCHEMA, GROUPS_SCHEMA

log = logging.getLogger(__name__)

_COMMIT, _GROUP = 1, 2


@njit(cache=True)
def _uint(buf, pos, size):
    value = 0
    for k in range(size):
        value = (value << 8) | buf[pos + k]
    return value


@njit(cache=True)
def _int(buf, pos):
    """(value, next position, ok) of the msgpack integer at pos."""
    b = buf[pos]
    if b <= 0x7F:
        return np.int64(b), pos + 1, True
    if b >= 0xE0:
        return np.int64(b) - 256, pos + 1, True
    if 0xCC <= b <= 0xCF:
        size = 1 << (b - 0xCC)
        value = _uint(buf, pos + 1, size)
        return np.int64(value), pos + 1 + size, not (size == 8 and buf[pos + 1] >= 0x80)
    if 0xD0 <= b <= 0xD3:
        size = 1 << (b - 0xD0)
        value = np.int64(_uint(buf, pos + 1, size))
        if size < 8 and value >= (np.int64(1) << (8 * size - 1)):
            value -= np.int64(1) << (8 * size)
        return value, pos + 1 + size, True
    return np.int64(0), pos, False


@njit(cache=True)
def _str(buf, pos):
    """(start, length, next position, ok) of the msgpack string at pos; length -1 for nil."""
    b = buf[pos]
    if 0xA0 <= b <= 0xBF:
        n = b - 0xA0
        return pos + 1, n, pos + 1 + n, True
    if 0xD9 <= b <= 0xDB:
        size = 1 << (b - 0xD9)
        n = _uint(buf, pos + 1, size)
        return pos + 1 + size, n, pos + 1 + size + n, True
    if b == 0xC0:
        return pos, -1, pos + 1, True
    return pos, 0, pos, False


@njit(cache=True)
def _array(buf, pos):
    """(items, next position, ok) of the msgpack array header at pos."""
    b = buf[pos]
    if 0x90 <= b <= 0x9F:
        return b - 0x90, pos + 1, True
    if b == 0xDC:
        return _uint(buf, pos + 1, 2), pos + 3, True
    if b == 0xDD:
        return _uint(buf, pos + 1, 4), pos + 5, True
    return 0, pos, False


@njit(cache=True)
def _skip(buf, pos, end):
    """The position after the msgpack object at pos, or -1 if it is malformed."""
    pending = 1
    while pending > 0:
        if pos >= end:
            return -1
        pending -= 1
        b = buf[pos]
        if b <= 0x7F or b >= 0xE0 or b == 0xC0 or b == 0xC2 or b == 0xC3:
            pos += 1
        elif 0x80 <= b <= 0x8F:
            pending += 2 * (b - 0x80)
            pos += 1
        elif 0x90 <= b <= 0x9F:
            pending += b - 0x90
            pos += 1
        elif 0xA0 <= b <= 0xBF:
            pos += 1 + b - 0xA0
        elif b == 0xC4 or b == 0xD9:
            pos += 2 + buf[pos + 1]
        elif b == 0xC5 or b == 0xDA:
            pos += 3 + _uint(buf, pos + 1, 2)
        elif b == 0xC6 or b == 0xDB:
            pos += 5 + _uint(buf, pos + 1, 4)
        elif b == 0xCA:
            pos += 5
        elif b == 0xCB:
            pos += 9
        elif 0xCC <= b <= 0xCF:
            pos += 1 + (1 << (b - 0xCC))
        elif 0xD0 <= b <= 0xD3:
            pos += 1 + (1 << (b - 0xD0))
        elif 0xD4 <= b <= 0xD8:
            pos += 2 + (1 << (b - 0xD4))
        elif b == 0xC7:
            pos += 3 + buf[pos + 1]
        elif b == 0xC8:
            pos += 4 + _uint(buf, pos + 1, 2)
        elif b == 0xC9:
            pos += 6 + _uint(buf, pos + 1, 4)
        elif b == 0xDC:
            pending += _uint(buf, pos + 1, 2)
            pos += 3
        elif b == 0xDD:
            pending += _uint(buf, pos + 1, 4)
            pos += 5
        elif b == 0xDE:
            pending += 2 * _uint(buf, pos + 1, 2)
            pos += 3
        elif b == 0xDF:
            pending += 2 * _uint(buf, pos + 1, 4)
            pos += 5
        else:
            return -1
    return pos if pos <= end else -1


@njit(cache=True)
def _parse(buf, payload_ends, counts, kind, spans, ints):
    """Fill kind, spans (record, group, topic, metadata: start/length) and ints per record; -1 or a bad record."""
    r = 0
    pos = 0
    for e in range(len(counts)):
        end = payload_ends[e]
        for _ in range(counts[e]):
            spans[0, r] = pos
            items, p, ok = _array(buf, pos)
            if not ok or p >= end:
                return r
            k, p, ok = _int(buf, p)
            if not ok:
                return r
            if (k == _COMMIT or k == 0) and items == 5:
                kind[r] = _COMMIT
                spans[2, r], spans[3, r], p, ok1 = _str(buf, p)
                spans[4, r], spans[5, r], p, ok2 = _str(buf, p)
                ints[0, r], p, ok3 = _int(buf, p)
                if not (ok1 and ok2 and ok3) or spans[3, r] < 0 or spans[5, r] < 0:
                    return r
                if buf[p] == 0xC0:
                    ints[5, r] = 1
                    p += 1
                else:
                    fields, p, ok = _array(buf, p)
                    version, p, ok4 = _int(buf, p)
                    if not (ok and ok4) or fields < 6 or version != 0:
                        return r
                    ints[1, r], p, ok1 = _int(buf, p)
                    ints[2, r], p, ok2 = _int(buf, p)
                    spans[6, r], spans[7, r], p, ok3 = _str(buf, p)
                    ints[3, r], p, ok4 = _int(buf, p)
                    ints[4, r], p, ok5 = _int(buf, p)
                    if not (ok1 and ok2 and ok3 and ok4 and ok5):
                        return r
                    for _ in range(fields - 6):
                        p = _skip(buf, p, end)
                        if p < 0:
                            return r
                    ints[5, r] = 0
            elif k == _GROUP:
                kind[r] = _GROUP
                p = _skip(buf, spans[0, r], end)
                if p < 0:
                    return r
            else:
                return r
            spans[1, r] = p - spans[0, r]
            pos = p
            r += 1
        if pos != end:
            return r - 1 if r else 0
    return -1


@njit(cache=True)
def _gather(buf, starts, lengths, offsets, out):
    """Copy the spans (length -1: null, copied as empty) into out back to back, offsets as Arrow's."""
    at = 0
    for i in range(len(starts)):
        offsets[i] = at
        n = lengths[i]
        if n > 0:
            out[at : at + n] = buf[starts[i] : starts[i] + n]
            at += n
    offsets[len(starts)] = at


def _strings(buf: np.ndarray, starts: np.ndarray, lengths: np.ndarray) -> pa.Array:
    total = int(lengths[lengths > 0].sum())
    offsets = np.empty(len(starts) + 1, np.int32 if total < 2**31 else np.int64)
    data = np.empty(total, np.uint8)
    _gather(buf, starts, lengths, offsets, data)
    null = lengths < 0
    nulls = int(null.sum())
    validity = pa.py_buffer(np.packbits(~null, bitorder="little")) if nulls else None
    kind = pa.string() if offsets.dtype == np.int32 else pa.large_string()
    arr = pa.Array.from_buffers(kind, len(starts), [validity, pa.py_buffer(offsets), pa.py_buffer(data)], nulls)
    return arr if kind == pa.string() else arr.cast(pa.string())


def _outside_int32(values: np.ndarray) -> bool:
    return bool(values.min() < -(2**31) or values.max() >= 2**31)


def decode_block(block: EntryBlock, log_partition: int) -> tuple[pa.Table, pa.Table]:
    """The offset commits and group-metadata records of `block` as COMMITS_SCHEMA and GROUPS_SCHEMA tables."""
    counts = np.frombuffer(block.record_counts, np.int64)
    n = int(counts.sum())
    buf = np.frombuffer(block.payload, np.uint8)
    kind = np.zeros(n, np.int8)
    spans = np.zeros((8, n), np.int64)
    ints = np.zeros((6, n), np.int64)
    bad = _parse(buf, np.frombuffer(block.payload_ends, np.int64), counts, kind, spans, ints) if n else -1
    if bad >= 0:
        log.warning("log partition %d: record %d of a block is not in the layout the columnar decoder knows; "
                    "decoding the block record by record", log_partition, bad)
        return _decode_slowly(block, log_partition)
    if n and _outside_int32(ints[0]) | _outside_int32(ints[2]):
        return _decode_slowly(block, log_partition)  # which says which value does not fit
    bases = np.frombuffer(block.base_offsets, np.int64)
    first_index = np.cumsum(counts) - counts
    log_offsets = np.repeat(bases - first_index, counts) + np.arange(n, dtype=np.int64)
    log_times = np.repeat(np.frombuffer(block.timestamps, np.int64), counts)
    c = kind == _COMMIT
    m = int(c.sum())
    if m == n:  # only offset commits, as in most blocks: no copies
        sp, it, offs, times = spans, ints, log_offsets, log_times
    else:
        sp, it, offs, times = spans[:, c], ints[:, c], log_offsets[c], log_times[c]
    tomb = it[5] == 1
    meta_len = np.where(tomb, -1, sp[7])
    commits = pa.Table.from_arrays(
        [
            _strings(buf, sp[2], sp[3]),
            _strings(buf, sp[4], sp[5]),
            pa.array(it[0].astype(np.int32)),
            pa.array(it[1], mask=tomb),
            pa.array(it[2].astype(np.int32), mask=tomb),
            _strings(buf, sp[6], meta_len),
            pa.array(it[3], mask=tomb),
            pa.array(it[4], mask=tomb),
            pa.array(tomb),
            pa.array(np.full(m, log_partition, np.int32)),
            pa.array(offs),
            pa.array(times),
        ],
        schema=COMMITS_SCHEMA,
    )
    g = kind == _GROUP
    groups = _group_rows(block.payload, spans[:2, g], log_offsets[g], log_times[g], log_partition)
    return commits, groups


def _group_rows(payload: bytes, spans: np.ndarray, offsets: np.ndarray, times: np.ndarray,
                log_partition: int) -> pa.Table:
    rows: dict[str, list] = {name: [] for name in GROUPS_SCHEMA.names}
    view = memoryview(payload)
    for start, length, offset, ts in zip(*spans.tolist(), offsets.tolist(), times.tolist(), strict=True):
        (record,) = records_from_objs([msgpack.unpackb(view[start : start + length], raw=False)])
        if type(record.key) is GroupMetadataKey:
            add_group_row(rows, record.key, record.value, log_partition, offset, ts)
    return pa.Table.from_pydict(rows, schema=GROUPS_SCHEMA)


def _decode_slowly(block: EntryBlock, log_partition: int) -> tuple[pa.Table, pa.Table]:
    def records():
        start = 0
        unpacker = msgpack.Unpacker(raw=False)
        for base, count, ts, end in zip(block.base_offsets, block.record_counts, block.timestamps,
                                        block.payload_ends, strict=True):
            unpacker.feed(block.payload[start:end])
            start = end
            for i, record in enumerate(records_from_objs(unpacker.unpack() for _ in range(count))):
                yield base + i, ts, record

    return records_to_tables(records(), log_partition)
