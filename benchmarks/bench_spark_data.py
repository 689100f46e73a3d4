"""Synthetic offsets history for bench_spark: many commits through the real PartitionLog.

`groups` consumer groups each consume every partition of one topic; every round each key
commits once (offset + 10 per round, one round per second), a few keys stall or fall behind,
and the topic's end offsets are reported to the registry every 10 rounds.
"""

from __future__ import annotations

import sys
import time
import zlib
from pathlib import Path

from groupcoord.protocol.records import OffsetCommitKey, OffsetCommitValue, Record
from groupcoord.storage import StorageRoot
from groupcoord.storage.topics import TopicRegistry

T0 = 1_700_000_000_000
TOPIC = "bench"
BATCH = 500  # records per append, as a busy partition's group commit would write


def generate(root: Path, records: int, *, log_partitions: int, groups: int, topic_partitions: int,
             segment_bytes: int) -> dict:
    """Write `records` offset commits under `root`; returns what was written and how long it took."""
    started = time.perf_counter()
    storage = StorageRoot(root, log_partitions)
    clock = {"now": T0}
    logs = [storage.open_partition(i, sync="never", segment_bytes=segment_bytes, clock=lambda: clock["now"])
            for i in range(log_partitions)]
    keys = [(f"group-{g:04d}", p) for g in range(groups) for p in range(topic_partitions)]
    owner = {f"group-{g:04d}": zlib.crc32(f"group-{g:04d}".encode()) % log_partitions for g in range(groups)}
    pending: list[list[Record]] = [[] for _ in range(log_partitions)]
    registry = TopicRegistry(root, clock_ms=lambda: clock["now"])
    registry.create(TOPIC, topic_partitions)
    per_round = len(keys)
    rounds = -(-records // per_round)
    written = 0
    next_report = records // 10
    for r in range(rounds):
        at = T0 + r * 1000
        clock["now"] = at
        if r % 10 == 0:
            registry.report_end_offsets(TOPIC, {p: r * 10 + 50 for p in range(topic_partitions)})
        for i, (group, p) in enumerate(keys):
            if written == records:
                break
            if i % 97 == 0:
                offset = 0  # stalled
            elif i % 89 == 0:
                offset = r * 5  # falling behind
            else:
                offset = r * 10
            value = OffsetCommitValue(offset, 1, "", at + i % 1000, -1)
            batch = pending[owner[group]]
            batch.append(Record(OffsetCommitKey(group, TOPIC, p), value))
            if len(batch) == BATCH:
                logs[owner[group]].append(batch)
                pending[owner[group]] = []
            written += 1
            if written >= next_report:
                print(f"  generated {written:,}/{records:,} records ({time.perf_counter() - started:.1f}s)",
                      file=sys.stderr, flush=True)
                next_report += max(1, records // 10)
                for lg in logs:
                    lg.flush()
    for lg, batch in zip(logs, pending, strict=True):
        if batch:
            lg.append(batch)
        lg.close()
    size = sum(f.stat().st_size for f in root.rglob("*.log"))
    return {"records": written, "keys": len(keys), "rounds": rounds, "bytes": size,
            "seconds": time.perf_counter() - started, "now_ms": T0 + rounds * 1000}


def generate_history(history: Path, root: Path, records: int, *, log_partitions: int, groups: int,
                     topic_partitions: int, chunk: int = 5_000_000) -> dict:
    """Write `records` commits straight into an exported history (Parquet, the export's layout), in chunks.

    The same commits as `generate` (one per key per one-second round, some keys stalled or behind),
    without going through the logs: the columnar writer builds each chunk's columns with NumPy.
    End offsets go to a topic registry under `root`. Prints progress.
    """
    import numpy as np
    import pyarrow as pa
    import pyarrow.parquet as pq

    from groupcoord.spark.history import partition_dir

    started = time.perf_counter()
    storage = StorageRoot(root, log_partitions)
    keys = groups * topic_partitions
    group_names = pa.array([f"group-{g:04d}" for g in range(groups)], pa.string())
    owner = np.array([zlib.crc32(f"group-{g:04d}".encode()) % log_partitions for g in range(groups)], np.int32)
    next_offset = np.zeros(log_partitions, np.int64)
    rounds = -(-records // keys)
    for start in range(0, records, chunk):
        idx = np.arange(start, min(start + chunk, records), dtype=np.int64)
        rnd, key = idx // keys, idx % keys
        group, partition = key // topic_partitions, (key % topic_partitions).astype(np.int32)
        offset = np.where(key % 97 == 0, 0, np.where(key % 89 == 0, rnd * 5, rnd * 10))
        at = T0 + rnd * 1000
        lp = owner[group]
        for p in range(log_partitions):
            mine = lp == p
            n = int(mine.sum())
            table = pa.table({
                "group": pa.DictionaryArray.from_arrays(pa.array(group[mine].astype(np.int32)), group_names)
                .cast(pa.string()),
                "topic": pa.array(np.full(n, TOPIC, dtype=object), pa.string()),
                "partition": pa.array(partition[mine]),
                "offset": pa.array(offset[mine]),
                "leader_epoch": pa.array(np.ones(n, np.int32)),
                "metadata": pa.array(np.full(n, "", dtype=object), pa.string()),
                "commit_timestamp": pa.array(at[mine] + key[mine] % 1000),
                "expire_timestamp": pa.array(np.full(n, -1, np.int64)),
                "tombstone": pa.array(np.zeros(n, bool)),
                "log_offset": pa.array(next_offset[p] + np.arange(n, dtype=np.int64)),
                "log_timestamp": pa.array(at[mine]),
            })
            first, next_offset[p] = next_offset[p], next_offset[p] + n
            days = table["log_timestamp"].to_numpy() // 86_400_000
            for day in np.unique(days):
                directory = history / partition_dir("commits", str(np.datetime64(int(day), "D")), p)
                directory.mkdir(parents=True, exist_ok=True)
                pq.write_table(table.filter(pa.array(days == day)),
                               directory / f"{first:020d}-{next_offset[p]:020d}.parquet")
        print(f"  wrote {idx[-1] + 1:,}/{records:,} commits into the history "
              f"({time.perf_counter() - started:.1f}s)", file=sys.stderr, flush=True)
    clock = {"now": T0}
    registry = TopicRegistry(storage.path, clock_ms=lambda: clock["now"])
    registry.create(TOPIC, topic_partitions)
    for r in range(0, rounds, 10):
        clock["now"] = T0 + r * 1000
        registry.report_end_offsets(TOPIC, {p: r * 10 + 50 for p in range(topic_partitions)})
    size = sum(f.stat().st_size for f in history.rglob("*.parquet"))
    return {"records": records, "keys": keys, "rounds": rounds, "bytes": size,
            "seconds": time.perf_counter() - started, "now_ms": T0 + rounds * 1000}
