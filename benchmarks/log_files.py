"""What the storage and recovery benchmarks do to a written PartitionLog directory outside the log's own replay.

A raw-decode baseline (read the segment files and msgpack-unpack their payloads, with none of the
log's checks), compaction in place, and the size of the segments on disk.
"""

from __future__ import annotations

from pathlib import Path

import msgpack

from groupcoord.protocol.records import record_from_obj
from groupcoord.storage import CompactionResult, PartitionLog, list_segments
from groupcoord.storage.framing import HEADER, HEADER_SIZE


def raw_decode(directory: Path, build_records: bool) -> int:
    """Read the segment files and msgpack-unpack the payloads (optionally building Records); the count."""
    n = 0
    for path in list_segments(directory):
        data = path.read_bytes()
        view = memoryview(data)
        unpacker = msgpack.Unpacker(raw=False, use_list=True, max_buffer_size=len(data) + 1)
        pos = 0
        while pos < len(data):
            plen = HEADER.unpack_from(data, pos)[0]
            unpacker.feed(view[pos + HEADER_SIZE : pos + HEADER_SIZE + plen])
            if build_records:
                n += len(list(map(record_from_obj, unpacker)))
            else:
                n += sum(1 for _ in unpacker)
            pos += HEADER_SIZE + plen
    return n


def compact(directory: Path, segment_bytes: int) -> CompactionResult:
    """Compact the closed segments of the log in `directory` in place; what the compaction did."""
    plog = PartitionLog(directory, sync="never", segment_bytes=segment_bytes)
    try:
        return plog.compact()
    finally:
        plog.close()


def on_disk(directory: Path) -> dict:
    """The log's size on disk: `bytes` of its segment files and the number of `segments`."""
    segments = list_segments(directory)
    return {"bytes": sum(p.stat().st_size for p in segments), "segments": len(segments)}
