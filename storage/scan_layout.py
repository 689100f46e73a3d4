"""The layout the compiled scan kernels share with their callers: record kinds, column rows and counters.

Kept apart from the kernels (storage.msgpack_scan, storage.replay_kernels) so that a caller running the
precompiled kernels (storage.kernels) reads these without importing numba.
"""

from __future__ import annotations

# Record kinds in the `kind` column: an offset commit, a group metadata record, any other record.
COMMIT, GROUP, OTHER = 1, 2, 3
# Rows of the `spans` columns (start and length in the buffer; a length of -1 is nil) and of `ints`.
SPAN_RECORD, SPAN_GROUP, SPAN_TOPIC, SPAN_METADATA = 0, 2, 4, 6
INT_PARTITION, INT_OFFSET, INT_EPOCH, INT_COMMIT_TS, INT_EXPIRE_TS, INT_TOMBSTONE = 0, 1, 2, 3, 4, 5
# The bulk replay's counters (a `counts` array): names, arena bytes, pairs and slots in use, the segment number,
# events, the keys kept in the hash table, the records folded so far, whether the keys were too sparse (1), and
# whether an offset commit's metadata was nil (1: the column store keeps only strings there).
NAMES, ARENA, PAIRS, SLOTS, SEG, EVENTS, HASHED, FOLDED, TOO_SPARSE, NIL_METADATA = range(COUNTERS := 10)
# The bulk replay gives up on a log whose keys take more than this many slots per record, plus 2**20
# (storage.replay_kernels); its columns are reserved for this many up front (storage.bulk_replay).
SLOTS_PER_RECORD = 8
