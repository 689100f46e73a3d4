"""Replay a partition log in bulk: decode its entries by column and build only the offsets still live.

A restarting shard needs, of a log that is mostly offset commits, only the last record of each
offset key. So the log is read in blocks of entries (storage.columnar.read_entries), scanned by
the compiled msgpack pass (storage.msgpack_scan), and a second compiled pass (storage.replay_kernels)
keeps, per (group, topic, partition), the fields of its last record in flat columns. No Python
object is made per record. At the end the live keys stay in shared columns, from which each group's
own (protocol.offsets.columns.GroupOffsets) are copied when the shard first uses the group.

Records of other kinds are decoded the ordinary way and kept in log order, and so is each point
where an offset commit of a group came before the next of them: replay would create that group
there (as a simple group) if it did not exist. The result, a BulkLoad, leaves the shard in the
state a record-by-record replay of the same log leaves it in. Whatever this pass does not
understand (a record layout or version it does not know, bytes that are not UTF-8, offset keys
too sparse for slots by partition, nil metadata) makes
`bulk_load` return None, and the caller replays the log record by record instead, which reports
damage as it always has.
"""

from __future__ import annotations

import logging
import os
from array import array
from dataclasses import dataclass

import msgpack
import numpy as np

from groupcoord.protocol.offsets.columns import DENSE_PARTITIONS, RUN_BITS, BulkLoad, Columns, GroupOffsets
from groupcoord.protocol.records import OffsetCommitValue, Record, records_from_objs

from .columnar import EntryBlock, LogPosition, read_entries
from .errors import CorruptLogError
from .kernels import Kernels, kernels
from .scan_layout import (
    ARENA,
    COMMIT,
    COUNTERS,
    EVENTS,
    FOLDED,
    HASHED,
    INT_TOMBSTONE,
    NAMES,
    NIL_METADATA,
    PAIRS,
    SLOTS,
    SLOTS_PER_RECORD,
    SPAN_METADATA,
    TOO_SPARSE,
)

log = logging.getLogger(__name__)

BLOCK_RECORDS = 65_536  # records per block read and scanned at once (~120 B of scratch columns each, reused)
# At most this many key slots reserved up front (~75 B each, untouched until written); a longer log grows them.
RESERVED_SLOTS_MAX = 1 << 24


class _Unsupported(Exception):
    """The log holds something the bulk pass does not decode: replay it record by record instead."""


def _grown(a: np.ndarray, size: int, fill: int | None = None) -> np.ndarray:
    if fill is None:
        out = np.empty(size, a.dtype)
    elif fill == 0:
        out = np.zeros(size, a.dtype)  # as np.empty, its pages stay untouched until written (np.full writes them all)
    else:
        out = np.full(size, fill, a.dtype)
    out[: len(a)] = a
    return out


class _Keys:
    """The scan's state across blocks: names, pairs and offset-key slots with their last values."""

    def __init__(self, compiled: Kernels, slots: int = 1 << 14) -> None:
        self.kernels = compiled
        self.counts = np.zeros(COUNTERS, np.int64)
        self.arena = np.empty(1 << 16, np.uint8)
        self.name_start, self.name_len = np.empty(1024, np.int64), np.empty(1024, np.int64)
        self.name_hash, self.last_seg = np.empty(1024, np.uint64), np.full(1024, -1, np.int64)
        self.ntab = np.full(2048, -1, np.int64)
        self.pair_key, self.ptab = np.empty(1024, np.int64), np.full(2048, -1, np.int64)
        self.pair_base, self.pair_cap = np.zeros(1024, np.int64), np.zeros(1024, np.int64)
        self.ktab, self.hashed = np.full(1 << 10, -1, np.int64), np.empty(1 << 9, np.int64)
        try:
            self._slot_columns(slots)
        except MemoryError:  # a host that does not overcommit memory: start small, grow block by block
            log.info("no room to reserve %d key slots up front; they grow as the replay goes", slots)
            self._slot_columns(1 << 14)
        self._kind, self._event_codes = np.empty(0, np.int8), np.empty(0, np.int64)
        self._spans, self._ints = np.empty(0, np.int64), np.empty(0, np.int64)
        self.names: list[str] = []
        self.metadata: dict[tuple[int, int], str] = {}  # (block, position) -> a live value's metadata, if not empty
        self.events: list[Record | str] = []
        self.records = 0

    def _slot_columns(self, n: int) -> None:
        """Fresh columns of `n` key slots (untouched pages until a slot is written)."""
        self.slot_pair, self.slot_part = np.empty(n, np.int64), np.empty(n, np.int64)
        self.state = np.zeros(n, np.int8)
        self.offset, self.epoch = np.empty(n, np.int64), np.empty(n, np.int64)
        self.committed, self.expire = np.empty(n, np.int64), np.empty(n, np.int64)
        self.meta_len = np.zeros(n, np.int64)
        self.meta_start, self.meta_block = np.empty(n, np.int64), np.empty(n, np.int64)

    def _grow(self, block_bytes: int) -> None:
        """Double whatever the next record might overflow."""
        c = self.counts
        if 2 * (c[NAMES] + 2) > len(self.ntab) or c[NAMES] + 2 > len(self.name_start):
            size = 2 * len(self.name_start)
            self.name_start, self.name_len = _grown(self.name_start, size), _grown(self.name_len, size)
            self.name_hash, self.last_seg = _grown(self.name_hash, size), _grown(self.last_seg, size, -1)
            self.ntab = np.full(2 * size, -1, np.int64)
            self.kernels.rehash_names(self.ntab, self.name_hash, c[NAMES])
        if c[ARENA] + block_bytes > len(self.arena):
            used = int(c[ARENA])  # the arena's tail was never written: copying it would touch its pages
            self.arena = _grown(self.arena[:used], max(2 * len(self.arena), used + block_bytes))
        if 2 * (c[PAIRS] + 1) > len(self.ptab) or c[PAIRS] + 1 > len(self.pair_key):
            size = 2 * len(self.pair_key)
            self.pair_key = _grown(self.pair_key, size)
            self.pair_base, self.pair_cap = _grown(self.pair_base, size, 0), _grown(self.pair_cap, size, 0)
            self.ptab = np.full(2 * size, -1, np.int64)
            self.kernels.rehash_pairs(self.ptab, self.pair_key, c[PAIRS])
        if 2 * (c[HASHED] + 1) > len(self.ktab):
            self.hashed = _grown(self.hashed, 2 * len(self.hashed))
            self.ktab = np.full(2 * len(self.hashed), -1, np.int64)
            self.kernels.rehash_keys(self.ktab, self.slot_pair, self.slot_part, self.hashed, c[HASHED])
        if c[SLOTS] + DENSE_PARTITIONS + 1 > len(self.state):
            self._reserve(2 * len(self.state))

    def _reserve(self, slots: int) -> None:
        """Room for `slots` slots at once (a block's worth), rather than doubling up to it step by step."""
        if slots > len(self.state):
            size = max(slots, 2 * len(self.state))
            for name in ("slot_pair", "slot_part", "offset", "epoch", "committed", "expire", "meta_start",
                         "meta_block"):
                setattr(self, name, _grown(getattr(self, name), size))
            self.state, self.meta_len = _grown(self.state, size, 0), _grown(self.meta_len, size, 0)

    def _scratch(self, n: int) -> tuple[np.ndarray, np.ndarray, np.ndarray, np.ndarray]:
        """The scan's columns for a block of n records (kind, spans, ints, events): one allocation reused by every
        block, so that each block does not fault in ~100 MB of fresh pages. The scan writes every field it reads."""
        if n > len(self._kind):
            self._kind, self._event_codes = np.empty(n, np.int8), np.empty(n, np.int64)
            self._spans, self._ints = np.empty(8 * n, np.int64), np.empty(6 * n, np.int64)
        return (self._kind[:n], self._spans[: 8 * n].reshape(8, n), self._ints[: 6 * n].reshape(6, n),
                self._event_codes[:n])

    def feed(self, block: EntryBlock, block_no: int) -> None:
        """Fold one block of entries in: the key columns, its other records and its group events."""
        counts = np.frombuffer(block.record_counts, np.int64)
        n = int(counts.sum())
        if n == 0:
            return
        buf = np.frombuffer(block.payload, np.uint8)
        kind, spans, ints, events = self._scratch(n)
        ends = np.frombuffer(block.payload_ends, np.int64)
        bad = self.kernels.parse_records(buf, ends, counts, kind, spans, ints, True)
        if bad >= 0:
            raise _Unsupported(f"record {bad} of a block is not in the layout the bulk scan knows")
        c = self.counts
        c[EVENTS] = 0
        names_before = int(c[NAMES])
        self._reserve(int(c[SLOTS]) + n + DENSE_PARTITIONS + 1)
        r = 0
        while True:
            r = self.kernels.index_records(
                buf, kind, spans, ints, r, n, block_no, c, self.arena, self.name_start, self.name_len, self.name_hash,
                self.ntab, self.last_seg, self.pair_key, self.ptab, self.pair_base, self.pair_cap, self.slot_pair,
                self.slot_part, self.ktab, self.hashed, self.state, self.offset, self.epoch, self.committed,
                self.expire, self.meta_len, self.meta_start, self.meta_block, events)
            if r >= n:
                break
            self._grow(len(block.payload))
        if c[TOO_SPARSE]:
            raise _Unsupported("its offset keys are too sparse for slots by partition")
        if c[NIL_METADATA]:
            raise _Unsupported("an offset commit's metadata is nil, which the column store keeps only as a value")
        c[FOLDED] += n
        self.records += n
        payload = block.payload
        try:
            for i in range(names_before, int(c[NAMES])):
                start = int(self.name_start[i])
                self.names.append(self.arena[start : start + int(self.name_len[i])].tobytes().decode())
            # The metadata this block left as a key's last value, if any of its commits carries some: finding it
            # looks at every slot so far, which a block of empty metadata need not do.
            if np.any((kind == COMMIT) & (ints[INT_TOMBSTONE] == 0) & (spans[SPAN_METADATA + 1] > 0)):
                used = int(c[SLOTS])
                written = np.flatnonzero((self.meta_block[:used] == block_no) & (self.meta_len[:used] > 0)
                                         & (self.state[:used] == 1))
                for start, length in zip(self.meta_start[written].tolist(), self.meta_len[written].tolist(),
                                         strict=True):
                    self.metadata[block_no, start] = payload[start : start + length].decode()
            # The block's other records, decoded together, in log order among the points where a group came up.
            codes = events[: c[EVENTS]].tolist()
            at = [-1 - code for code in codes if code < 0]
            view = memoryview(payload)
            records = iter(records_from_objs([msgpack.unpackb(view[start : start + length], raw=False) for start, length
                                              in zip(spans[0, at].tolist(), spans[1, at].tolist(), strict=True)]))
            names = self.names
            self.events.extend(names[code] if code >= 0 else next(records) for code in codes)
        except (ValueError, TypeError) as e:  # UnicodeDecodeError, RecordFormatError, msgpack's errors
            raise _Unsupported(str(e)) from e

    def offsets(self) -> dict[str, GroupOffsets]:
        """The live offsets (the keys whose last record is a value) as the shard's column store, by group."""
        c = self.counts
        slots, pairs = int(c[SLOTS]), int(c[PAIRS])
        pair_group = self.pair_key[:pairs] >> 32
        pair_topic = self.pair_key[:pairs] & 0xFFFFFFFF
        # Rows in order of (group, topic, partition): the pairs ranked by group then topic, the rows by their pair's
        # rank. The live keys the columns cannot hold (a high partition, an epoch past int32) come after them.
        pair_order = np.lexsort((pair_topic, pair_group))
        rank = np.empty(pairs, np.int64)
        rank[pair_order] = np.arange(pairs)
        rows, found = np.empty(slots, np.int64), np.zeros(2, np.int64)
        self.kernels.live_rows(self.state[:slots], self.slot_pair[:slots], self.slot_part[:slots],
                               self.epoch[:slots], rank, rows, found)
        dense, as_values = int(found[0]), int(found[1])
        out: dict[str, GroupOffsets] = {}
        self._sparse(out, rows[dense : dense + as_values], pair_group, pair_topic)
        if not dense:
            return out
        live = rows[:dense]
        pair, part = self.slot_pair[live], self.slot_part[live]
        group = pair_group[pair]
        group_starts = np.flatnonzero(np.r_[True, group[1:] != group[:-1]])
        row_in_group = np.arange(len(live)) - np.repeat(group_starts, np.diff(np.r_[group_starts, len(live)]))
        # A run of the partition -> row index per (group, topic): as long as its highest live partition + 1.
        run_starts = np.flatnonzero(np.r_[True, pair[1:] != pair[:-1]])
        lengths = np.maximum.reduceat(part, run_starts) + 1
        run_base = np.cumsum(lengths) - lengths
        base = np.zeros(c[PAIRS], np.int64)
        base[pair[run_starts]] = run_base
        index = np.full(int(lengths.sum()), -1, np.int32)
        self.kernels.fill_partition_index(pair, part, row_in_group, base, index)
        # Per group: its runs, where its index starts, and each run's entry in the group's `topics`.
        run_group = group[run_starts]
        group_runs = np.flatnonzero(np.r_[True, run_group[1:] != run_group[:-1]])
        group_index_start = run_base[group_runs]
        packed = (run_base - np.repeat(group_index_start, np.diff(np.r_[group_runs, len(run_starts)]))) << RUN_BITS
        packed |= lengths
        meta: list[str | None] = [""] * len(live)
        for i in np.flatnonzero(self.meta_len[live] > 0).tolist():
            meta[i] = self.metadata[int(self.meta_block[live[i]]), int(self.meta_start[live[i]])]
        expires = self.expire[live]
        expire_rows = np.flatnonzero(expires != -1)
        row_cuts = np.r_[group_starts, len(live)].tolist()
        source = _LiveColumns(
            run_names=[self.names[t] for t in pair_topic[pair[run_starts]].tolist()], runs=packed.tolist(),
            run_cuts=np.r_[group_runs, len(run_starts)].tolist(),
            index=index.data.cast("B"), index_cuts=np.r_[group_index_start, len(index)].tolist(),
            offset=self.offset[live].data.cast("B"), epoch=self.epoch[live].astype(np.int32).data.cast("B"),
            committed=self.committed[live].data.cast("B"), meta=meta, row_cuts=row_cuts,
            expire_rows=expire_rows.tolist(), expire_values=expires[expire_rows].tolist(),
            expire_cuts=np.asarray(np.searchsorted(expire_rows, row_cuts)).tolist())
        names = self.names
        for k, group_id in enumerate(run_group[group_runs].tolist()):
            name = names[group_id]
            sparse = out[name].sparse if name in out else None
            out[name] = GroupOffsets.from_source(source, k, row_cuts[k + 1] - row_cuts[k], sparse)
        return out

    def _sparse(self, out: dict[str, GroupOffsets], slots: np.ndarray, pair_group: np.ndarray,
                pair_topic: np.ndarray) -> None:
        """The live keys the columns do not hold (a high partition, an epoch past int32), kept as values."""
        names = self.names
        for s in slots.tolist():
            pair = int(self.slot_pair[s])
            group, topic = names[int(pair_group[pair])], names[int(pair_topic[pair])]
            metadata = self.metadata[int(self.meta_block[s]), int(self.meta_start[s])] if self.meta_len[s] > 0 else ""
            value = OffsetCommitValue(int(self.offset[s]), int(self.epoch[s]), metadata,
                                      int(self.committed[s]), int(self.expire[s]))
            store = out.setdefault(group, GroupOffsets())
            store.put(topic, int(self.slot_part[s]), value)


@dataclass(frozen=True)
class _LiveColumns:
    """A bulk load's live offsets in shared columns, group after group (rows in order of group, topic, partition):
    each group's own columns are copied out of them when the shard first uses the group (GroupOffsets.from_source).
    They are freed once every group has been built. Cuts are where each group's slice starts, and one more."""

    run_names: list[str]  # each (group, topic) run's topic
    runs: list[int]  # its entry in the group's `topics`: base << RUN_BITS | length
    run_cuts: list[int]
    index: memoryview  # int32 partition -> row, run after run
    index_cuts: list[int]
    offset: memoryview  # int64 per row
    epoch: memoryview  # int32 per row
    committed: memoryview  # int64 per row
    meta: list[str | None]  # per row
    row_cuts: list[int]
    expire_rows: list[int]  # the rows with an expire timestamp, and theirs
    expire_values: list[int]
    expire_cuts: list[int]

    def columns(self, key: int) -> Columns:
        """Group `key`'s columns (see ColumnSource), copied out of the shared ones."""
        a, b = self.row_cuts[key], self.row_cuts[key + 1]
        r0, r1 = self.run_cuts[key], self.run_cuts[key + 1]
        topics = dict(zip(self.run_names[r0:r1], self.runs[r0:r1], strict=True))
        index_col, offset_col, epoch_col, committed_col = array("i"), array("q"), array("i"), array("q")
        index_col.frombytes(self.index[4 * self.index_cuts[key] : 4 * self.index_cuts[key + 1]])
        offset_col.frombytes(self.offset[8 * a : 8 * b])
        epoch_col.frombytes(self.epoch[4 * a : 4 * b])
        committed_col.frombytes(self.committed[8 * a : 8 * b])
        e0, e1 = self.expire_cuts[key], self.expire_cuts[key + 1]
        rows, values = self.expire_rows, self.expire_values
        expire = {rows[i] - a: values[i] for i in range(e0, e1)} if e1 > e0 else None
        return topics, index_col, offset_col, epoch_col, committed_col, self.meta[a:b], expire


def bulk_load(directory: str | os.PathLike[str], block_records: int = BLOCK_RECORDS,
              compiled: Kernels | None = None, records_at_most: int = 0) -> BulkLoad | None:
    """A partition log decoded in bulk for GroupCoordinator.load_bulk, or None where only a
    record-by-record replay will do (see the module docstring); `compiled` defaults to storage.kernels.kernels().

    `records_at_most` (the log's end offset, say) sizes the key columns once, up front, for SLOTS_PER_RECORD
    slots a record: growing them block by block copies every slot filled so far (for a log of a million live
    offsets, a fifth of its replay). Pages of the reserve that no slot takes are never touched.
    """
    reserve = min(SLOTS_PER_RECORD * records_at_most, RESERVED_SLOTS_MAX) + DENSE_PARTITIONS + 1
    keys = _Keys(compiled or kernels(), reserve)
    position: LogPosition | int = 0
    block_no = 0
    try:
        while True:
            block = read_entries(directory, position, max_records=block_records)
            if not len(block.record_counts):
                break
            keys.feed(block, block_no)
            block_no += 1
            position = block.end
        offsets = keys.offsets()
    except (_Unsupported, CorruptLogError) as e:
        log.warning("%s: the bulk replay cannot decode this log (%s); replaying it record by record", directory, e)
        return None
    return BulkLoad(keys.events, offsets, keys.records)

