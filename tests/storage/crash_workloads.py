"""Storage workloads run under the power-loss harness, and the invariant checked after each crash.

A workload runs from an empty root through a PowerLossFiles and records, as it goes, what was
acknowledged. `crash_points` runs it once to count its operations, then again for each chosen
crash point: cut the power before that operation, pull the plug (exactly to the durable state,
or keeping a random subset of the unsynced operations), reopen with the real file system and
check the invariant: every acknowledged record is returned with its value or a later one, what
is returned is what was appended at that offset, nothing raises CorruptLogError, and the log
still takes appends.
"""

from __future__ import annotations

import random
import shutil
from collections.abc import Callable, Iterable
from dataclasses import dataclass, field
from pathlib import Path

from powerloss import NoSyncFiles, PowerCut, PowerLossFiles
from storage_helpers import ManualMs, commit, flat, random_batches

from groupcoord.protocol.records import Record
from groupcoord.storage import FileOps, PartitionLog, StorageRoot
from groupcoord.storage.epoch_checkpoint import EpochState, LeaderEpochCheckpoint
from groupcoord.storage.topics import TopicRegistry, read_end_offset_history

NO_SYNC = NoSyncFiles()


@dataclass
class Progress:
    """What a workload appended (by offset) and acknowledged so far."""

    appended: list[Record] = field(default_factory=list)
    acked: int = 0  # records below this offset were acknowledged as durable
    topics: dict[str, int] = field(default_factory=dict)  # acknowledged topic -> partitions
    reports: list[tuple[str, int, int]] = field(default_factory=list)  # acknowledged end offsets
    root_created: bool = False
    promised: int = 0  # the last leader epoch a replica acknowledged promising
    history: tuple = ()  # the (epoch, start offset) history last acknowledged as written


@dataclass(frozen=True)
class Workload:
    """A named storage scenario: `run(files, root, progress)`, `recover(files, root)` (what reopening
    writes, for crashes during recovery) and `check(root, progress)`."""

    name: str
    run: Callable[[PowerLossFiles, Path, Progress], None]
    check: Callable[[Path, Progress], None]
    recover: Callable[[FileOps, Path], None]


# --- the partition log ------------------------------------------------------------------------


def check_log(directory: Path, progress: Progress, files=None) -> None:
    """Reopen the log and check the invariant against what was appended and acknowledged."""
    appended, acked = progress.appended, progress.acked
    plog = PartitionLog(directory, sync="always", files=files or NO_SYNC)
    try:
        last_at: dict[tuple, int] = {}
        previous = -1
        for offset, _ts, record in plog.read():
            assert previous < offset < len(appended), f"offset {offset} after {previous}, {len(appended)} appended"
            assert record == appended[offset], f"offset {offset} holds {record}, not {appended[offset]}"
            previous = offset
            last_at[(type(record.key), record.key)] = offset
        assert plog.end_offset >= acked, f"end offset {plog.end_offset} below the acknowledged {acked}"
        acked_at: dict[tuple, int] = {}
        for offset in range(acked):
            acked_at[(type(appended[offset].key), appended[offset].key)] = offset
        for k, o in acked_at.items():
            if k in last_at:
                assert last_at[k] >= o, f"{k} went back from offset {o} to {last_at[k]}"
            else:
                later = [appended[i] for i in range(o, len(appended)) if (type(appended[i].key), appended[i].key) == k]
                assert any(r.value is None for r in later), f"acknowledged {k} at offset {o} vanished"
        end = plog.append([commit("after-crash", "t", 0, 1)])
        assert plog.flush() == end
    finally:
        plog.close()


def _log_run(sync: str, segment_bytes: int, batches: list[list[Record]], plan: str) -> Callable:
    """A run appending `batches` and following `plan`, one letter per batch: f flush, s sync, c compact."""

    def run(files: PowerLossFiles, root: Path, progress: Progress) -> None:
        clock = ManualMs()
        plog = PartitionLog(root / "p", sync=sync, segment_bytes=segment_bytes, tombstone_retention_ms=0,
                            clock=clock, files=files)
        for batch, action in zip(batches, plan, strict=True):
            plog.append(batch)
            progress.appended.extend(batch)
            clock.advance(10)
            if action == "f":
                durable = plog.flush()
                if sync == "always":
                    progress.acked = durable
            elif action == "s":
                progress.acked = plog.sync()
            elif action == "c":
                plog.flush()
                plog.compact()
        progress.acked = plog.sync()
        plog.close()

    return run


def _log_check(root: Path, progress: Progress) -> None:
    check_log(root / "p", progress)


def _log_recover(files: FileOps, root: Path) -> None:
    PartitionLog(root / "p", sync="always", files=files).close()


def log_workloads(seed: int = 1, scale: int = 1) -> list[Workload]:
    """The partition-log scenarios: appends with group commit and rolls, interval sync, compaction."""
    rng = random.Random(seed)
    n = 12 * scale
    batches = random_batches(seed, n, max_batch=4, keys=12)
    group = "".join(rng.choice("f.") for _ in range(n - 1)) + "f"
    interval = "".join(rng.choice("f.s") for _ in range(n - 1)) + "s"
    compacting = "".join("c" if i % 5 == 4 else "f" for i in range(n))
    compacting_interval = "".join("c" if i % 5 == 4 else rng.choice("ffs") for i in range(n))

    def scenario(name: str, sync: str, segment_bytes: int, plan: str) -> Workload:
        return Workload(f"{name}/{seed}", _log_run(sync, segment_bytes, batches, plan), _log_check, _log_recover)

    return [
        scenario("append-group-commit-roll", "always", 300, group),
        scenario("interval-sync", "interval", 400, interval),
        scenario("compaction", "always", 250, compacting),
        scenario("compaction-interval", "interval", 250, compacting_interval),
    ]


# --- the storage root and the topic registry ---------------------------------------------------------


def _root_run(files: PowerLossFiles, root: Path, progress: Progress) -> None:
    storage = StorageRoot(root / "root", 2, files=files)
    progress.root_created = True
    plog = storage.open_partition(1, sync="always")
    batch = [commit("g", "t", 0, 5), commit("g", "t", 1, 6)]
    plog.append(batch)
    progress.appended.extend(batch)
    progress.acked = plog.flush()
    plog.close()


def _root_check(root: Path, progress: Progress) -> None:
    storage = StorageRoot(root / "root", 2, create=not progress.root_created, files=NO_SYNC)
    assert storage.missing_partitions() == [], "a crash left the root listing a partition without a directory"
    check_log(storage.partition_dir(1), progress)


def _topics_run(files: PowerLossFiles, root: Path, progress: Progress) -> None:
    registry = TopicRegistry(root / "root", clock_ms=lambda: 1000, files=files)
    for i, name in enumerate(("orders", "payments")):
        registry.create(name, 2 + i)
        progress.topics[name] = 2 + i
    for offset in (10, 20, 30):
        registry.report_end_offsets("orders", {0: offset, 1: offset + 1})
        progress.reports += [("orders", 0, offset), ("orders", 1, offset + 1)]
    registry.set_partitions("payments", 5)
    progress.topics["payments"] = 5
    registry.report_end_offsets("payments", {4: 7})
    progress.reports.append(("payments", 4, 7))


def _topics_check(root: Path, progress: Progress) -> None:
    registry = TopicRegistry(root / "root", clock_ms=lambda: 2000, files=NO_SYNC)
    for name, partitions in progress.topics.items():
        assert registry.topics[name].partitions >= partitions, f"topic {name} lost partitions"
    history = {(r["topic"], r["partition"], r["offset"]) for r in read_end_offset_history(root / "root")}
    for topic, p, offset in progress.reports:
        assert registry.topics[topic].end_offsets[p] >= offset, f"{topic}-{p} end offset went back"
        assert (topic, p, offset) in history, f"acknowledged report {topic}-{p}={offset} missing from the history"
    if "orders" not in registry.topics:
        registry.create("orders", 2)
    registry.report_end_offsets("orders", {0: 99})  # and it still takes reports that read back whole
    assert {"topic": "orders", "partition": 0, "offset": 99, "timestamp": 2000} in list(
        read_end_offset_history(root / "root"))


def _epochs_run(files: PowerLossFiles, root: Path, progress: Progress) -> None:
    """A replica's election state: it promises epochs 1..5 and records each as one it led from then on."""
    checkpoint = LeaderEpochCheckpoint(root / "replica", files)
    state = EpochState()
    for epoch in range(1, 6):
        state = EpochState(epoch, state.history)
        checkpoint.write(state)  # a promise is answered only after this returns
        progress.promised = epoch
        state = state.with_epoch_start(epoch, epoch * 10)
        checkpoint.write(state)
        progress.history = state.history


def _epochs_check(root: Path, progress: Progress) -> None:
    state = LeaderEpochCheckpoint(root / "replica", NO_SYNC).read()
    assert state.promised_epoch >= progress.promised, "a replica forgot an epoch it had promised"
    assert state.history[: len(progress.history)] == progress.history, "an acknowledged epoch start was lost"


def root_workloads() -> list[Workload]:
    """The storage root's creation, the topic registry's updates and a replica's epoch promises."""
    return [
        Workload("root-metadata", _root_run, _root_check, _root_recover),
        Workload("topics-registry", _topics_run, _topics_check, _topics_recover),
        Workload("epoch-promises", _epochs_run, _epochs_check,
                 lambda files, root: LeaderEpochCheckpoint(root / "replica", files).read()),
    ]


def _root_recover(files: FileOps, root: Path) -> None:
    StorageRoot(root / "root", 2, files=files).open_partition(1).close()


def _topics_recover(files: FileOps, root: Path) -> None:
    TopicRegistry(root / "root", files=files)


# --- driving crash points -------------------------------------------------------------------------


def count_operations(workload: Workload, root: Path) -> int:
    """How many seam operations the workload makes when nothing crashes."""
    _reset(root)
    files = PowerLossFiles(root)
    workload.run(files, root, Progress())
    return files.ops


def _run_until_cut(workload: Workload, root: Path, point: int, rng: random.Random | None) -> Progress:
    """Run the workload from an empty root with the power cut before operation `point`, then pull the plug."""
    _reset(root)
    files = PowerLossFiles(root)
    files.cut_after(point)
    progress = Progress()
    try:
        workload.run(files, root, progress)
    except PowerCut:
        pass
    files.pull_plug(rng)
    return progress


def crash_at(workload: Workload, root: Path, point: int, rng: random.Random | None) -> None:
    """Run the workload with the power cut before operation `point`, pull the plug, check the invariant."""
    progress = _run_until_cut(workload, root, point, rng)
    try:
        workload.check(root, progress)
    except BaseException as e:
        variant = "exact" if rng is None else "random subset"
        raise AssertionError(f"{workload.name}: crash before operation {point} ({variant}): {e}") from e


def crash_in_recovery(workload: Workload, root: Path, point: int, recovery_point: int, rng: random.Random) -> bool:
    """Crash at `point`, then again at operation `recovery_point` of reopening; check. False if recovery had fewer."""
    progress = _run_until_cut(workload, root, point, rng)
    again = PowerLossFiles(root)
    again.cut_after(recovery_point)
    try:
        workload.recover(again, root)
        return False
    except PowerCut:
        pass
    except BaseException as e:
        raise AssertionError(f"{workload.name}: recovery after a crash before operation {point} failed: {e}") from e
    again.pull_plug(rng)
    try:
        workload.check(root, progress)
    except BaseException as e:
        raise AssertionError(
            f"{workload.name}: crash before operation {point}, then before operation {recovery_point} of "
            f"recovery: {e}") from e
    return True


def crash_points(workload: Workload, root: Path, points: Iterable[int], seeds: Iterable[int | None]) -> int:
    """Check every (crash point, seed) pair (seed None: exactly the durable state); returns how many."""
    seeds = list(seeds)
    done = 0
    for point in points:
        for seed in seeds:
            crash_at(workload, root, point, None if seed is None else random.Random(seed * 7919 + point))
            done += 1
    return done


def _reset(root: Path) -> None:
    if root.exists():
        shutil.rmtree(root)
    root.mkdir(parents=True)


def all_workloads(seeds: Iterable[int] = (1,), scale: int = 1) -> list[Workload]:
    """Every scenario: the log ones per seed, and the root and registry ones."""
    return [w for s in seeds for w in log_workloads(s, scale)] + root_workloads()


__all__ = [
    "Progress", "Workload", "all_workloads", "check_log", "count_operations", "crash_at", "crash_in_recovery",
    "crash_points", "flat",
]
