"""The Ray actor of one offsets partition: a GroupCoordinator shard over its durable log.

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

from groupcoord.protocol import Deferred, Errors, OffsetAndMetadata, SystemClock, TopicPartition, partition_for
from groupcoord.protocol.config import GroupConfig
from groupcoord.protocol.coordinator import GroupCoordinator
from groupcoord.protocol.messages import OffsetCommitRequest, OffsetCommitResponse
from groupcoord.protocol.responses import APIS, error_response
from groupcoord.storage import StorageRoot

log = logging.getLogger(__name__)

# Seconds between background compaction checks.
COMPACTION_CHECK_INTERVAL_S = 60.0

_STORAGE_FAILURE_EXIT_CODE = 70
_REPORT_TIMEOUT_S = 2.0  # how long a failing partition waits to tell the router why

# The shard's state is millions of small objects without reference cycles, which Python's cyclic
# GC would rescan again and again (a fifth of a busy actor's CPU with the default 700): collect
# young objects less often, and keep what the replay loaded out of its reach (gc.freeze).
_GC_THRESHOLDS = (10_000, 10, 10)

# `batch` yields to the event loop after this long, so that a big batch does not hold up other callers.
_BATCH_YIELD_S = 0.002

# The requests `batch` accepts: the GroupCoordinator's request handlers.
_BATCH_APIS = frozenset(APIS)


# --- wire encoding of the hot messages --------------------------------------------------------
# Ray pickles arguments and results with cloudpickle, which spends 1-3 us on every NamedTuple
# (TopicPartition, OffsetAndMetadata): more than half of an actor's CPU for a 100-partition
# commit. These reducers send OffsetCommit requests and responses as plain tuples instead and
# rebuild equal objects on arrival; anything of an unexpected shape is pickled as before.

_ERRORS_BY_CODE = {e.value: e for e in Errors}
_new = tuple.__new__


def _commit_request_from_wire(
    group_id: str, offsets: list, generation_id: int, member_id: str, instance_id: str | None, retention: int
) -> OffsetCommitRequest:
    """Rebuild an OffsetCommitRequest sent by `_reduce_commit_request`."""
    tp, om = TopicPartition, OffsetAndMetadata
    rebuilt = {_new(tp, (t, p)): _new(om, (o, m, e)) for t, p, o, m, e in offsets}
    return OffsetCommitRequest(group_id, rebuilt, generation_id, member_id, instance_id, retention)


def _reduce_commit_request(req: OffsetCommitRequest) -> tuple:
    offsets = req.offsets
    tp, om = TopicPartition, OffsetAndMetadata
    if type(offsets) is not dict or not all(type(k) is tp and type(v) is om for k, v in offsets.items()):
        return req.__reduce_ex__(5)
    flat = [(k[0], k[1], v[0], v[1], v[2]) for k, v in offsets.items()]
    args = (req.group_id, flat, req.generation_id, req.member_id, req.group_instance_id, req.retention_time_ms)
    return _commit_request_from_wire, args


def _commit_response_from_wire(items: list[tuple[str, int, int]]) -> OffsetCommitResponse:
    """Rebuild an OffsetCommitResponse sent by `_reduce_commit_response`."""
    return OffsetCommitResponse({_new(TopicPartition, (t, p)): _ERRORS_BY_CODE[e] for t, p, e in items})


def _reduce_commit_response(resp: OffsetCommitResponse) -> tuple:
    errors = resp.errors
    if type(errors) is not dict or not all(type(e) is Errors for e in errors.values()):
        return resp.__reduce_ex__(5)
    return _commit_response_from_wire, ([(tp[0], tp[1], e.value) for tp, e in errors.items()],)


def install_wire_reducers() -> None:
    """Make Ray send OffsetCommit requests and responses as plain tuples from this process (idempotent)."""
    import ray.cloudpickle

    ray.cloudpickle.CloudPickler.dispatch[OffsetCommitRequest] = _reduce_commit_request
    ray.cloudpickle.CloudPickler.dispatch[OffsetCommitResponse] = _reduce_commit_response


# Every process that talks to partition actors imports this module (the client through the service).
install_wire_reducers()


def _group_ids_of(api: str, req: Any) -> list[str]:
    if api in ("describe_groups", "delete_groups"):
        ids = getattr(req, "group_ids", ())
        return [g for g in ids if isinstance(g, str)] if isinstance(ids, (list, tuple)) else []
    if api == "list_groups":
        return []
    gid = getattr(req, "group_id", None)
    return [gid] if isinstance(gid, str) else []


class PartitionActor:
    """Serves the groups of one offsets partition; create it with `partition_actor_options`."""

    def __init__(
        self,
        partition: int,
        num_partitions: int,
        storage_path: str,
        fsync: str = "always",
        config: GroupConfig | None = None,
        namespace: str | None = None,
    ) -> None:
        self.partition = partition
        self.namespace = namespace  # the service's, where its router is named; None outside a service
        self.num_partitions = num_partitions
        self.storage_path = storage_path
        self.fsync = fsync
        self.config = config if config is not None else GroupConfig()
        self._coord: GroupCoordinator | None = None
        self._log: Any = None
        self._root: Any = None
        self._load_ms: float | None = None
        self._load_cpu_ms: float | None = None
        self._records_replayed = 0
        self._flushing = False
        self._wake = asyncio.Event()
        self._sleep_until: float = float("inf")
        self._started = time.time()
        self._loop = asyncio.get_running_loop()
        gc.set_threshold(*_GC_THRESHOLDS)
        self._tasks = [self._loop.create_task(self._load())]

    # --- start-up --------------------------------------------------------------------------

    def _open_and_replay(self) -> tuple[Any, GroupCoordinator, int]:
        cpu = time.thread_time()
        root = self._root = StorageRoot(self.storage_path, self.num_partitions)
        plog = root.open_partition(self.partition, sync=self.fsync)
        coord = GroupCoordinator(self.config, SystemClock(), plog)
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
        self._load_cpu_ms = (time.thread_time() - cpu) * 1000
        return plog, coord, count

    async def _load(self) -> None:
        start = time.perf_counter()
        try:
            self._log, coord, self._records_replayed = await self._loop.run_in_executor(
                None, self._open_and_replay
            )
        except Exception as e:
            log.critical("partition %d failed to load its log: %s", self.partition, e)
            self._fail(e)
            return
        self._load_ms = (time.perf_counter() - start) * 1000
        self._coord = coord
        log.info(
            "partition %d loaded %d records in %.0f ms",
            self.partition,
            self._records_replayed,
            self._load_ms,
        )
        self._tasks.append(self._loop.create_task(self._timer_loop()))
        self._tasks.append(self._loop.create_task(self._compaction_loop()))
        if self.fsync == "interval":
            self._tasks.append(self._loop.create_task(self._interval_sync_loop()))

    def _fail(self, error: Exception) -> None:
        """Storage is broken: tell the router why, then end the process so Ray restarts it from what is on disk."""
        log.critical("partition %d: storage failure, exiting for a restart: %r", self.partition, error)
        if self.namespace is not None:
            self._report_failure(f"storage failure: {type(error).__name__}: {error}")
        logging.shutdown()
        os._exit(_STORAGE_FAILURE_EXIT_CODE)

    def _report_failure(self, reason: str) -> None:
        """Tell the service's router why this partition fails, for clients and `groupcoord status` (best effort)."""
        import ray

        try:
            router = ray.get_actor(ROUTER_NAME, namespace=self.namespace)
            # Blocking on purpose: nothing else may run on this loop once the log has failed.
            ray.get(router.report_failure.remote(self.partition, reason), timeout=_REPORT_TIMEOUT_S)
        except Exception as e:
            log.warning("partition %d could not report its failure to the router: %r", self.partition, e)

    # --- the request path --------------------------------------------------------------------

    def _start(self, api: str, req: Any) -> Any:
        """Hand one request to the shard: an immediate response, or the shard's Deferred one."""
        for group_id in _group_ids_of(api, req):
            if partition_for(group_id, self.num_partitions) != self.partition:
                return error_response(api, req, Errors.NOT_COORDINATOR)
        coord = self._coord
        if coord is None:
            if api == "heartbeat":
                return error_response(api, req, Errors.NONE)  # Kafka answers heartbeats blindly
            return error_response(api, req, Errors.COORDINATOR_LOAD_IN_PROGRESS)
        return getattr(coord, api)(req)

    async def _call(self, api: str, req: Any) -> Any:
        deferred = self._start(api, req)
        if not isinstance(deferred, Deferred):
            return deferred
        self._kick()
        if deferred.done():
            return deferred.result()
        future = self._loop.create_future()
        deferred.add_callback(lambda value: future.done() or future.set_result(value))
        return await future

    def _kick(self) -> None:
        """After the shard ran: flush what it appended, and wake the timer loop if it must run sooner."""
        coord = self._coord
        assert coord is not None
        self._kick_flush()
        deadline = coord.next_deadline()
        if deadline is not None and deadline / 1000 < self._sleep_until:
            self._wake.set()

    async def _flush(self) -> None:
        """Write and fsync what was appended, again while more arrived meanwhile (group commit)."""
        coord = self._coord
        assert coord is not None
        try:
            while coord.runtime.end_offset > coord.runtime.durable_offset:
                durable = await self._loop.run_in_executor(None, self._log.flush)
                coord.on_durable(durable)
        except Exception as e:
            self._fail(e)
        finally:
            self._flushing = False

    async def _timer_loop(self) -> None:
        coord = self._coord
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

    def _kick_flush(self) -> None:
        runtime = self._coord.runtime  # type: ignore[union-attr]
        if runtime.end_offset > runtime.durable_offset and not self._flushing:
            self._flushing = True
            self._loop.create_task(self._flush())

    async def _compaction_loop(self) -> None:
        while True:
            await asyncio.sleep(COMPACTION_CHECK_INTERVAL_S)
            try:
                await self._loop.run_in_executor(None, self._log.maybe_compact)
            except Exception as e:
                self._fail(e)

    async def _interval_sync_loop(self) -> None:
        """With fsync "interval", fsync written data even when nothing more is appended."""
        period = self._log.sync_interval_ms / 1000
        while True:
            await asyncio.sleep(period)
            try:
                await self._loop.run_in_executor(None, self._log.sync)
            except Exception as e:
                self._fail(e)

    # --- the API -------------------------------------------------------------------------------

    async def join_group(self, req):
        return await self._call("join_group", req)

    async def sync_group(self, req):
        return await self._call("sync_group", req)

    async def heartbeat(self, req):
        return await self._call("heartbeat", req)

    async def leave_group(self, req):
        return await self._call("leave_group", req)

    async def commit_offsets(self, req):
        return await self._call("commit_offsets", req)

    async def fetch_offsets(self, req):
        return await self._call("fetch_offsets", req)

    async def list_groups(self, req=None):
        from groupcoord.protocol.messages import ListGroupsRequest

        return await self._call("list_groups", req if req is not None else ListGroupsRequest())

    async def describe_groups(self, req):
        return await self._call("describe_groups", req)

    async def delete_groups(self, req):
        return await self._call("delete_groups", req)

    async def delete_offsets(self, req):
        return await self._call("delete_offsets", req)

    async def batch(self, calls: list[tuple[str, Any]]) -> list[Any]:
        """Many requests in one actor call (say, the heartbeats of every member a process hosts).

        The (api, request) pairs are handled in order, as if sent one after another; the answer is
        their responses in the same order, once all are complete (a parked JoinGroup holds it).
        """
        if not all(type(c) in (tuple, list) and len(c) == 2 and c[0] in _BATCH_APIS for c in calls):
            raise ValueError(f"a batch holds (api, request) pairs with api one of {sorted(_BATCH_APIS)}")
        results: list[Any] = []
        started = False  # whether the shard produced a Deferred since the last kick
        deadline = time.perf_counter() + _BATCH_YIELD_S
        for api, req in calls:
            result = self._start(api, req)
            results.append(result)
            started = started or isinstance(result, Deferred)
            if time.perf_counter() > deadline:
                # Let finished flushes answer other callers, and start the fsync of what this batch wrote.
                if started:
                    self._kick()
                    started = False
                await asyncio.sleep(0)
                deadline = time.perf_counter() + _BATCH_YIELD_S
        pending = [r for r in results if isinstance(r, Deferred)]
        if pending:
            self._kick()
            pending = [d for d in pending if not d.done()]
        if pending:
            future = self._loop.create_future()
            remaining = len(pending)

            def one_done(_value: Any) -> None:
                nonlocal remaining
                remaining -= 1
                if remaining == 0 and not future.done():
                    future.set_result(None)

            for d in pending:
                d.add_callback(one_done)
            await future
        return [r.result() if isinstance(r, Deferred) else r for r in results]

    # --- operations ------------------------------------------------------------------------------

    async def is_loaded(self) -> bool:
        """Whether the log has been replayed and requests are served."""
        return self._coord is not None

    async def status(self) -> dict:
        """Facts for `groupcoord status`: node, load time, groups, log size."""
        import ray

        coord = self._coord
        size = 0
        pdir = str(self._root.partition_dir(self.partition)) if self._root is not None else ""
        if pdir and os.path.isdir(pdir):
            size = sum(e.stat().st_size for e in os.scandir(pdir) if e.is_file())
        return {
            "partition": self.partition,
            "node_id": ray.get_runtime_context().get_node_id(),
            "pid": os.getpid(),
            "loaded": coord is not None,
            "load_ms": self._load_ms,
            "load_cpu_ms": self._load_cpu_ms,
            "records_replayed": self._records_replayed,
            "groups": len(coord.groups.groups) if coord is not None else 0,
            "log_end_offset": coord.runtime.end_offset if coord is not None else None,
            "log_bytes": size,
            "uptime_s": time.time() - self._started,
        }

    async def crash(self) -> None:
        """End this process at once, as a crash would (for fault tests and the demo)."""
        os._exit(1)


ROUTER_NAME = "groupcoord-router"


def partition_actor_name(partition: int) -> str:
    """The registered name of a partition actor in its namespace."""
    return f"groupcoord-partition-{partition}"
