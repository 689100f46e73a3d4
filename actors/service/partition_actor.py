"""The remote API of one offsets partition: a Ray actor serving the requests of its groups.

Each method hands its request to the partition's shard and answers once the shard's records
are durable; `PartitionRuntime` owns the shard, its log and the loops behind it.
"""

from __future__ import annotations

import asyncio
import os
import time
from typing import Any

from groupcoord.protocol import Deferred, Errors, partition_for
from groupcoord.protocol.config import GroupConfig
from groupcoord.protocol.messages import ListGroupsRequest
from groupcoord.protocol.responses import APIS, error_response

from .partition_runtime import PartitionRuntime
from .spec import ServiceSpec

# `batch` yields to the event loop after this long, so that a big batch does not hold up other callers.
_BATCH_YIELD_S = 0.002

# The requests `batch` accepts: the GroupCoordinator's request handlers.
_BATCH_APIS = frozenset(APIS)


def _group_ids_of(api: str, req: Any) -> list[str]:
    if api in ("describe_groups", "delete_groups"):
        ids = getattr(req, "group_ids", ())
        return [g for g in ids if isinstance(g, str)] if isinstance(ids, (list, tuple)) else []
    if api == "list_groups":
        return []
    gid = getattr(req, "group_id", None)
    return [gid] if isinstance(gid, str) else []


class PartitionActor:
    """Serves the groups of one offsets partition; the router creates it with `partition_actor_options`."""

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
        self.num_partitions = num_partitions
        spec = ServiceSpec(namespace, storage_path, num_partitions, fsync, config or GroupConfig())
        self.runtime = PartitionRuntime(partition, spec)
        self._started = time.time()

    # --- the request path --------------------------------------------------------------------

    def _start(self, api: str, req: Any) -> Any:
        """Hand one request to the shard: an immediate response, or the shard's Deferred one."""
        for group_id in _group_ids_of(api, req):
            if partition_for(group_id, self.num_partitions) != self.partition:
                return error_response(api, req, Errors.NOT_COORDINATOR)
        coord = self.runtime.coord
        if coord is None:
            if api == "heartbeat":
                return error_response(api, req, Errors.NONE)  # Kafka answers heartbeats blindly
            return error_response(api, req, Errors.COORDINATOR_LOAD_IN_PROGRESS)
        return getattr(coord, api)(req)

    async def _call(self, api: str, req: Any) -> Any:
        result = self._start(api, req)
        return await self.runtime.wait(result) if isinstance(result, Deferred) else result

    async def list_groups(self, req: ListGroupsRequest | None = None) -> Any:
        """Kafka's ListGroups over this partition's groups (every group when `req` is None)."""
        return await self._call("list_groups", req if req is not None else ListGroupsRequest())

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
                    self.runtime.kick()
                    started = False
                await asyncio.sleep(0)
                deadline = time.perf_counter() + _BATCH_YIELD_S
        pending = [r for r in results if isinstance(r, Deferred)]
        if pending:
            await self.runtime.wait_all(pending)
        return [r.result() if isinstance(r, Deferred) else r for r in results]

    # --- operations ------------------------------------------------------------------------------

    async def is_loaded(self) -> bool:
        """Whether the log has been replayed and requests are served."""
        return self.runtime.coord is not None

    async def status(self) -> dict:
        """Facts for `groupcoord status`: node, load time, groups, log size."""
        import ray

        rt = self.runtime
        coord = rt.coord
        return {
            "partition": self.partition,
            "node_id": ray.get_runtime_context().get_node_id(),
            "pid": os.getpid(),
            "loaded": coord is not None,
            "load_ms": rt.load_ms,
            "load_cpu_ms": rt.load_cpu_ms,
            "records_replayed": rt.records_replayed,
            "groups": len(coord.groups.groups) if coord is not None else 0,
            "log_end_offset": coord.runtime.end_offset if coord is not None else None,
            "log_bytes": rt.log_bytes(),
            "loop_failures": rt.loop_failures(),
            "uptime_s": time.time() - self._started,
        }

    async def crash(self) -> None:
        """End this process at once, as a crash would (for fault tests and the demo)."""
        os._exit(1)

    async def close(self) -> None:
        """Stop serving and close the log; for an in-process PartitionActor (benchmarks, tests), not over Ray."""
        await self.runtime.close()


def _remote_api(api: str) -> Any:
    async def handle(self: PartitionActor, req: Any) -> Any:
        return await self._call(api, req)

    handle.__name__ = handle.__qualname__ = api
    handle.__doc__ = f"The shard's `{api}`: the response once its records (and every earlier write) are durable."
    return handle


# One remote method per request handler of the shard (join_group, sync_group, heartbeat, commit_offsets, ...).
for _api in APIS:
    if not hasattr(PartitionActor, _api):
        setattr(PartitionActor, _api, _remote_api(_api))
