"""The runtime of one partition actor: loading its log, group commit, and the loops that fire its timers.

One event loop, no locks. The shard runs on the loop; the log's write+fsync runs in a worker
thread, once for everything appended since the last one (group commit); responses are released
when the shard says their records are durable. Timers wake the loop at the shard's next deadline
(on the monotonic clock) and fire for a bounded time per turn, so requests are served in between.
Every background loop runs under one LoopSupervisor. A failed write ends the process so that Ray
restarts the actor from disk; a failed compaction is logged, counted and retried while serving goes on.
"""

from __future__ import annotations

import asyncio
import gc
import itertools
import logging
import os
import time
from typing import Any, Callable

from groupcoord.protocol import Deferred
from groupcoord.protocol.offsets.columns import BulkLoad
from groupcoord.protocol.shard.clock import due_ms_of
from groupcoord.protocol.shard.coordinator import GroupCoordinator
from groupcoord.storage import PartitionLog, StorageRoot, kernels
from groupcoord.storage.bulk_replay import bulk_load
from groupcoord.storage.errors import CompactionError, LogClosedError

from .names import ROUTER_NAME
from .overload import LagProbe, coordinator_clock
from .process_exit import EXIT_FAILURE, exit_process
from .spec import ServiceSpec
from .supervisor import LoopSupervisor

log = logging.getLogger(__name__)

# Seconds between background compaction checks.
COMPACTION_CHECK_INTERVAL_S = 60.0

# How long the timer loop fires due timers (a session expiry, a retention step of 1,000 offsets: each
# one timer) before it yields to requests, as `batch` does.
TIMER_TURN_S = 0.002

# While the actor runs behind, the timer loop looks again this often (its lag, and so due time, moves).
_LAGGING_TIMER_CHECK_S = 0.1

# The timer loop puts in order only the timers due within this many ms of now: a later wake may come early
# and find nothing due (at most one such wake per this long), where ordering them all moved every re-armed
# session timer in the heap once per heartbeat (see Purgatory.next_deadline).
TIMER_HORIZON_MS = 100

_REPORT_TIMEOUT_S = 2.0  # how long a failing partition waits to tell the router why

# The shard's state is millions of small objects without reference cycles, which Python's cyclic
# GC would rescan again and again (a fifth of a busy actor's CPU with the default 700): collect
# young objects less often, and keep what the replay loaded out of its reach (gc.freeze).
_GC_THRESHOLDS = (10_000, 10, 10)


def _ignore_flush(_seconds: float, _records: int) -> None:
    pass


# Below this many records in its log a partition replays record by record. With the scan kernels precompiled
# (storage.kernels) the bulk scan has no fixed cost to speak of; without them, importing numba and loading its
# compiled code (about 0.55 CPU-s) is more than replaying 250,000 records.
BULK_REPLAY_MIN_RECORDS = 5_000
BULK_REPLAY_MIN_RECORDS_NUMBA = 250_000


def _bulk_plan(plog: PartitionLog) -> BulkLoad | None:
    """The log decoded in bulk, if it is long enough to gain (None where not, or where the scan cannot)."""
    least = BULK_REPLAY_MIN_RECORDS if kernels.precompiled() else BULK_REPLAY_MIN_RECORDS_NUMBA
    if plog.end_offset < least:
        return None
    return bulk_load(plog.directory, records_at_most=plog.end_offset)


class PartitionRuntime:
    """Owns a partition's shard and log on the actor's event loop, and runs its background loops."""

    def __init__(self, partition: int, spec: ServiceSpec) -> None:
        self.partition = partition
        self.spec = spec
        self.coord: GroupCoordinator | None = None
        self.log: Any = None
        self.root: StorageRoot | None = None
        self.load_ms: float | None = None
        self.load_cpu_ms: float | None = None
        self.loaded_at: float | None = None  # wall-clock time the shard started serving (its log replayed)
        self.records_replayed = 0
        self.load_mode: str | None = None  # how the log was replayed: "bulk" (by column) or "records"
        # Told the time and record count of every flush (the actor's telemetry sets it).
        self.on_flushed: Callable[[float, int], None] = _ignore_flush
        self.clock = coordinator_clock()  # the shard's deadlines run on coordinator time (see overload)
        self.lag = LagProbe(self.clock)
        self.compaction_interval_s = COMPACTION_CHECK_INTERVAL_S
        self._flushing = False
        self._wake = asyncio.Event()
        self._sleep_until: float = float("inf")  # monotonic ms the timer loop sleeps until
        self.loop = asyncio.get_running_loop()
        self.supervisor = LoopSupervisor(partition, lambda e: self.fail(e))
        gc.set_threshold(*_GC_THRESHOLDS)
        self._tasks = [self.loop.create_task(self._load())]

    # --- start-up --------------------------------------------------------------------------

    def _open_and_replay(self) -> tuple[Any, GroupCoordinator, int]:
        cpu = time.thread_time()
        root = self.root = StorageRoot(self.spec.storage_path, self.spec.num_partitions, create=False)
        plog = root.open_partition(self.partition, sync=self.spec.fsync, **self.spec.log.options())
        coord = GroupCoordinator(self.spec.config, self.clock, plog)
        count = 0

        def counted():
            nonlocal count
            for batch in plog.replay_batches():
                count += len(batch)
                yield batch

        gc.disable()  # replay allocates the long-lived state and no garbage cycles
        try:
            # A long log decoded by column, only live offsets built; record by record where the bulk scan cannot.
            plan = _bulk_plan(plog)
            if plan is not None:
                coord.load_bulk(plan)
                count, self.load_mode = plan.records, "bulk"
            else:
                coord.load(itertools.chain.from_iterable(counted()))
                self.load_mode = "records"
        finally:
            gc.freeze()
            gc.enable()
        self.load_cpu_ms = (time.thread_time() - cpu) * 1000
        return plog, coord, count

    async def _load(self) -> None:
        start = time.perf_counter()
        try:
            self.log, coord, self.records_replayed = await self.loop.run_in_executor(None, self._open_and_replay)
        except Exception as e:
            log.critical("partition %d failed to load its log: %s", self.partition, e)
            self.fail(e)
            return
        self.load_ms = (time.perf_counter() - start) * 1000
        self.coord = coord
        self.loaded_at = time.time()
        log.info("partition %d loaded %d records in %.0f ms", self.partition, self.records_replayed, self.load_ms)
        sup = self.supervisor
        self.lag.clock = self.clock
        sup.start("lag probe", self.lag.turn)
        sup.start("timers", self._timer_turn)
        sup.start("compaction", self._compaction_turn, self.compaction_interval_s, fatal=_compaction_is_fatal)
        if self.spec.fsync == "interval":
            sup.start("interval sync", self._interval_sync_turn, self.log.sync_interval_ms / 1000, fatal=_always)

    # --- failure ---------------------------------------------------------------------------

    def fail(self, error: Exception) -> None:
        """Storage is broken: tell the router why, then end the process so Ray restarts it from what is on disk."""
        log.critical("partition %d: storage failure, exiting for a restart: %r", self.partition, error)
        if self.spec.namespace is not None:
            self._report_failure(f"storage failure: {type(error).__name__}: {error}")
        exit_process(EXIT_FAILURE)

    def _report_failure(self, reason: str) -> None:
        """Tell the service's router why this partition fails, for clients and `groupcoord status` (best effort)."""
        import ray

        try:
            router = ray.get_actor(ROUTER_NAME, namespace=self.spec.namespace)
            # Blocking on purpose: nothing else may run on this loop once the log has failed.
            ray.get(router.report_failure.remote(self.partition, reason), timeout=_REPORT_TIMEOUT_S)
        except Exception as e:
            log.warning("partition %d could not report its failure to the router: %r", self.partition, e)

    # --- completing requests ---------------------------------------------------------------------

    async def wait(self, deferred: Deferred) -> Any:
        """The response of a request the shard has taken, once its records are durable."""
        self.kick()
        if deferred.done():
            return deferred.result()
        future = self.loop.create_future()
        deferred.add_callback(lambda value: future.done() or future.set_result(value))
        return await future

    async def wait_all(self, pending: list[Deferred]) -> None:
        """Return once every one of `pending` is complete."""
        self.kick()
        pending = [d for d in pending if not d.done()]
        if not pending:
            return
        future = self.loop.create_future()
        remaining = len(pending)

        def one_done(_value: Any) -> None:
            nonlocal remaining
            remaining -= 1
            if remaining == 0 and not future.done():
                future.set_result(None)

        for d in pending:
            d.add_callback(one_done)
        await future

    def kick(self) -> None:
        """After the shard ran: flush what it appended, and wake the timer loop if it must run sooner."""
        assert self.coord is not None
        self._kick_flush()
        self._wake_for_timers()

    def _wake_for_timers(self) -> None:
        coord = self.coord
        assert coord is not None, "called only while serving"
        # Only a deadline before the loop's planned wake matters: the timers due by then are put in order.
        until = self._sleep_until
        deadline = coord.next_deadline(None if until == float("inf") else int(until))
        if deadline is not None and deadline < until:
            self._wake.set()

    def _kick_flush(self) -> None:
        coord = self.coord
        assert coord is not None, "called only while serving"
        runtime = coord.runtime
        if runtime.end_offset > runtime.durable_offset and not self._flushing:
            self._flushing = True
            self.loop.create_task(self._flush())

    async def _flush(self) -> None:
        """Write and fsync what was appended, again while more arrived meanwhile (group commit)."""
        coord = self.coord
        assert coord is not None
        try:
            while coord.runtime.end_offset > coord.runtime.durable_offset:
                before = coord.runtime.durable_offset
                durable, seconds = await self.loop.run_in_executor(None, self._timed_flush)
                coord.on_durable(durable)
                self.on_flushed(seconds, durable - before)
                self._wake_for_timers()  # what waited for durability may have armed a timer (a retention step)
        except Exception as e:
            self.fail(e)
        finally:
            self._flushing = False

    def _timed_flush(self) -> tuple[int, float]:
        start = time.perf_counter()
        durable = self.log.flush()
        return durable, time.perf_counter() - start

    # --- background loops (each a turn that the supervisor runs again and again) -----------------

    async def _timer_turn(self) -> None:
        """Fire a bounded batch of due timers, then yield; when none is due, sleep until the next deadline."""
        coord = self.coord
        assert coord is not None
        turn_ends = time.perf_counter() + TIMER_TURN_S
        self.lag.refresh()
        while (more := coord.fire_timers(1)) and time.perf_counter() < turn_ends:
            pass
        self._kick_flush()
        if more:
            await asyncio.sleep(0)
            return
        now = due_ms_of(self.clock)()
        deadline = coord.next_deadline(now + TIMER_HORIZON_MS)
        self._sleep_until = deadline if deadline is not None else float("inf")
        self._wake.clear()
        timeout = None if deadline is None else max(0.0, (deadline - now) / 1000)
        if timeout is not None and self.lag.lag_ms:
            timeout = min(timeout, _LAGGING_TIMER_CHECK_S)  # the lag may shrink meanwhile: due time jumps ahead
        try:
            await asyncio.wait_for(self._wake.wait(), timeout)
        except TimeoutError:
            pass

    async def _compaction_turn(self) -> None:
        """Compact if due and wait for it; its failure is raised here, in this turn."""
        await self.loop.run_in_executor(None, self._compact_and_wait)

    def _compact_and_wait(self) -> None:
        if self.log.maybe_compact():
            self.log.join_compaction()
            self.log.maybe_compact()  # raises the error of the compaction that just ran, if it failed

    async def _interval_sync_turn(self) -> None:
        """With fsync "interval", fsync written data even when nothing more is appended."""
        await self.loop.run_in_executor(None, self.log.sync)

    def loop_failures(self) -> dict[str, int]:
        """Failures so far per background loop, plus the shard's failed timer callbacks."""
        failures = dict(self.supervisor.failures)
        failures["timer callbacks"] = self.coord.timer_failures if self.coord is not None else 0
        return failures

    # --- facts ---------------------------------------------------------------------------------------

    def log_bytes(self) -> int:
        """The size of the partition's log directory on disk."""
        pdir = str(self.root.partition_dir(self.partition)) if self.root is not None else ""
        if not pdir or not os.path.isdir(pdir):
            return 0
        return sum(e.stat().st_size for e in os.scandir(pdir) if e.is_file())

    async def close(self) -> None:
        """Stop the background loops, let a running flush finish, and close the log (in-process use)."""
        for task in self._tasks:
            task.cancel()
        await asyncio.gather(*self._tasks, return_exceptions=True)
        await self.supervisor.close()
        while self._flushing:
            await asyncio.sleep(0.001)
        if self.log is not None:
            await self.loop.run_in_executor(None, self.log.close)


def _compaction_is_fatal(error: Exception) -> bool:
    """A compaction failure is retried unless the log is unusable or half-swapped (a restart's reopen finishes it)."""
    return isinstance(error, LogClosedError) or (isinstance(error, CompactionError) and error.committed)


def _always(error: Exception) -> bool:
    return True

