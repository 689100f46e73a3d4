"""The runtime of one partition actor: loading its log, group commit, and the loops that fire its timers.

One event loop, no locks. The shard runs on the loop; the log's write+fsync runs in a worker
thread, once for everything appended since the last one (group commit); responses are released
when the shard says their records are durable. Timers wake the loop at the shard's next
deadline. A storage failure ends the process so that Ray restarts the actor from disk.
"""

from __future__ import annotations

import asyncio
import gc
import itertools
import logging
import os
import time
from typing import Any

from groupcoord.protocol import Deferred, SystemClock
from groupcoord.protocol.coordinator import GroupCoordinator
from groupcoord.storage import StorageRoot

from .names import ROUTER_NAME
from .spec import ServiceSpec

log = logging.getLogger(__name__)

# Seconds between background compaction checks.
COMPACTION_CHECK_INTERVAL_S = 60.0

_STORAGE_FAILURE_EXIT_CODE = 70
_REPORT_TIMEOUT_S = 2.0  # how long a failing partition waits to tell the router why

# The shard's state is millions of small objects without reference cycles, which Python's cyclic
# GC would rescan again and again (a fifth of a busy actor's CPU with the default 700): collect
# young objects less often, and keep what the replay loaded out of its reach (gc.freeze).
_GC_THRESHOLDS = (10_000, 10, 10)


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
        self.records_replayed = 0
        self._flushing = False
        self._wake = asyncio.Event()
        self._sleep_until: float = float("inf")
        self.loop = asyncio.get_running_loop()
        gc.set_threshold(*_GC_THRESHOLDS)
        self._tasks = [self.loop.create_task(self._load())]

    # --- start-up --------------------------------------------------------------------------

    def _open_and_replay(self) -> tuple[Any, GroupCoordinator, int]:
        cpu = time.thread_time()
        root = self.root = StorageRoot(self.spec.storage_path, self.spec.num_partitions, create=False)
        plog = root.open_partition(self.partition, sync=self.spec.fsync)
        coord = GroupCoordinator(self.spec.config, SystemClock(), plog)
        count = 0

        def counted():
            nonlocal count
            for batch in plog.replay_batches():
                count += len(batch)
                yield batch

        gc.disable()  # replay allocates the long-lived state and no garbage cycles
        try:
            coord.load(itertools.chain.from_iterable(counted()))
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
        log.info("partition %d loaded %d records in %.0f ms", self.partition, self.records_replayed, self.load_ms)
        self._tasks.append(self.loop.create_task(self._timer_loop()))
        self._tasks.append(self.loop.create_task(self._compaction_loop()))
        if self.spec.fsync == "interval":
            self._tasks.append(self.loop.create_task(self._interval_sync_loop()))

    # --- failure ---------------------------------------------------------------------------

    def fail(self, error: Exception) -> None:
        """Storage is broken: tell the router why, then end the process so Ray restarts it from what is on disk."""
        log.critical("partition %d: storage failure, exiting for a restart: %r", self.partition, error)
        if self.spec.namespace is not None:
            self._report_failure(f"storage failure: {type(error).__name__}: {error}")
        logging.shutdown()
        os._exit(_STORAGE_FAILURE_EXIT_CODE)

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
        coord = self.coord
        assert coord is not None
        self._kick_flush()
        deadline = coord.next_deadline()
        if deadline is not None and deadline / 1000 < self._sleep_until:
            self._wake.set()

    def _kick_flush(self) -> None:
        runtime = self.coord.runtime  # type: ignore[union-attr]
        if runtime.end_offset > runtime.durable_offset and not self._flushing:
            self._flushing = True
            self.loop.create_task(self._flush())

    async def _flush(self) -> None:
        """Write and fsync what was appended, again while more arrived meanwhile (group commit)."""
        coord = self.coord
        assert coord is not None
        try:
            while coord.runtime.end_offset > coord.runtime.durable_offset:
                durable = await self.loop.run_in_executor(None, self.log.flush)
                coord.on_durable(durable)
        except Exception as e:
            self.fail(e)
        finally:
            self._flushing = False

    # --- background loops ------------------------------------------------------------------------

    async def _timer_loop(self) -> None:
        coord = self.coord
        assert coord is not None
        while True:
            coord.tick()
            self._kick_flush()
            deadline = coord.next_deadline()
            self._sleep_until = deadline / 1000 if deadline is not None else float("inf")
            self._wake.clear()
            timeout = None if deadline is None else max(0.0, deadline / 1000 - time.time())
            try:
                await asyncio.wait_for(self._wake.wait(), timeout)
            except TimeoutError:
                pass

    async def _compaction_loop(self) -> None:
        await self._every(COMPACTION_CHECK_INTERVAL_S, self.log.maybe_compact)

    async def _interval_sync_loop(self) -> None:
        """With fsync "interval", fsync written data even when nothing more is appended."""
        await self._every(self.log.sync_interval_ms / 1000, self.log.sync)

    async def _every(self, period_s: float, work: Any) -> None:
        """Run blocking storage `work` in a worker thread every `period_s`; a failure fails the partition."""
        while True:
            await asyncio.sleep(period_s)
            try:
                await self.loop.run_in_executor(None, work)
            except Exception as e:
                self.fail(e)

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
        while self._flushing:
            await asyncio.sleep(0.001)
        if self.log is not None:
            await self.loop.run_in_executor(None, self.log.close)
