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
from llvmlite import ir
from numba import njit, types
from numba.extending import intrinsic

from .scan_layout import COMMIT, GROUP, OTHER


@intrinsic
def borrowed(typingctx, arr):
    """The same array, without the reference count: for a kernel to hand its input to the helpers it calls per
    field. Each array a helper takes is counted in and out (two atomic operations, some 5 ns); with a dozen calls
    a record that was most of the scan's time. The kernel's caller keeps the array alive for the call."""

    def codegen(context, builder, signature, args):
        view = context.make_array(arr)(context, builder, value=args[0])
        view.meminfo = context.get_constant_null(types.MemInfoPointer(arr.dtype))
        view.parent = context.get_constant_null(types.pyobject)
        return view._getvalue()

    return arr(arr), codegen


@intrinsic
def word_at(typingctx, arr, pos):
    """The 8 bytes of a uint8 array from `pos` on as one native-order integer: a single unaligned load, for
    comparing bytes eight at a time. The caller keeps pos + 8 within the array."""

    def codegen(context, builder, signature, args):
        view = context.make_array(signature.args[0])(context, builder, value=args[0])
        at = context.cast(builder, args[1], signature.args[1], types.intp)
        word = builder.bitcast(builder.gep(view.data, [at]), ir.IntType(64).as_pointer())
        return builder.load(word, align=1)

    return types.uint64(arr, pos), codegen


@njit(cache=True, inline="always")
def _uint(buf, pos, size):
    """The big-endian unsigned integer of `size` bytes (1, 2, 4 or 8) at pos, read without a loop."""
    if size == 1:
        return np.int64(buf[pos])
    if size == 2:
        return (np.int64(buf[pos]) << 8) | np.int64(buf[pos + 1])
    value = ((np.int64(buf[pos]) << 24) | (np.int64(buf[pos + 1]) << 16) | (np.int64(buf[pos + 2]) << 8)
             | np.int64(buf[pos + 3]))
    if size == 4:
        return value
    return ((value << 32) | (np.int64(buf[pos + 4]) << 24) | (np.int64(buf[pos + 5]) << 16)
            | (np.int64(buf[pos + 6]) << 8) | np.int64(buf[pos + 7]))


@njit(cache=True, inline="always")
def _int(buf, pos):
    """(value, next position, ok) of the msgpack integer at pos."""
    b = np.int64(buf[pos])
    if b <= 0x7F:
        return b, pos + 1, True
    if b >= 0xE0:
        return b - 256, pos + 1, True
    if 0xCC <= b <= 0xCF:
        size = np.int64(1) << (b - 0xCC)
        return _uint(buf, pos + 1, size), pos + 1 + size, not (size == 8 and buf[pos + 1] >= 0x80)
    if 0xD0 <= b <= 0xD3:
        size = np.int64(1) << (b - 0xD0)
        value = _uint(buf, pos + 1, size)
        if size < 8 and value >= (np.int64(1) << (8 * size - 1)):
            value -= np.int64(1) << (8 * size)
        return value, pos + 1 + size, True
    return np.int64(0), pos, False


@njit(cache=True, inline="always")
def _str(buf, pos):
    """(start, length, next position, ok) of the msgpack string at pos; length -1 for nil."""
    b = np.int64(buf[pos])
    if 0xA0 <= b <= 0xBF:
        return pos + 1, b - 0xA0, pos + 1 + b - 0xA0, True
    if 0xD9 <= b <= 0xDB:
        size = np.int64(1) << (b - 0xD9)
        n = _uint(buf, pos + 1, size)
        return pos + 1 + size, n, pos + 1 + size + n, True
    if b == 0xC0:
        return pos, np.int64(-1), pos + 1, True
    return pos, np.int64(0), pos, False


@njit(cache=True, inline="always")
def _array(buf, pos):
    """(items, next position, ok) of the msgpack array header at pos."""
    b = np.int64(buf[pos])
    if 0x90 <= b <= 0x9F:
        return b - 0x90, pos + 1, True
    if b == 0xDC:
        return _uint(buf, pos + 1, 2), pos + 3, True
    if b == 0xDD:
        return _uint(buf, pos + 1, 4), pos + 5, True
    return np.int64(0), pos, False


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
    buf = borrowed(buf)  # type: ignore[call-arg]  # numba's typing context is the intrinsic's first argument
    # One 1-d view per row of the columns, so that each store is a single index (see scan_layout for the rows).
    rec_start, rec_len, group_start, group_len = spans[0], spans[1], spans[2], spans[3]
    topic_start, topic_len, meta_start, meta_len = spans[4], spans[5], spans[6], spans[7]
    partition, offset, epoch, commit_ts, expire_ts, tombstone = ints[0], ints[1], ints[2], ints[3], ints[4], ints[5]
    r = 0
    pos = 0
    for e in range(len(counts)):
        end = payload_ends[e]
        for _ in range(counts[e]):
            start = pos
            items, p, ok = _array(buf, pos)
            if not ok or p >= end:
                return r
            k, p, ok = _int(buf, p)
            if not ok:
                return r
            if (k == COMMIT or k == 0) and items == 5:
                kind[r] = COMMIT
                gs, gl, p, ok1 = _str(buf, p)
                ts, tl, p, ok2 = _str(buf, p)
                part, p, ok3 = _int(buf, p)
                if not (ok1 and ok2 and ok3) or gl < 0 or tl < 0:
                    return r
                group_start[r], group_len[r], topic_start[r], topic_len[r], partition[r] = gs, gl, ts, tl, part
                if buf[p] == 0xC0:
                    tombstone[r] = 1
                    p += 1
                else:
                    fields, p, ok = _array(buf, p)
                    version, p, ok4 = _int(buf, p)
                    if not (ok and ok4) or fields < 6 or version != 0:
                        return r
                    o, p, ok1 = _int(buf, p)
                    ep, p, ok2 = _int(buf, p)
                    ms, ml, p, ok3 = _str(buf, p)
                    ct, p, ok4 = _int(buf, p)
                    et, p, ok5 = _int(buf, p)
                    if not (ok1 and ok2 and ok3 and ok4 and ok5):
                        return r
                    offset[r], epoch[r], meta_start[r], meta_len[r], commit_ts[r], expire_ts[r] = o, ep, ms, ml, ct, et
                    for _ in range(fields - 6):
                        p = _skip(buf, p, end)
                        if p < 0:
                            return r
                    tombstone[r] = 0
            elif k == GROUP:
                kind[r] = GROUP
                p = _skip(buf, start, end)
                if p < 0:
                    return r
            elif others and k > GROUP:
                kind[r] = OTHER
                p = _skip(buf, start, end)
                if p < 0:
                    return r
            else:
                return r
            rec_start[r] = start
            rec_len[r] = p - start
            pos = p
            r += 1
        if pos != end:
            return r - 1 if r else 0
    return -1
