"""A compiled (numba) scan of msgpack-encoded log records, shared by replay and the analytics' columnar decoder.

storage.columnar.read_entries hands over many entries' payloads back to back; `parse_records`
walks them once and writes each offset commit's fields into NumPy columns (strings as start/length
spans into the buffer), without a Python object per record. Other records are only delimited
(kind and span), for the caller to decode the ordinary way. No pyarrow, no Python objects: the
analytics (groupcoord.spark.columnar) build Arrow tables from these columns, a restarting shard
its column store (storage.bulk_replay).
"""

from __future__ import annotations

import numpy as np
from numba import njit

from .scan_layout import COMMIT, GROUP, OTHER


@njit(cache=True, inline="always")
def _uint(buf, pos, size):
    value = 0
    for k in range(size):
        value = (value << 8) | buf[pos + k]
    return value


@njit(cache=True, inline="always")
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


@njit(cache=True, inline="always")
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


@njit(cache=True, inline="always")
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
def parse_records(buf, payload_ends, counts, kind, spans, ints, others):
    """Fill kind, spans (record, group, topic, metadata: start/length) and ints per record; -1 or a bad record.

    A record that is neither an offset commit nor group metadata is OTHER if `others`, else bad.
    """
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
            if (k == COMMIT or k == 0) and items == 5:
                kind[r] = COMMIT
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
            elif k == GROUP:
                kind[r] = GROUP
                p = _skip(buf, spans[0, r], end)
                if p < 0:
                    return r
            elif others and k > GROUP:
                kind[r] = OTHER
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
