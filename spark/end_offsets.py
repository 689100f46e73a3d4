"""Log-end offsets of the consumed topics: timestamped samples from the topic registry or the user.

Reports use them for lag (latest end offset minus committed offset), for the lag of each commit
in Burrow's window (the end offset last reported before the commit), and for time lag (when the
log end last stood at the committed offset, interpolated between samples).
"""

from __future__ import annotations

import json
import logging
from pathlib import Path
from typing import Any, Iterable, Mapping, Union

import pyarrow as pa

from groupcoord.storage.topics import REGISTRY_FILE, read_end_offset_history

from .blocks import arrow_to_spark
from .schema import END_OFFSETS_SCHEMA

log = logging.getLogger(__name__)

# A user-supplied table: {(topic, partition): end_offset} (taken as reported at now_ms), or
# samples as mappings with keys topic, partition, offset, timestamp (or 4-tuples in that order).
EndOffsets = Union[Mapping[tuple[str, int], int], Iterable[Union[Mapping[str, Any], tuple]]]


def end_offset_samples(
    root: str | Path | None = None, end_offsets: EndOffsets | None = None, *, now_ms: int | None = None
) -> pa.Table:
    """The end-offset samples as an Arrow table (topic, partition, offset, timestamp).

    A user-supplied `end_offsets` replaces the registry's history under `root`; a plain mapping
    of current end offsets gets timestamp `now_ms`.
    """
    rows: list[tuple[str, int, int, int]] = []
    if end_offsets is not None:
        if isinstance(end_offsets, Mapping):
            if now_ms is None:
                raise ValueError("a mapping of current end offsets needs now_ms")
            rows = [(t, int(p), int(o), int(now_ms)) for (t, p), o in end_offsets.items()]
        else:
            for s in end_offsets:
                if isinstance(s, Mapping):
                    rows.append((s["topic"], int(s["partition"]), int(s["offset"]), int(s["timestamp"])))
                else:
                    t, p, o, ts = s
                    rows.append((t, int(p), int(o), int(ts)))
    elif root is not None:
        for s in read_end_offset_history(root):
            rows.append((s["topic"], int(s["partition"]), int(s["offset"]), int(s["timestamp"])))
    log.info("%d end-offset samples", len(rows))
    columns = list(zip(*rows, strict=True)) if rows else [[], [], [], []]
    arrays = [pa.array(list(col), f.type) for col, f in zip(columns, END_OFFSETS_SCHEMA, strict=True)]
    return pa.Table.from_arrays(arrays, schema=END_OFFSETS_SCHEMA)


def end_offsets_frame(spark: Any, samples: pa.Table) -> Any:
    """The samples as a Spark DataFrame, handed over through Ray's object store like the logs."""
    return arrow_to_spark(spark, samples)


def registered_topics(root: str | Path | None) -> dict[str, int] | None:
    """The topics of the registry under `root` with their partition counts (None without a registry)."""
    if root is None:
        return None
    path = Path(root) / REGISTRY_FILE
    if not path.exists():
        return None
    return {name: int(t["partitions"]) for name, t in json.loads(path.read_text()).items()}
