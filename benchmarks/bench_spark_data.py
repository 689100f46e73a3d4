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
