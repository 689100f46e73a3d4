"""The compiled (numba) passes of the bulk replay (storage.bulk_replay): interning, key slots, last record wins.

Group and topic names are interned by content (an open-addressing table over a hash of their bytes,
checked against a copy in an arena); a (group, topic) pair gets a run of slots indexed by partition
(partitions at or past DENSE_PARTITIONS are found in a hash table instead); each slot keeps the
fields of its key's last record. All state lives in NumPy arrays the caller owns and grows: a pass
stops at the record that might overflow one and the caller calls it again from there.
"""

from __future__ import annotations

import numpy as np
from numba import njit

from groupcoord.protocol.offsets.columns import DENSE_PARTITIONS

from .msgpack_scan import borrowed, word_at
from .scan_layout import (
    ARENA,
    COMMIT,
    EVENTS,
    FOLDED,
    HASHED,
    NAMES,
    NIL_METADATA,
    PAIRS,
    SEG,
    SLOTS,
    SLOTS_PER_RECORD,
    TOO_SPARSE,
)

# Partitions below DENSE_PARTITIONS have a slot in their (group, topic)'s run of slots, indexed by partition (as
# the column store indexes them); the others are found in a hash table. A log whose runs would take more than
# SLOTS_PER_RECORD slots per record (a few records each of many topics, at high partitions) is replayed
# record by record instead.
_M1, _M2 = np.uint64(0xFF51AFD7ED558CCD), np.uint64(0xC4CEB9FE1A85EC53)
_GOLDEN = np.uint64(0x9E3779B97F4A7C15)
_FNV_BASIS, _FNV_PRIME = np.uint64(0xCBF29CE484222325), np.uint64(0x100000001B3)
_S33 = np.uint64(33)


@njit(cache=True)
def _mix(x):
    x ^= x >> _S33
    x *= _M1
    x ^= x >> _S33
    x *= _M2
    x ^= x >> _S33
    return x


@njit(cache=True)
def _fnv(buf, start, length):
    h = _FNV_BASIS
    for i in range(start, start + length):
        h = (h ^ np.uint64(buf[i])) * _FNV_PRIME
    return _mix(h)


@njit(cache=True)
def _name_id(buf, start, length, counts, arena, name_start, name_len, name_hash, ntab):
    """The id of the name in buf[start:start+length], added (copied into the arena) if new."""
    h = _fnv(buf, start, length)
    mask = len(ntab) - 1
    i = np.int64(h & np.uint64(mask))
    while True:
        found = ntab[i]
        if found < 0:
            found = counts[NAMES]
            counts[NAMES] += 1
            at = counts[ARENA]
            arena[at : at + length] = buf[start : start + length]
            counts[ARENA] += length
            name_start[found], name_len[found], name_hash[found] = at, length, h
            ntab[i] = found
            return found
        if name_hash[found] == h and name_len[found] == length:
            s = name_start[found]
            same = True
            for k in range(length):
                if arena[s + k] != buf[start + k]:
                    same = False
                    break
            if same:
                return found
        i = (i + 1) & mask


@njit(cache=True)
def _pair_id(key, counts, pair_key, ptab):
    """The id of the (group id, topic id) pair packed in `key`, added if new."""
    mask = len(ptab) - 1
    i = np.int64(_mix(np.uint64(key)) & np.uint64(mask))
    while True:
        found = ptab[i]
        if found < 0:
            found = counts[PAIRS]
            counts[PAIRS] += 1
            pair_key[found] = key
            ptab[i] = found
            return found
        if pair_key[found] == key:
            return found
        i = (i + 1) & mask


@njit(cache=True)
def _key_hash(pair, partition):
    return _mix(np.uint64(pair) * _GOLDEN ^ np.uint64(partition))


@njit(cache=True)
def _slot(pair, partition, counts, slot_pair, slot_part, ktab, hashed):
    """The slot of the offset key (pair, partition) in the hash table, added if new."""
    mask = len(ktab) - 1
    i = np.int64(_key_hash(pair, partition) & np.uint64(mask))
    while True:
        found = ktab[i]
        if found < 0:
            found = counts[SLOTS]
            counts[SLOTS] += 1
            slot_pair[found], slot_part[found] = pair, partition
            ktab[i] = found
            hashed[counts[HASHED]] = found
            counts[HASHED] += 1
            return found
        if slot_pair[found] == pair and slot_part[found] == partition:
            return found
        i = (i + 1) & mask


@njit(cache=True)
def _dense_slot(pid, part, counts, pair_base, pair_cap, slot_pair, slot_part, state, offset, epoch, committed,
                expire, meta_len, meta_start, meta_block):
    """The slot of `part` (0 <= part < DENSE_PARTITIONS) in its pair's run, which is too short and not the last one
    taken: the run moves to the end and grows (to at least twice its length)."""
    cap = pair_cap[pid]
    old = pair_base[pid]
    new_cap = min(DENSE_PARTITIONS, max(part + 1, 2 * cap, 8))
    base = counts[SLOTS]
    counts[SLOTS] += new_cap
    for i in range(new_cap):
        slot_pair[base + i], slot_part[base + i], state[base + i] = pid, i, 0
    for i in range(cap):
        a, b = old + i, base + i
        state[b], offset[b], epoch[b], committed[b], expire[b] = state[a], offset[a], epoch[a], committed[a], expire[a]
        meta_len[b], meta_start[b], meta_block[b] = meta_len[a], meta_start[a], meta_block[a]
        state[a] = 0
    pair_base[pid], pair_cap[pid] = base, new_cap
    return base + part


@njit(cache=True)
def index_records(buf, kind, spans, ints, r, n, block_no, counts, arena, name_start, name_len, name_hash, ntab,
           last_seg, pair_key, ptab, pair_base, pair_cap, slot_pair, slot_part, ktab, hashed, state, offset, epoch,
           committed, expire, meta_len, meta_start, meta_block, events):
    """Fold records r..n-1 of a scanned block into the key columns; the record it stopped at (n: all).

    It stops early when a table or column might overflow with the next record; the caller grows
    them and calls again from there. An offset commit updates its key's slot (last record wins) and,
    for a value, adds an event for its group once per segment; any other record adds an event
    (-1 - its index) and starts a new segment.
    """
    buf = borrowed(buf)  # type: ignore[call-arg]  # numba's typing context is the intrinsic's first argument
    prev_g, prev_g_len, gid, prev_t, prev_t_len, tid, pid = -1, -1, -1, -1, -1, -1, -1
    while r < n:
        if kind[r] != COMMIT:
            counts[SEG] += 1
            events[counts[EVENTS]] = -1 - r
            counts[EVENTS] += 1
            r += 1
            continue
        g_start, g_len, t_start, t_len = spans[2, r], spans[3, r], spans[4, r], spans[5, r]
        if (2 * (counts[NAMES] + 2) > len(ntab) or counts[NAMES] + 2 > len(name_start)
                or counts[ARENA] + g_len + t_len > len(arena) or 2 * (counts[PAIRS] + 1) > len(ptab)
                or counts[PAIRS] + 1 > len(pair_key) or 2 * (counts[HASHED] + 1) > len(ktab)
                or counts[SLOTS] + DENSE_PARTITIONS + 1 > len(state)):
            return r
        if counts[SLOTS] > SLOTS_PER_RECORD * (counts[FOLDED] + r) + (1 << 20):
            counts[TOO_SPARSE] = 1
            return n
        if ints[5, r] == 0 and spans[7, r] < 0:
            counts[NIL_METADATA] = 1
            return n
        changed = False
        if g_len != prev_g_len or not _equal(buf, g_start, prev_g, g_len):
            gid = _name_id(buf, g_start, g_len, counts, arena, name_start, name_len, name_hash, ntab)
            prev_g, prev_g_len, changed = g_start, g_len, True
        if t_len != prev_t_len or not _equal(buf, t_start, prev_t, t_len):
            tid = _name_id(buf, t_start, t_len, counts, arena, name_start, name_len, name_hash, ntab)
            prev_t, prev_t_len, changed = t_start, t_len, True
        if changed:
            pid = _pair_id((gid << 32) | tid, counts, pair_key, ptab)
        part = ints[0, r]
        cap = pair_cap[pid]
        if 0 <= part < cap:  # the common case, without a call (each passes every array)
            s = pair_base[pid] + part
        elif 0 <= part < DENSE_PARTITIONS and (cap == 0 or pair_base[pid] + cap == counts[SLOTS]):
            # A new pair's run, or the last one taken (its partitions committed in a row): it grows where it stands.
            base = counts[SLOTS] if cap == 0 else pair_base[pid]
            for i in range(cap, part + 1):
                slot_pair[base + i], slot_part[base + i], state[base + i] = pid, i, 0
            pair_base[pid], pair_cap[pid] = base, part + 1
            counts[SLOTS] = base + part + 1
            s = base + part
        elif 0 <= part < DENSE_PARTITIONS:
            s = _dense_slot(pid, part, counts, pair_base, pair_cap, slot_pair, slot_part, state, offset, epoch,
                            committed, expire, meta_len, meta_start, meta_block)
        else:
            s = _slot(pid, part, counts, slot_pair, slot_part, ktab, hashed)
        if ints[5, r] == 1:
            state[s] = 2
        else:
            state[s] = 1
            offset[s], epoch[s], committed[s], expire[s] = ints[1, r], ints[2, r], ints[3, r], ints[4, r]
            meta_len[s] = spans[7, r]
            if spans[7, r] > 0:
                meta_start[s], meta_block[s] = spans[6, r], block_no
            if last_seg[gid] != counts[SEG]:
                last_seg[gid] = counts[SEG]
                events[counts[EVENTS]] = gid
                counts[EVENTS] += 1
        r += 1
    return r


@njit(cache=True, inline="always")
def _equal(buf, a, b, length):
    """Whether the `length` bytes at a and at b are the same (b -1: there is nothing at b)."""
    # mypy reads word_at's typing context as its first argument: hence the ignores below.
    if b < 0:
        return False
    k = 0
    while k + 8 <= length:
        if word_at(buf, a + k) != word_at(buf, b + k):  # type: ignore[call-arg]
            return False
        k += 8
    if k < length and length >= 8:  # the last 8 bytes, overlapping those compared
        return word_at(buf, a + length - 8) == word_at(buf, b + length - 8)  # type: ignore[call-arg]
    while k < length:
        if buf[a + k] != buf[b + k]:
            return False
        k += 1
    return True


@njit(cache=True)
def rehash_names(ntab, name_hash, n):
    mask = len(ntab) - 1
    for found in range(n):
        i = np.int64(name_hash[found] & np.uint64(mask))
        while ntab[i] >= 0:
            i = (i + 1) & mask
        ntab[i] = found


@njit(cache=True)
def rehash_pairs(ptab, pair_key, n):
    mask = len(ptab) - 1
    for found in range(n):
        i = np.int64(_mix(np.uint64(pair_key[found])) & np.uint64(mask))
        while ptab[i] >= 0:
            i = (i + 1) & mask
        ptab[i] = found


@njit(cache=True)
def rehash_keys(ktab, slot_pair, slot_part, hashed, n):
    mask = len(ktab) - 1
    for found in hashed[:n]:
        i = np.int64(_key_hash(slot_pair[found], slot_part[found]) & np.uint64(mask))
        while ktab[i] >= 0:
            i = (i + 1) & mask
        ktab[i] = found


@njit(cache=True, inline="always")
def _held(partition, epoch):
    """Whether the column store holds a key of this partition and leader epoch (else it keeps a value)."""
    return 0 <= partition < DENSE_PARTITIONS and -2147483648 <= epoch <= 2147483647


@njit(cache=True)
def live_rows(state, slot_pair, slot_part, epoch, pair_rank, rows, found):
    """Fill `rows` with the live slots (state 1): first those the columns hold (a partition below DENSE_PARTITIONS,
    an epoch within int32) in order of their pair's rank, then of partition; after them the others. found[0] and
    found[1] are set to how many of each."""
    start = np.zeros(len(pair_rank) + 1, np.int64)
    others = 0
    for s in range(len(state)):
        if state[s] == 1:
            if _held(slot_part[s], epoch[s]):
                start[pair_rank[slot_pair[s]] + 1] += 1
            else:
                others += 1
    for k in range(len(pair_rank)):
        start[k + 1] += start[k]
    dense = start[len(pair_rank)]
    at = dense
    for s in range(len(state)):  # a pair's slots in a run are in partition order
        if state[s] == 1:
            if _held(slot_part[s], epoch[s]):
                k = pair_rank[slot_pair[s]]
                rows[start[k]] = s
                start[k] += 1
            else:
                rows[at] = s
                at += 1
    found[0], found[1] = dense, others


@njit(cache=True)
def fill_partition_index(pair_of_row, part_of_row, row_in_group, pair_base, index):
    """Fill the flat partition -> row index (each pair's region starts at pair_base[pair])."""
    for i in range(len(pair_of_row)):
        index[pair_base[pair_of_row[i]] + part_of_row[i]] = row_in_group[i]
