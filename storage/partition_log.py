"""PartitionLog: the durable, segmented, compacted log of one offsets partition.

It implements the shard's RecordLog (groupcoord.protocol.shard.log). `append` only encodes a batch and
stages it in memory; `flush`, run in a worker thread, writes everything staged in one write and
fsyncs according to the sync policy (group commit: whatever is appended during one fsync goes
out with the next). One lock guards the staged list and the offsets; it is never held while
writing or syncing. A failed write or fsync raises LogWriteError and leaves the log refusing
appends: the owner should crash and reopen, which recovers from what is on disk.

Sync policies: "always" (durable_offset advances only after fsync), "interval" (durable once
written; fsync at most every sync_interval_ms, checked on each flush), "never" (durable once
written; for tests and benchmarks).
"""

from __future__ import annotations

import itertools
import logging
import os
import threading
import time
import zlib
from collections import deque
from contextlib import closing
from pathlib import Path
from typing import Any, Callable, Generator, Iterator, Sequence

from groupcoord.protocol.commit_run import OffsetCommitRun
from groupcoord.protocol.records import Record, encode_batch

from .cleaner_process import ChildCleaner
from .columnar import exported_prefix, read_export_floor
from .compaction import CompactionResult, Compactor, ScanHere, StepHook, recover_directory
from .errors import CompactionError, CorruptLogError, LogClosedError, StorageError
from .fileops import OS_FILES, FileOps, makedirs_durably
from .framing import EntryScanner, entry_header
from .reader import Batch, LogRecord, OpenSegment, iter_log_records, read_opened
from .segment import Segment, list_segment_files, segment_file_name
from .writer import WriterFence

log = logging.getLogger(__name__)

SYNC_POLICIES = ("always", "interval", "never")
DEFAULT_SEGMENT_BYTES = 100 * 1024 * 1024
DEFAULT_SYNC_INTERVAL_MS = 1000
DEFAULT_TOMBSTONE_RETENTION_MS = 24 * 60 * 60 * 1000
DEFAULT_MIN_COMPACTION_BYTES = 1024 * 1024
DEFAULT_MIN_DIRTY_RATIO = 0.5
CLEANERS = ("process", "thread")


def wall_clock_ms() -> int:
    """Milliseconds since the epoch: the default clock for entry timestamps."""
    return time.time_ns() // 1_000_000


class PartitionLog:
    """The log of one offsets partition in its own directory (created if missing).

    Opening recovers: it finishes or undoes an interrupted compaction, cuts a torn tail off the
    last segment, and raises CorruptLogError for damage anywhere else. It holds the log's write
    lock and bumps its writer epoch (storage.writer) until closed. `clock` is a callable returning
    ms (or anything with `now_ms()`); `files` is the file-operation seam (tests simulate power
    loss or failing disks through it). `cleaner` says where a compaction reads and rewrites:
    "process" (storage.cleaner_process, the default on real files) or "thread" (the default
    with any other `files`, whose operations a child process would not go through).
    """

    def __init__(
        self,
        directory: str | os.PathLike[str],
        *,
        sync: str = "always",
        sync_interval_ms: int = DEFAULT_SYNC_INTERVAL_MS,
        segment_bytes: int = DEFAULT_SEGMENT_BYTES,
        tombstone_retention_ms: int = DEFAULT_TOMBSTONE_RETENTION_MS,
        min_compaction_bytes: int = DEFAULT_MIN_COMPACTION_BYTES,
        min_dirty_ratio: float = DEFAULT_MIN_DIRTY_RATIO,
        clock: Callable[[], int] | Any | None = None,
        files: FileOps | None = None,
        cleaner: str | None = None,
    ) -> None:
        if sync not in SYNC_POLICIES:
            raise ValueError(f"sync must be one of {SYNC_POLICIES}, not {sync!r}")
        if segment_bytes <= 0:
            raise ValueError(f"segment_bytes must be positive, not {segment_bytes}")
        if cleaner is not None and cleaner not in CLEANERS:
            raise ValueError(f"cleaner must be one of {CLEANERS}, not {cleaner!r}")
        self.directory = Path(directory)
        self.sync_policy = sync
        self.sync_interval_ms = sync_interval_ms
        self.segment_bytes = segment_bytes
        self.tombstone_retention_ms = tombstone_retention_ms
        self.min_compaction_bytes = min_compaction_bytes
        self.min_dirty_ratio = min_dirty_ratio
        if clock is None:
            clock = wall_clock_ms
        elif hasattr(clock, "now_ms"):
            clock = clock.now_ms
        self._clock: Callable[[], int] = clock
        self.files: FileOps = files if files is not None else OS_FILES
        self.cleaner = cleaner or ("process" if self.files is OS_FILES else "thread")
        self._lock = threading.Lock()  # the staged entries, _end and _failure
        self._flush_lock = threading.Lock()  # one flush at a time
        self._segments_lock = threading.Lock()  # the segment list and file swaps
        self._compaction_lock = threading.Lock()
        self._staged: list[bytes] = []
        self._failure: BaseException | None = None
        self._closed = False
        self._compaction_thread: threading.Thread | None = None
        self._background_error: BaseException | None = None
        # Plain counters for the owner's metrics: entries appended, bytes written, compactions (when, result).
        self.appends = 0
        self.bytes_written = 0
        self.compactions: deque[tuple[float, CompactionResult]] = deque(maxlen=16)
        self.compaction_count = 0
        # Compaction takes no record at or past this offset into account (a replicated leader's high
        # watermark: records above it may still be cut, so they must not replace committed ones). None: no cap.
        self.compaction_limit: int | None = None
        makedirs_durably(self.files, self.directory)
        self._fence = WriterFence(self.directory, self.files)
        try:
            self._segments = self._recover()
        except BaseException:
            self._fence.release()
            raise
        self._active = self._segments[-1]
        self._end = self._written = self._synced = self._durable = self._active.next_offset
        self._last_sync_ms = self._clock()

    # --- opening ---------------------------------------------------------------------------

    def _recover(self) -> list[Segment]:
        syncing = self.sync_policy != "never"
        recover_directory(self.directory, self.files)
        files = list_segment_files(self.directory)
        segments: list[Segment] = []
        for i, (base, path) in enumerate(files):
            last = i == len(files) - 1
            with open(path, "rb") as f:
                size = os.fstat(f.fileno()).st_size
                scanner = EntryScanner(f, path, size, min_offset=base, allow_torn_tail=last)
                last_count = None
                for entry in scanner:
                    last_count = entry.record_count
            if segments and segments[-1].next_offset > base:
                prev = segments[-1]
                reason = f"segment starts at offset {base} but {prev.path.name} reaches {prev.next_offset}"
                raise CorruptLogError(path, 0, reason)
            next_offset = scanner.next_offset if scanner.next_offset is not None else base
            seg = Segment(path, base, size, next_offset, clean=last_count == 0, files=self.files)
            if scanner.torn_reason is not None:
                log.warning(
                    "%s: cutting a torn tail at byte %d (%d bytes): %s",
                    path, scanner.end, size - scanner.end, scanner.torn_reason,
                )
                seg.truncate(scanner.end)
            segments.append(seg)
        if not segments:
            segments.append(Segment(self.directory / segment_file_name(0), 0, 0, 0, clean=False, files=self.files))
        active = segments[-1]
        active.open_for_append()
        if syncing:
            active.sync()  # what recovery kept is reported durable, so make it so
            self.files.fsync_directory(self.directory)
        log.info("%s: opened %d segments, end offset %d", self.directory, len(segments), active.next_offset)
        return segments

    # --- RecordLog -------------------------------------------------------------------------

    def append(self, records: Sequence[Record]) -> int:
        """Stage `records` as one entry (no I/O) and return the log end offset after them."""
        n = len(records)
        if n == 0:
            self._check_usable()
            return self._end
        # A commit's run of records encodes itself from its columns.
        payload = records.encode() if type(records) is OffsetCommitRun else encode_batch(records)
        crc = zlib.crc32(payload)
        ts = self._clock()
        with self._lock:
            self._check_usable()
            base = self._end
            self._staged.append(entry_header(base, n, ts, payload, crc))
            self._staged.append(payload)
            self._end = base + n
            self.appends += 1
            return self._end

    def append_at(self, base_offset: int, records: Sequence[Record]) -> int:
        """Stage `records` from `base_offset`, at or past the end (a follower copying a compacted log keeps gaps)."""
        if base_offset < self._end:
            raise ValueError(f"{self.directory}: cannot append at {base_offset}, below the end offset {self._end}")
        if not records:
            return self._end
        with self._lock:
            self._end = base_offset
        return self.append(records)

    def check_writer(self) -> None:
        """StaleWriterError if a newer writer opened this log since (what a writer checks before a write)."""
        self._fence.check()

    @property
    def durable_offset(self) -> int:
        """Records below this offset are durable under the sync policy."""
        return self._durable

    @property
    def end_offset(self) -> int:
        """The offset the next appended record will get (staged records included)."""
        return self._end

    @property
    def written_offset(self) -> int:
        """Records below this offset were written to the segment file (maybe not fsynced)."""
        return self._written

    def flush(self) -> int:
        """Write every staged entry in one write, fsync per the sync policy; returns durable_offset."""
        with self._flush_lock:
            with self._lock:
                self._check_usable()
                staged, self._staged = self._staged, []
                end = self._end
            try:
                if staged:
                    self._write(b"".join(staged), end)
                self._sync_if_due(force=False)
            except BaseException as e:
                self._fail(e)
                raise
            return self._durable

    def sync(self) -> int:
        """Flush, then fsync whatever was written and not yet synced, whatever the policy."""
        self.flush()
        with self._flush_lock:
            try:
                self._sync_if_due(force=True)
            except BaseException as e:
                self._fail(e)
                raise
            return self._durable

    def _write(self, data: bytes, end: int) -> None:
        first = self._written
        self._fence.check()
        active = self._active
        if active.size > 0 and active.size + len(data) > self.segment_bytes:
            active = self._roll(first)
        active.write(data)
        self.bytes_written += len(data)
        active.next_offset = end
        self._written = end

    def _roll(self, base: int) -> Segment:
        old = self._active
        if self.sync_policy != "never":
            old.sync()
            self._synced = self._written
        old.close()
        new = Segment(self.directory / segment_file_name(base), base, 0, base, clean=False, files=self.files)
        if new.path.exists():
            raise CorruptLogError(new.path, 0, "a segment file for the next offset already exists")
        new.open_for_append()
        if self.sync_policy != "never":
            self.files.fsync_directory(self.directory)
        with self._segments_lock:
            self._segments.append(new)
            self._active = new
        log.debug("%s: rolled to segment %s", self.directory, new.path.name)
        return new

    def _sync_if_due(self, force: bool) -> None:
        policy = self.sync_policy
        if self._written > self._synced:
            now = self._clock()
            due = (
                force
                or policy == "always"
                or (policy == "interval" and not 0 <= now - self._last_sync_ms < self.sync_interval_ms)
            )
            if due:
                self._active.sync()
                self._synced = self._written
                self._last_sync_ms = now
        self._durable = self._synced if policy == "always" else self._written

    def _check_usable(self) -> None:
        if self._failure is not None:
            raise LogClosedError(
                f"log {self.directory} failed earlier and refuses appends; reopen it to recover"
            ) from self._failure
        if self._closed:
            raise LogClosedError(f"log {self.directory} is closed")

    def _fail(self, error: BaseException) -> None:
        with self._lock:
            if self._failure is None:
                self._failure = error
                log.error("%s: log failed, refusing further appends: %s", self.directory, error)

    @property
    def failed(self) -> bool:
        """Whether a write, fsync or compaction swap failed (the log then refuses appends)."""
        return self._failure is not None

    # --- reading ---------------------------------------------------------------------------

    def _snapshot(self) -> list[OpenSegment]:
        with self._segments_lock:
            opened: list[OpenSegment] = []
            try:
                for seg in self._segments:
                    opened.append(OpenSegment(seg.base_offset, seg.path, open(seg.path, "rb"), seg.size))
            except BaseException:
                for o in opened:
                    o.file.close()
                raise
            return opened

    def _batches(self, start_offset: int) -> Generator[Batch, None, None]:
        # A generator, so that the snapshot is taken at the first next().
        yield from read_opened(self._snapshot(), start_offset)

    def iter_records(self, start_offset: int = 0) -> Iterator[Record]:
        """Every written record from start_offset on, in order (a snapshot taken at the first next())."""
        with closing(self._batches(start_offset)) as batches:
            for batch in batches:
                yield from batch.records

    def replay(self) -> Iterator[Record]:
        """Every record of the log in order: what a restarted shard loads."""
        return itertools.chain.from_iterable(self.replay_batches())

    def replay_batches(self) -> Iterator[list[Record]]:
        """The records of the log in order, a list per entry (as appended): replay without a step per record."""
        with closing(self._batches(0)) as batches:
            for batch in batches:
                yield batch.records

    def read(self, start_offset: int = 0) -> Iterator[LogRecord]:
        """Like iter_records, with each record's offset and append timestamp."""
        return iter_log_records(self._batches(start_offset))

    # --- compaction ------------------------------------------------------------------------

    def segments(self) -> list[Segment]:
        """A copy of the current segment list, oldest first; the last one is active."""
        with self._segments_lock:
            return list(self._segments)

    def _replace_segments(self, old: list[Segment], new: Segment) -> None:
        i = self._segments.index(old[0])
        if self._segments[i : i + len(old)] != old:
            raise StorageError(f"{self.directory}: compaction lost track of the segment list")
        self._segments[i : i + len(old)] = [new]

    def compact(self, *, on_step: StepHook | None = None) -> CompactionResult:
        """Compact the closed segments now (see storage.compaction); safe beside append and flush."""
        with self._compaction_lock:
            self._check_usable()
            with self._segments_lock:
                # Only segments the export has wholly taken (export.floor); the first one kept is the cap.
                closed = self._compactable()
                active = self._segments[len(closed)]
                # Only what the last fsync made durable: compaction must never remove a record whose
                # replacement a power loss could still take away; and nothing past the compaction limit.
                active_size = active.size if self.sync_policy == "never" else active.synced_size
                if self.compaction_limit is not None and active.next_offset > self.compaction_limit:
                    # (records of the first kept segment below the limit are not counted as later versions:
                    # compaction then keeps more, never less)
                    active_size = 0
            if not closed:
                return CompactionResult()
            compactor = Compactor(
                self.directory,
                closed,
                active,
                active_size,
                segment_bytes=self.segment_bytes,
                now_ms=self._clock(),
                tombstone_retention_ms=self.tombstone_retention_ms,
                lock=self._segments_lock,
                replace=self._replace_segments,
                files=self.files,
                fence=self._fence.check,
                on_step=on_step,
                work=ChildCleaner if self.cleaner == "process" else ScanHere,
            )
            try:
                result = compactor.run()
            except BaseException as e:
                if compactor.committed:
                    self._fail(e)
                raise
            self.compactions.append((time.time(), result))
            self.compaction_count += 1
            return result

    def _compactable(self) -> list[Segment]:
        """The closed segments compaction may rewrite: those the export has taken, wholly below the limit."""
        closed = exported_prefix(self._segments[:-1], self._segments[-1], read_export_floor(self.directory))
        limit = self.compaction_limit
        if limit is not None:
            ends = [s.base_offset for s in self._segments[1 : len(closed) + 1]]  # a segment ends where the next begins
            closed = [seg for seg, end in zip(closed, ends, strict=True) if end <= limit]
        return closed

    def compaction_due(self) -> bool:
        """Whether enough closed bytes were never compacted (the trigger of maybe_compact)."""
        with self._segments_lock:
            closed = self._compactable()
        total = sum(s.size for s in closed)
        dirty = sum(s.size for s in closed if not s.clean)
        return dirty > 0 and dirty >= self.min_compaction_bytes and dirty >= self.min_dirty_ratio * total

    def maybe_compact(self) -> bool:
        """Start a background compaction if one is due and none runs; True if it started one.

        Raises the error of a failed earlier background compaction (once), so that it is not lost.
        """
        error, self._background_error = self._background_error, None
        if error is not None:
            committed = getattr(error, "committed", False)
            message = f"background compaction of {self.directory} failed: {error}"
            raise CompactionError(message, committed) from error
        self._check_usable()
        if self.compacting or not self.compaction_due():
            return False
        thread = threading.Thread(target=self._compact_in_background, name=f"compact {self.directory.name}")
        thread.daemon = True
        self._compaction_thread = thread
        thread.start()
        return True

    def _compact_in_background(self) -> None:
        try:
            self.compact()
        except BaseException as e:
            log.exception("%s: background compaction failed", self.directory)
            self._background_error = e

    @property
    def compacting(self) -> bool:
        """Whether a background compaction is running."""
        thread = self._compaction_thread
        return thread is not None and thread.is_alive()

    def join_compaction(self, timeout: float | None = None) -> None:
        """Wait for a background compaction to finish."""
        thread = self._compaction_thread
        if thread is not None:
            thread.join(timeout)

    # --- closing ---------------------------------------------------------------------------

    def close(self) -> None:
        """Wait for compaction, flush and fsync what is staged (unless the log failed), close files."""
        if self._closed:
            return
        self.join_compaction()
        try:
            if self._failure is None:
                if self.sync_policy == "never":
                    self.flush()
                else:
                    self.sync()
        finally:
            with self._lock:
                self._closed = True
            self._active.close()
            self._fence.release()

    def __enter__(self) -> PartitionLog:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    def __repr__(self) -> str:
        return (
            f"PartitionLog({str(self.directory)!r}, sync={self.sync_policy!r}, end={self._end}, "
            f"durable={self._durable}, segments={len(self._segments)})"
        )
