"""Log compaction: keep the latest record per key, drop old tombstones, swap segments crash-safely.

Compaction rewrites the closed segments (never the active one). It reads the whole log once to
find the offset of the latest record of every key (keys are compared as `(type(key), key)`),
then rewrites the closed segments in groups of consecutive segments, keeping only those latest
records and dropping a latest record that is a tombstone older than the retention (by its
entry's timestamp). Surviving records keep their offsets and their relative order; a run of
survivors from one entry becomes one entry with the original timestamp, and every rewritten
segment ends with an extent marker (framing.marker_entry) so it knows the range it covers.

Swap protocol, one group at a time and in log order (like Kafka's LogCleaner). A group
replaces the segments with base offsets in [B, E), where B is its first segment's base and E
the next segment's base, by one segment named after B:

1. write `B.log.cleaned` and fsync it;
2. rename it to `B.log.swap` and fsync the directory -- the commit point;
3. delete the group's other segments (bases in (B, E)) and fsync the directory;
4. rename `B.log.swap` over `B.log` and fsync the directory.

On open, `recover_directory` deletes every `*.log.cleaned` (a crash before step 2: the old
segments are intact) and completes every `*.log.swap` (a crash after step 2): it reads E from
the swap file's extent marker, deletes the segments with bases in (B, E) and renames the swap
over `B.log`. Either way the directory replays to the same state as before or after the group.
Groups go in log order so that a tombstone is dropped only after every older record of its key
was removed from the earlier groups.

The reading (the survivors) and the writing of step 1 are a CleanerWork: in the calling thread
(`ScanHere`) or in a child process (storage.cleaner_process); steps 2-4 always run here.
"""

from __future__ import annotations

import bisect
import functools
import logging
import os
import time
from contextlib import AbstractContextManager
from dataclasses import dataclass
from pathlib import Path
from typing import BinaryIO, Callable, Protocol

from .errors import CompactionError
from .fileops import OS_FILES, FileOps, write_all
from .framing import BatchDecoder, EntryScanner, frame_entry, marker_entry
from .segment import Segment, list_segment_files, parse_segment_file_name, segment_file_name

log = logging.getLogger(__name__)

CLEANED_SUFFIX = ".cleaned"
SWAP_SUFFIX = ".swap"

StepHook = Callable[[str], None]
_WRITE_CHUNK_BYTES = 1 << 20


@dataclass
class CompactionResult:
    """What one compaction did (counts cover the closed segments it considered)."""

    segments_before: int = 0
    segments_after: int = 0
    records_before: int = 0
    records_after: int = 0
    bytes_before: int = 0
    bytes_after: int = 0
    tombstones_dropped: int = 0
    groups_rewritten: int = 0
    seconds: float = 0.0


def swap_extent_end(file: BinaryIO, path: Path, base_offset: int) -> int:
    """The end of the offset range that the swap file open as `file` replaces (its extent marker)."""
    scanner = EntryScanner(file, path, os.fstat(file.fileno()).st_size, min_offset=base_offset)
    for _ in scanner:
        pass
    return scanner.next_offset if scanner.next_offset is not None else base_offset


def recover_directory(directory: Path, files: FileOps = OS_FILES) -> bool:
    """Finish or undo a compaction a crash interrupted (see the module docstring); True if it did."""
    try:
        names = sorted(os.listdir(directory))
    except FileNotFoundError:
        return False
    changed = False
    for name in names:
        if name.endswith(".log" + CLEANED_SUFFIX):
            log.warning("%s: removing unfinished compaction output %s", directory, name)
            files.unlink(directory / name)
            changed = True
    for name in names:
        if not name.endswith(".log" + SWAP_SUFFIX):
            continue
        target = name[: -len(SWAP_SUFFIX)]
        base = parse_segment_file_name(target)
        if base is None:
            continue
        swap = directory / name
        with open(swap, "rb") as f:
            end = swap_extent_end(f, swap, base)
        log.warning("%s: completing interrupted compaction %s covering [%d, %d)", directory, name, base, end)
        for b, path in list_segment_files(directory):
            if base < b < end:
                files.unlink(path)
        files.fsync_directory(directory)
        files.rename(swap, directory / target)
        changed = True
    if changed:
        files.fsync_directory(directory)
    return changed


class CleanerWork(Protocol):
    """Where a compaction reads the log and writes its cleaned files: the compacting thread
    (`ScanHere`), or a child process (storage.cleaner_process)."""

    def survivors(self) -> tuple[list[int], int, list[int]]:
        """Records kept in each closed segment, tombstones dropped, and records in each closed segment."""
        ...

    def write(self, first: int, last: int, end: int, cleaned: Path) -> int:
        """Write the survivors of closed segments first..last (up to offset `end`) to `cleaned`, fsynced;
        its size in bytes. Raises OSError when that fails."""
        ...

    def close(self) -> None:
        """Release what the work holds (called once, whether the compaction succeeded or not)."""
        ...


class ScanHere:
    """A compaction's reading and writing in the calling thread."""

    def __init__(self, compactor: Compactor) -> None:
        self.compactor = compactor
        self.keep: list[int] = []

    def survivors(self) -> tuple[list[int], int, list[int]]:
        """See CleanerWork.survivors."""
        c = self.compactor
        self.keep, dropped, totals = c._find_survivors()
        bounds = [s.base_offset for s in c.closed] + [c.active.base_offset]
        kept = [bisect.bisect_left(self.keep, bounds[i + 1]) - bisect.bisect_left(self.keep, bounds[i])
                for i in range(len(c.closed))]
        return kept, dropped, totals

    def write(self, first: int, last: int, end: int, cleaned: Path) -> int:
        """See CleanerWork.write."""
        return self.compactor._write_cleaned(cleaned, self.compactor.closed[first : last + 1], end, self.keep)

    def close(self) -> None:
        """Nothing to release."""


class Compactor:
    """One compaction run over a snapshot of the closed segments (see the module docstring).

    `lock` guards the segment list of the log: the file swaps run under it, together with
    `replace(old_segments, new_segment)`, which updates the log's list. `on_step` is called
    after each step of the swap protocol ("cleaned", "swap", "deleted", "installed"); tests
    use it to simulate a crash between steps. `active_size` bounds the scan of the active segment
    (its durable bytes); `fence` raises if this writer was replaced, before anything is written.
    `work` makes the CleanerWork that reads and rewrites the segments (default: this thread).
    """

    def __init__(
        self,
        directory: Path,
        closed: list[Segment],
        active: Segment,
        active_size: int,
        *,
        segment_bytes: int,
        now_ms: int,
        tombstone_retention_ms: int,
        lock: AbstractContextManager,
        replace: Callable[[list[Segment], Segment], None],
        files: FileOps = OS_FILES,
        fence: Callable[[], None] = lambda: None,
        on_step: StepHook | None = None,
        work: Callable[[Compactor], CleanerWork] = ScanHere,
    ) -> None:
        self.directory = directory
        self.closed = closed
        self.active = active
        self.active_size = active_size
        self.segment_bytes = segment_bytes
        self.now_ms = now_ms
        self.retention_ms = tombstone_retention_ms
        self.lock = lock
        self.replace = replace
        self.files = files
        self.fence = fence
        self.on_step = on_step
        self.work = work
        self.committed = False

    def run(self) -> CompactionResult:
        """Compact the closed segments; raises CompactionError (with .committed) if it fails."""
        start = time.perf_counter()
        result = CompactionResult(
            segments_before=len(self.closed), bytes_before=sum(s.size for s in self.closed)
        )
        work = self.work(self)
        try:
            kept, dropped, totals = work.survivors()
            result.records_before = sum(totals)
            result.tombstones_dropped = dropped
            result.records_after = sum(kept)
            bounds = [s.base_offset for s in self.closed] + [self.active.base_offset]
            after: list[Segment] = []
            for first, last in self._groups(kept, totals):
                end = bounds[last + 1]
                segs = self.closed[first : last + 1]
                unchanged = kept[first] == totals[first] and segs[0].clean and segs[0].next_offset == end
                if len(segs) == 1 and unchanged:
                    after.append(segs[0])
                    continue
                after.append(self._rewrite(segs, end, functools.partial(work.write, first, last, end)))
                result.groups_rewritten += 1
        finally:
            work.close()
        result.segments_after = len(after)
        result.bytes_after = sum(s.size for s in after)
        result.seconds = time.perf_counter() - start
        log.info(
            "%s: compacted %d segments (%d records, %d bytes) into %d (%d records, %d bytes), "
            "dropped %d tombstones in %.3f s",
            self.directory, result.segments_before, result.records_before, result.bytes_before,
            result.segments_after, result.records_after, result.bytes_after,
            result.tombstones_dropped, result.seconds,
        )
        return result

    def _step(self, name: str) -> None:
        if self.on_step is not None:
            self.on_step(name)

    def _find_survivors(self) -> tuple[list[int], int, list[int]]:
        """Sorted offsets of the records to keep, tombstones dropped, and records per closed segment."""
        latest: dict[tuple[type, object], int] = {}
        tombstones: dict[tuple[type, object], int] = {}  # key -> timestamp, while its latest is a tombstone
        totals: list[int] = []
        sources = [(s, s.size) for s in self.closed] + [(self.active, self.active_size)]
        for seg, limit in sources:
            count = 0
            decoder = BatchDecoder(seg.path)
            with open(seg.path, "rb") as f:
                for entry in EntryScanner(f, seg.path, limit, min_offset=seg.base_offset):
                    offset = entry.base_offset
                    ts = entry.timestamp_ms
                    for record in decoder.decode(entry):
                        key = record.key
                        k: tuple[type, object] = (type(key), key)
                        latest[k] = offset
                        if record.value is None:
                            tombstones[k] = ts
                        elif k in tombstones:
                            del tombstones[k]
                        offset += 1
                    count += entry.record_count
            totals.append(count)
        totals.pop()  # the active segment's count is not needed
        end = self.active.base_offset
        cutoff = self.now_ms - self.retention_ms
        keep = []
        dropped = 0
        for k, offset in latest.items():
            dropped_at = tombstones.get(k)
            if dropped_at is not None and dropped_at < cutoff and offset < end:
                dropped += 1
            else:
                keep.append(offset)
        keep.sort()
        return keep, dropped, totals

    def _groups(self, kept: list[int], totals: list[int]) -> list[list[int]]:
        """Consecutive closed segments whose estimated compacted size fits in one segment."""
        groups: list[list[int]] = []
        size = 0
        for i, seg in enumerate(self.closed):
            estimate = seg.size * kept[i] // totals[i] if totals[i] else 0
            if groups and size + estimate <= self.segment_bytes:
                groups[-1].append(i)
                size += estimate
            else:
                groups.append([i])
                size = estimate
        return [[g[0], g[-1]] for g in groups]

    def _rewrite(self, segs: list[Segment], end: int, write: Callable[[Path], int]) -> Segment:
        base = segs[0].base_offset
        target = self.directory / segment_file_name(base)
        cleaned = target.with_name(target.name + CLEANED_SUFFIX)
        swap = target.with_name(target.name + SWAP_SUFFIX)
        self.fence()
        try:
            size = write(cleaned)
        except OSError as e:
            self._abandon(cleaned)
            raise CompactionError(f"compaction of {target} failed before its commit: {e}", False) from e
        self._step("cleaned")
        new = Segment(target, base, size, end, clean=True, files=self.files)
        with self.lock:
            self.fence()
            try:
                self.files.rename(cleaned, swap)
            except OSError as e:
                self._abandon(cleaned)
                raise CompactionError(f"compaction of {target} failed before its commit: {e}", False) from e
            self.committed = True  # until the group is installed: from here on, reopening finishes it
            try:
                self._install(segs, swap, target, steps=True)
            except OSError as e:
                log.warning("%s: compaction swap of %s failed (%s), finishing it again", self.directory, target, e)
                try:
                    self._install(segs, swap, target, steps=False)
                except OSError as again:
                    raise CompactionError(
                        f"compaction swap of {target} failed after its commit: {again}; the log refuses "
                        f"appends, reopen it to finish the swap",
                        True,
                    ) from again
            self.replace(segs, new)
            self.committed = False  # the group is installed, in memory too
            self._step("installed")
        return new

    def _abandon(self, cleaned: Path) -> None:
        """Remove the output of a group that failed before its commit (opening the log would, too)."""
        try:
            self.files.unlink(cleaned)
        except FileNotFoundError:
            pass  # it failed before its file was made
        except OSError as e:
            log.warning("%s: could not remove %s: %s", self.directory, cleaned.name, e)

    def _install(self, segs: list[Segment], swap: Path, target: Path, *, steps: bool) -> None:
        """Steps 2-4 after the rename to `.swap`; idempotent, so a failed attempt can be repeated."""
        files = self.files
        files.fsync_directory(self.directory)  # the commit point is durable
        if steps:
            self._step("swap")
        for seg in segs[1:]:
            try:
                files.unlink(seg.path)
            except FileNotFoundError:
                pass
        if len(segs) > 1:  # the deletions must be durable before the rename can be
            files.fsync_directory(self.directory)
        if steps:
            self._step("deleted")
        if os.path.exists(swap):
            files.rename(swap, target)
        files.fsync_directory(self.directory)

    def _write_cleaned(self, cleaned: Path, segs: list[Segment], end: int, keep: list[int]) -> int:
        keep_set = set(keep[bisect.bisect_left(keep, segs[0].base_offset) : bisect.bisect_left(keep, end)])
        written = 0
        files = self.files
        fd = files.create(cleaned)
        pending = bytearray()

        def out(data: bytes | memoryview) -> None:
            pending.extend(data)
            if len(pending) >= _WRITE_CHUNK_BYTES:
                write_all(files, fd, bytes(pending))
                pending.clear()

        try:
            for seg in segs:
                decoder = BatchDecoder(seg.path)
                with open(seg.path, "rb") as f:
                    for entry in EntryScanner(f, seg.path, seg.size, min_offset=seg.base_offset):
                        n = entry.record_count
                        if n == 0:
                            continue  # an old extent marker
                        base = entry.base_offset
                        flags = [o in keep_set for o in range(base, base + n)]
                        if all(flags):
                            out(entry.raw)
                            written += entry.size
                            continue
                        if not any(flags):
                            continue
                        ends = decoder.boundaries(entry)
                        payload = entry.payload
                        i = 0
                        while i < n:
                            if not flags[i]:
                                i += 1
                                continue
                            j = i
                            while j < n and flags[j]:
                                j += 1
                            start = ends[i - 1] if i else 0
                            run = bytes(payload[start : ends[j - 1]])
                            data = frame_entry(base + i, j - i, entry.timestamp_ms, run)
                            out(data)
                            written += len(data)
                            i = j
            marker = marker_entry(end, self.now_ms)
            out(marker)
            written += len(marker)
            write_all(files, fd, bytes(pending))
            files.fsync(fd)
        finally:
            files.close(fd)
        return written
