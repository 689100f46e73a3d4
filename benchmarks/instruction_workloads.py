"""The hot paths whose CPU instructions the regression guard counts: the pure shard's and storage's.

Each workload is a `prepare()` that builds its inputs (not counted) and returns the function to
count. They are deterministic: a ManualClock, fixed ids, no threads, the log in a temporary
directory, so that the same code runs the same instructions on every run (with PYTHONHASHSEED
fixed by the runner). Sizes are small enough for valgrind (~50x slower) yet large enough that
per-call noise disappears.

The runner (benchmarks/instructions.py) starts this module under callgrind uninstrumented: the
interpreter's start, the imports and each prepare() run about 5x faster than instrumented, and
`main` turns instrumentation on just around each counted call (a callgrind client request).
"""

from __future__ import annotations

import ctypes
import functools
import gc
import mmap
import platform
import sys
from pathlib import Path
from typing import Callable

from groupcoord.protocol import (
    GroupConfig,
    GroupCoordinator,
    HeartbeatRequest,
    JoinGroupRequest,
    ManualClock,
    MemoryLog,
    OffsetAndMetadata,
    OffsetCommitRequest,
    SyncGroupRequest,
    TopicPartition,
)

Workload = Callable[[], object]

COMMITS, COMMIT_PARTITIONS = 200, 10
HEARTBEAT_MEMBERS, HEARTBEAT_ROUNDS = 1000, 2
HEARTBEAT_BATCH, HEARTBEAT_TICK_MS = 50, 20  # the partition actor's batches of heartbeats, and how often they come
# Past the knee the throttle stretches members' heartbeat intervals towards their sessions (10 s here): each
# group's session timer then fires often, and finds no one to expire.
SESSION_MEMBERS, SESSION_INTERVAL_MS, SESSION_CLOCK_MS = 1000, 8_000, 40_000
REBALANCE_MEMBERS = 1000
REPLAY_RECORDS = 20_000
LAG_GROUPS, LAG_TOPICS, LAG_PARTITIONS = 200, 10, 10  # consumer lag: end offsets known for one topic of the ten
_CONFIG = GroupConfig(min_session_timeout_ms=100, initial_rebalance_delay_ms=50)


class _NullLog:
    """Durable at once, keeps nothing: the shard's own work only."""

    def __init__(self) -> None:
        self.end = 0

    def append(self, records) -> int:
        self.end += len(records)
        return self.end

    @property
    def durable_offset(self) -> int:
        return self.end


def _shard() -> tuple[GroupCoordinator, ManualClock]:
    clock = ManualClock(1_700_000_000_000)
    return GroupCoordinator(_CONFIG, clock, _NullLog()), clock


def _form(coord: GroupCoordinator, clock: ManualClock, group: str, members: int) -> list[tuple[str, int]]:
    """Join `members` new members to `group` and sync them; their (member id, generation)."""
    joins = [coord.join_group(JoinGroupRequest(group, 10_000, 60_000, protocols=[("range", b"")],
                                               client_id=f"c{i}", require_known_member_id=False))
             for i in range(members)]
    for _ in range(100):  # the initial delay (KIP-134) ends once no member joined for a delay
        if joins[-1].done():
            break
        clock.advance(_CONFIG.initial_rebalance_delay_ms)
        coord.tick()
    answers = [j.result() for j in joins]
    leader = answers[0].leader
    assignments = {a.member_id: b"x" for a in answers}
    syncs = [coord.sync_group(SyncGroupRequest(group, a.generation_id, a.member_id,
                                               assignments=assignments if a.member_id == leader else {}))
             for a in answers]
    assert all(s.done() for s in syncs)
    return [(a.member_id, a.generation_id) for a in answers]


def commit_apply(data: Path) -> Workload:
    """OffsetCommit of 10 partitions, 200 times, by a simple consumer (generation -1)."""
    coord, _ = _shard()
    reqs = [OffsetCommitRequest("g", {TopicPartition("t", p): OffsetAndMetadata(i * 100 + p, "")
                                      for p in range(COMMIT_PARTITIONS)}) for i in range(COMMITS)]

    def run() -> object:
        for r in reqs:
            coord.commit_offsets(r)
        return coord

    return run


def heartbeat(data: Path) -> Workload:
    """Heartbeats of 1,000 members of 100 Stable groups, twice each, in batches of 50 every 20 ms; after each
    batch the next deadline, as the partition actor asks for it (exact only within 100 ms)."""
    coord, clock = _shard()
    members = [(f"hb-{g}", m, gen) for g in range(HEARTBEAT_MEMBERS // 10)
               for m, gen in _form(coord, clock, f"hb-{g}", 10)]
    reqs = [HeartbeatRequest(g, gen, m) for g, m, gen in members]
    batches = [reqs[lo : lo + HEARTBEAT_BATCH] for lo in range(0, len(reqs), HEARTBEAT_BATCH)]

    def run() -> object:
        for _ in range(HEARTBEAT_ROUNDS):
            for batch in batches:
                for r in batch:
                    coord.heartbeat(r)
                clock.advance(HEARTBEAT_TICK_MS)
                coord.next_deadline(clock.monotonic_ms() + 100)
        return coord

    return run


def session_timers(data: Path) -> Workload:
    """1,000 members of 100 Stable groups heartbeat every 8 s of their 10 s sessions, for 40 s in 20 ms ticks
    (phases spread over the interval); after each tick's heartbeats the due timers fire, as the partition actor's
    timer loop fires them."""
    coord, clock = _shard()
    members = [(f"st-{g}", m, gen) for g in range(SESSION_MEMBERS // 10)
               for m, gen in _form(coord, clock, f"st-{g}", 10)]
    slots = SESSION_INTERVAL_MS // HEARTBEAT_TICK_MS
    due: list[list[HeartbeatRequest]] = [[] for _ in range(slots)]
    for i, (g, m, gen) in enumerate(members):  # a group's members spread over the interval, as the benchmark's
        due[int(i * 0.618 % 1 * slots)].append(HeartbeatRequest(g, gen, m))
    for r in (r for tick in due for r in tick):
        coord.heartbeat(r)  # every session restarts now: the groups formed one after another

    def run() -> object:
        for tick in range(SESSION_CLOCK_MS // HEARTBEAT_TICK_MS):
            for r in due[tick % slots]:
                coord.heartbeat(r)
            clock.advance(HEARTBEAT_TICK_MS)
            while coord.fire_timers(100):
                pass
        assert coord.runtime.stats.session_expirations == 0, "a member that heartbeated in time expired"
        return coord

    return run


def join_sync_1000(data: Path) -> Workload:
    """One group of 1,000 members: every JoinGroup, the join phase completing, every SyncGroup."""
    coord, clock = _shard()

    def run() -> object:
        return _form(coord, clock, "big", REBALANCE_MEMBERS)

    return run


def _write_log(directory: str, records: int) -> None:
    """A partition log of `records` offset commits (100 per append, one group's worth of keys each)."""
    from groupcoord.storage import PartitionLog

    clock = ManualClock(1_700_000_000_000)
    with PartitionLog(directory, sync="never", clock=clock) as plog:
        coord = GroupCoordinator(_CONFIG, clock, plog)
        for i in range(records // 100):
            offsets = {TopicPartition(f"t{i % 7}", p): OffsetAndMetadata(i, "m") for p in range(100)}
            coord.commit_offsets(OffsetCommitRequest(f"g{i % 1000}", offsets))
        plog.flush()


def prepare_logs(data: Path) -> None:
    """Write the logs the storage workloads read (natively, before the counted run starts)."""
    _write_log(str(data / "replay"), REPLAY_RECORDS)


def replay_20k(data: Path) -> Workload:
    """Open a log of 20,000 offset commits (its checks and recovery) and replay it into a fresh shard."""
    from groupcoord.storage import PartitionLog

    directory = str(data / "replay")

    def run() -> object:
        with PartitionLog(directory, sync="never", clock=ManualClock(1_700_000_000_000)) as plog:
            coord = GroupCoordinator(_CONFIG, ManualClock(1_700_000_000_000), MemoryLog())
            coord.load(r for batch in plog.replay_batches() for r in batch)
        return coord

    return run


def columnar_read(data: Path) -> Workload:
    """Read the 20,000 records' entries in bulk for the columnar decoder (storage's half of columnar decoding)."""
    from groupcoord.storage.columnar import read_entries

    directory = str(data / "replay")

    def run() -> object:
        return read_entries(directory)

    return run


def bulk_replay_20k(data: Path) -> Workload:
    """Decode the 20,000 records' log in bulk (the compiled scan, as a restarting actor does) into a fresh shard.

    It counts the precompiled kernels (storage.kernels): numba's JIT would take minutes to import under valgrind.
    """
    from groupcoord.storage import kernels
    from groupcoord.storage.bulk_replay import bulk_load

    compiled = kernels.precompiled()
    if compiled is None:
        raise RuntimeError("the scan kernels are not precompiled: run `make kernels`")
    directory = str(data / "replay")

    def run() -> object:
        coord = GroupCoordinator(_CONFIG, ManualClock(1_700_000_000_000), MemoryLog())
        plan = bulk_load(directory, compiled=compiled, records_at_most=REPLAY_RECORDS)  # as the runtime sizes it
        assert plan is not None
        coord.load_bulk(plan)
        return coord

    return run


def consumer_lag(data: Path) -> Workload:
    """The consumer lag the metrics publish: 200 groups of 100 committed offsets, end offsets known for one topic
    of their ten (the other topics' offsets must cost next to nothing)."""
    from groupcoord.protocol.shard.stats import consumer_lag as lags

    coord, _ = _shard()
    for g in range(LAG_GROUPS):
        coord.commit_offsets(OffsetCommitRequest(f"g{g}", {
            TopicPartition(f"topic-{t}", p): OffsetAndMetadata(g + p, "")
            for t in range(LAG_TOPICS) for p in range(LAG_PARTITIONS)}))
    ends = {"topic-0": {p: 1000 for p in range(LAG_PARTITIONS)}}

    def run() -> object:
        return sum(item.lag for item in lags(coord.offsets.items(), ends))

    return run


WORKLOADS: dict[str, Callable[[Path], Workload]] = {
    "commit_apply": commit_apply,
    "heartbeat": heartbeat,
    "session_timers": session_timers,
    "join_sync_1000": join_sync_1000,
    "replay_20k": replay_20k,
    "columnar_read": columnar_read,
    "bulk_replay_20k": bulk_replay_20k,
    "consumer_lag": consumer_lag,
}


def counted(fn: Workload) -> object:
    """Run `fn` inside functools.reduce, the C function whose calls the runner has callgrind count and dump."""
    return functools.reduce(lambda _a, _b: fn(), (0, 0))


# Callgrind's client requests (valgrind/callgrind.h), for a runner that starts callgrind with
# --instr-atstart=no: `main` turns instrumentation on around each counted call and off after it.
# What is counted does not change (collection is still toggled by functools_reduce alone), only
# what runs instrumented. A client request is an instruction sequence that does nothing natively
# (it returns its default, 0) and that valgrind recognises; Python runs it as a small machine-code
# stub called through ctypes. x86-64 only: elsewhere the runner instruments from the start.
_START_INSTRUMENTATION, _STOP_INSTRUMENTATION = 0x43540004, 0x43540005  # VG_USERREQ_TOOL_BASE('C','T') + 4, + 5
_CLIENT_REQUEST_X86_64 = bytes.fromhex(
    "4889f8"  # mov %rdi,%rax: the address of the request's 6 words, the stub's argument
    "31d2"  # xor %edx,%edx: the result natively
    "48c1c703" "48c1c70d" "48c1c73d" "48c1c733"  # rol %rdi by 3, 13, 61 and 51: valgrind's preamble, a no-op
    "4887db"  # xchg %rbx,%rbx: the request
    "4889d0"  # mov %rdx,%rax: its result
    "c3")  # ret
INSTRUMENT_COUNTED = "--instrument-counted"  # main's flag: turn instrumentation on around each counted call
_stub: list = []  # [the executable page, the function], once made


def client_request(request: int) -> int:
    """Issue a valgrind client request without arguments; its result (0 outside valgrind)."""
    if not _stub:
        if platform.machine() not in ("x86_64", "AMD64"):
            raise OSError(f"no client-request stub for {platform.machine()}")
        page = mmap.mmap(-1, mmap.PAGESIZE, prot=mmap.PROT_READ | mmap.PROT_WRITE | mmap.PROT_EXEC)
        page.write(_CLIENT_REQUEST_X86_64)
        function = ctypes.CFUNCTYPE(ctypes.c_uint64, ctypes.c_void_p)(ctypes.addressof(ctypes.c_char.from_buffer(page)))
        _stub.extend([page, function])
    words = (ctypes.c_uint64 * 6)(request)
    return _stub[1](ctypes.addressof(words))


def client_requests_work() -> bool:
    """Whether this machine can issue client requests (the runner then starts callgrind uninstrumented)."""
    try:
        return client_request(0) == 0  # natively a no-op
    except OSError:  # another architecture, or no executable memory
        return False


def main(argv: list[str]) -> None:
    """In the process valgrind runs: `DATA [--instrument-counted] NAME...` prepares and counts each workload in turn."""
    data, names = Path(argv[0]), argv[1:]
    instrument = INSTRUMENT_COUNTED in names
    for name in (n for n in names if n != INSTRUMENT_COUNTED):
        fn = WORKLOADS[name](data)
        # The collector starts each count from nothing pending: otherwise whether a collection falls in the
        # counted call depends on what was allocated before it (heartbeat's count moved 1.1% that way).
        gc.collect()
        if instrument:
            client_request(_START_INSTRUMENTATION)
        counted(fn)
        if instrument:
            client_request(_STOP_INSTRUMENTATION)


if __name__ == "__main__":
    main(sys.argv[1:])
