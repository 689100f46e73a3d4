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
from groupcoord.storage.kernels import kernels
from groupcoord.storage.scan_layout import COMMIT as _COMMIT
from groupcoord.storage.scan_layout import GROUP as _GROUP

from .rows import add_group_row, records_to_tables
from .schema import COMMITS_SCHEMA, GROUPS_SCHEMA

log = logging.getLogger(__name__)

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
    ends = np.frombuffer(block.payload_ends, np.int64)
    bad = kernels().parse_records(buf, ends, counts, kind, spans, ints, False) if n else -1
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
