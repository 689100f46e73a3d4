"""A small generated offsets history with one known pattern per partition, for the spark tests.

Times are T0 + seconds. The topic "events" has end offsets reported every 10 s (t = 0..200 s);
"audit" has none. Commits happen at t = 10k + 5 s. now = T0 + 200 s.

    alpha/events/0  healthy  offset 100k = the end offset at the time: lag 0       -> OK
    alpha/events/1  stalled  offset 500 forever while the end grows                -> STALL
    alpha/events/2  stopped  offset 100k for k < 10, then no more commits          -> STOP
    alpha/events/3  rewound  offset 100k, back to 1000 at k = 16, then +100        -> REWIND
    alpha/events/4  lagging  offset 50k while the end grows by 100 per 10 s        -> WARN
    beta/events/0   healthy (group OK); gamma/events/4 lagging (group WARN)
    delta/events/0  five commits, then its offsets are deleted (tombstone at 60 s)
    zeta/audit/0,1  no end offsets: advancing (OK) and stuck at 7 (STALL)

Group metadata: alpha has generations 1, 2, 3 starting at 0, 60 and 120 s (each written at
join and again at sync, 1 s later); delta has generation 1 at 2 s and is deleted at 70 s.
"""

from __future__ import annotations

from pathlib import Path

from groupcoord.protocol.records import (
    GroupMetadataKey,
    GroupMetadataValue,
    MemberMetadata,
    OffsetCommitKey,
    OffsetCommitValue,
    Record,
    encode_batch,
)
from groupcoord.storage import StorageRoot
from groupcoord.storage.framing import frame_entry
from groupcoord.storage.topics import TopicRegistry

T0 = 1_700_000_000_000
NOW = T0 + 200_000
SAMPLES = 21  # k = 0..20
END_OFFSETS = {  # events partition -> end offset at sample k
    0: lambda k: 100 * k,
    1: lambda k: 490 + 10 * k,
    2: lambda k: 100 * k + 100,
    3: lambda k: 100 * k + 50,
    4: lambda k: 100 * k + 10,
}


def ms(seconds: float) -> int:
    """T0 plus `seconds`, in ms."""
    return T0 + int(seconds * 1000)


def commit_times(n: int = 20) -> list[int]:
    """The commit times T0 + (10k + 5) s for k < n."""
    return [ms(10 * k + 5) for k in range(n)]


def _rewound(k: int) -> int:
    return 100 * k if k <= 15 else 1000 + 100 * (k - 16)


# (group, topic, partition) -> offsets committed at t = 10k + 5 s, k = 0, 1, ...
COMMITS: dict[tuple[str, str, int], list[int]] = {
    ("alpha", "events", 0): [100 * k for k in range(20)],
    ("alpha", "events", 1): [500] * 20,
    ("alpha", "events", 2): [100 * k for k in range(10)],
    ("alpha", "events", 3): [_rewound(k) for k in range(20)],
    ("alpha", "events", 4): [50 * k for k in range(20)],
    ("beta", "events", 0): [100 * k for k in range(20)],
    ("gamma", "events", 4): [50 * k for k in range(20)],
    ("delta", "events", 0): [100 * k for k in range(5)],
    ("zeta", "audit", 0): [10 * k for k in range(20)],
    ("zeta", "audit", 1): [7] * 20,
}
LOG_PARTITION = {"alpha": 0, "beta": 1, "gamma": 1, "delta": 1, "zeta": 1}
DELTA_DELETED = ms(60)


def _member(member_id: str, assigned: bool) -> MemberMetadata:
    return MemberMetadata(member_id, None, f"client-{member_id}", "/10.0.0.1", 60_000, 10_000, b"sub",
                          b"assignment" if assigned else b"")


def _group(group: str, generation: int, leader: str, members: list[str], at: int, assigned: bool) -> Record:
    value = GroupMetadataValue("consumer", generation, "range", leader, at,
                               tuple(_member(m, assigned) for m in members))
    return Record(GroupMetadataKey(group), value)


def events() -> list[tuple[int, int, Record]]:
    """(log partition, append time, record) of the whole history, in time order."""
    out: list[tuple[int, int, Record]] = []
    for (group, topic, partition), offsets in COMMITS.items():
        for at, offset in zip(commit_times(len(offsets)), offsets, strict=True):
            value = OffsetCommitValue(offset, 4, f"m{offset}", at, -1)
            out.append((LOG_PARTITION[group], at, Record(OffsetCommitKey(group, topic, partition), value)))
    out.append((1, DELTA_DELETED, Record(OffsetCommitKey("delta", "events", 0), None)))
    generations = [(1, "m1", ["m1", "m2"], 0), (2, "m1", ["m1", "m2", "m3"], 60), (3, "m2", ["m2", "m3", "m4"], 120)]
    for generation, leader, members, start in generations:
        out.append((0, ms(start), _group("alpha", generation, leader, members, ms(start), False)))
        out.append((0, ms(start + 1), _group("alpha", generation, leader, members, ms(start + 1), True)))
    out.append((1, ms(2), _group("delta", 1, "d1", ["d1"], ms(2), True)))
    out.append((1, ms(70), Record(GroupMetadataKey("delta"), None)))
    out.sort(key=lambda e: e[1])
    return out


def write_history(root: Path, *, segment_bytes: int = 1500) -> Path:
    """Write the history through PartitionLog (small segments, so several per partition)."""
    storage = StorageRoot(root, 2)
    clock = {"now": T0}
    logs = [storage.open_partition(i, sync="never", segment_bytes=segment_bytes, clock=lambda: clock["now"])
            for i in range(2)]
    for log_partition, at, record in events():
        clock["now"] = at
        logs[log_partition].append([record])
        logs[log_partition].flush()
    for lg in logs:
        lg.close()
    registry = TopicRegistry(root, clock_ms=lambda: clock["now"])
    registry.create("events", 5)
    registry.create("audit", 2)
    for k in range(SAMPLES):
        clock["now"] = ms(10 * k)
        registry.report_end_offsets("events", {p: f(k) for p, f in END_OFFSETS.items()})
    return root


# --- what the reports must say about this history (now = NOW, window 10) ----------------------

RATE = 0.1  # every key commits every 10 s
EXPECTED_COMMITS = {  # key -> committed_offset, deleted, commits, tombstones, commit_rate, first, last, age
    ("alpha", "events", 0): (1900, False, 20, 0, RATE, ms(5), ms(195), 5000),
    ("alpha", "events", 1): (500, False, 20, 0, RATE, ms(5), ms(195), 5000),
    ("alpha", "events", 2): (900, False, 10, 0, RATE, ms(5), ms(95), 105_000),
    ("alpha", "events", 3): (1300, False, 20, 0, RATE, ms(5), ms(195), 5000),
    ("alpha", "events", 4): (950, False, 20, 0, RATE, ms(5), ms(195), 5000),
    ("beta", "events", 0): (1900, False, 20, 0, RATE, ms(5), ms(195), 5000),
    ("delta", "events", 0): (400, True, 5, 1, RATE, ms(5), ms(45), 155_000),
    ("gamma", "events", 4): (950, False, 20, 0, RATE, ms(5), ms(195), 5000),
    ("zeta", "audit", 0): (190, False, 20, 0, RATE, ms(5), ms(195), 5000),
    ("zeta", "audit", 1): (7, False, 20, 0, RATE, ms(5), ms(195), 5000),
}
COMMIT_COLUMNS = ["committed_offset", "deleted", "commits", "tombstones", "commit_rate", "first_commit_ms",
                  "last_commit_ms", "last_commit_age_ms"]

EXPECTED_STATUS = {  # key -> status, committed_offset, end_offset, current_lag
    ("alpha", "events", 0): ("OK", 1900, 2000, 100),
    ("alpha", "events", 1): ("STALL", 500, 690, 190),
    ("alpha", "events", 2): ("STOP", 900, 2100, 1200),
    ("alpha", "events", 3): ("REWIND", 1300, 2050, 750),
    ("alpha", "events", 4): ("WARN", 950, 2010, 1060),
    ("beta", "events", 0): ("OK", 1900, 2000, 100),
    ("gamma", "events", 4): ("WARN", 950, 2010, 1060),
    ("zeta", "audit", 0): ("OK", 190, None, None),
    ("zeta", "audit", 1): ("STALL", 7, None, None),
}
STATUS_COLUMNS = ["status", "committed_offset", "end_offset", "current_lag"]
EXPECTED_WINDOWS = {  # key -> window_offsets, window_lags, window_start_ms, window_end_ms
    ("alpha", "events", 1): ([500] * 10, [10 * k - 10 for k in range(10, 20)], ms(105), ms(195)),
    ("alpha", "events", 2): ([100 * k for k in range(10)], [100] * 10, ms(5), ms(95)),
    ("alpha", "events", 3): ([1000, 1100, 1200, 1300, 1400, 1500, 1000, 1100, 1200, 1300],
                             [50] * 6 + [650] * 4, ms(105), ms(195)),
    ("alpha", "events", 4): ([50 * k for k in range(10, 20)], [50 * k + 10 for k in range(10, 20)], ms(105), ms(195)),
    ("zeta", "audit", 0): ([10 * k for k in range(10, 20)], [None] * 10, ms(105), ms(195)),
}

EXPECTED_GROUPS = {  # group -> status, worst partition status, partitions, not ok, total lag, max lag (t, p, lag)
    "alpha": ("ERR", "REWIND", 5, 4, 3300, ("events", 2, 1200)),
    "beta": ("OK", "OK", 1, 0, 100, ("events", 0, 100)),
    "gamma": ("WARN", "WARN", 1, 1, 1060, ("events", 4, 1060)),
    "zeta": ("ERR", "STALL", 2, 1, None, (None, None, None)),
}

EXPECTED_LAG = {  # key -> committed_offset, end_offset, end_offset_ms, lag, time_lag_ms
    ("alpha", "events", 0): (1900, 2000, NOW, 100, 10_000),
    ("alpha", "events", 1): (500, 690, NOW, 190, 190_000),
    ("alpha", "events", 2): (900, 2100, NOW, 1200, 120_000),
    ("alpha", "events", 3): (1300, 2050, NOW, 750, 75_000),
    ("alpha", "events", 4): (950, 2010, NOW, 1060, 106_000),
    ("beta", "events", 0): (1900, 2000, NOW, 100, 10_000),
    ("gamma", "events", 4): (950, 2010, NOW, 1060, 106_000),
}
LAG_COLUMNS = ["committed_offset", "end_offset", "end_offset_ms", "lag", "time_lag_ms"]

EXPECTED_GENERATIONS = [  # group, generation, started, ended, leader, member_count, members, records
    ("alpha", 1, ms(0), ms(60), "m1", 2, ["m1", "m2"], 2),
    ("alpha", 2, ms(60), ms(120), "m1", 3, ["m1", "m2", "m3"], 2),
    ("alpha", 3, ms(120), None, "m2", 3, ["m2", "m3", "m4"], 2),
    ("delta", 1, ms(2), None, "d1", 1, ["d1"], 1),
]
EXPECTED_REBALANCES = {  # group -> generations, rebalances, per hour, first seen, since, generation, members, deleted
    "alpha": (3, 2, 36.0, ms(0), ms(120), 3, 3, False),
    "delta": (1, 0, 0.0, ms(2), ms(2), 1, 1, True),
}
REBALANCE_COLUMNS = ["generations", "rebalances", "rebalances_per_hour", "first_seen_ms",
                     "current_generation_since_ms", "current_generation", "current_members", "deleted"]


def by_key(rows, columns, key=("group", "topic", "partition")) -> dict:
    """Rows (dicts) as {key tuple (or the one key value): tuple of `columns`}."""
    out = {}
    for r in rows:
        k = tuple(r[c] for c in key)
        out[k if len(k) > 1 else k[0]] = tuple(r[c] for c in columns)
    return out


def write_torn_log(root: Path) -> tuple[Path, int]:
    """A storage root whose partition 0 ends in half an entry; returns (root, complete records)."""
    storage = StorageRoot(root, 1)
    log = storage.open_partition(0, sync="never", clock=lambda: T0)
    batches = [[Record(OffsetCommitKey("g", "t", 0), OffsetCommitValue(10 * i + j, 1, "", T0 + i, -1))
                for j in range(3)] for i in range(4)]
    for batch in batches:
        log.append(batch)
    log.close()
    (segment,) = sorted(storage.partition_dir(0).glob("*.log"))
    torn = frame_entry(12, 2, T0, encode_batch(batches[0][:2]))
    with open(segment, "ab") as f:
        f.write(torn[: len(torn) // 2])
    return root, 12
