"""The remote API of one offsets partition: a Ray actor serving the requests of its groups.

Each method hands its request to the partition's shard through its `RequestPath` and answers once
the shard's records are durable; `PartitionRuntime` owns the shard, its log and the loops behind it.
"""

from __future__ import annotations

import asyncio
import logging
import os
import time
from typing import Any

from groupcoord.protocol.config import GroupConfig
from groupcoord.protocol.security.snapshot import SecurityConfig

from .logs import configure_service_logging
from .overload import queue_probe_turn
from .partition_runtime import PartitionRuntime
from .request_path import GroupApi, RequestPath, RouterLink
from .spec import LogSettings, Observability, ServiceSpec
from .telemetry import PartitionTelemetry

log = logging.getLogger(__name__)


class PartitionActor(GroupApi):
    """Serves the groups of one offsets partition; the router creates it with `partition_actor_options`."""

    def __init__(
        self,
        partition: int,
        num_partitions: int,
        storage_path: str,
        fsync: str = "always",
        config: GroupConfig | None = None,
        namespace: str | None = None,
        observability: Observability | None = None,
        log_settings: LogSettings | None = None,
        security: SecurityConfig | None = None,
    ) -> None:
        self.partition = partition
        self.num_partitions = num_partitions
        options = observability or Observability()
        if namespace is not None:  # a service's actor, alone in its process: its logs carry its partition
            configure_service_logging(partition, options.log_format, options.log_level)
        spec = ServiceSpec(namespace, storage_path, num_partitions, fsync, config or GroupConfig(), options,
                           log=log_settings or LogSettings())
        self.runtime = PartitionRuntime(partition, spec)
        router = RouterLink(namespace)
        self.telemetry = PartitionTelemetry(
            partition, self.runtime, options, router.topic_metadata if namespace is not None else None
        )
        self.runtime.on_flushed = self.telemetry.flushed
        self.runtime.supervisor.start("metrics", self.telemetry.turn, options.interval_s)
        self._started = time.time()
        self._node = _node_facts() if namespace is not None else ("", "")
        self.requests = RequestPath(partition, num_partitions, lambda: self.runtime, self.telemetry, security,
                                    self.runtime.supervisor, namespace, router.topic_metadata)
        self._self: Any = None  # this actor's own handle, for the queue probe (see _queue_probe_turn)
        if namespace is not None:  # a Ray actor: requests wait in Ray's queue before the loop's
            self.runtime.supervisor.start("queue probe", self._queue_probe_turn)

    async def queue_probe(self, token: str) -> None:
        """The queue probe's call to this actor, through Ray's queue like every request (see overload.LagProbe)."""
        runtime = getattr(self, "runtime", None)
        if runtime is not None:
            runtime.lag.queue_call_arrived(token)

    async def _queue_probe_turn(self) -> None:
        """Measure how long a call waits in Ray's queue and the loop's before it runs (off GCS: the handle is kept)."""
        if self.runtime.coord is None:  # loading: nothing is served, and the loop probe has not started
            await asyncio.sleep(0.05)
            return
        counted = self._self is not None
        if self._self is None:
            self._self = await asyncio.get_running_loop().run_in_executor(None, _current_actor)
        handle = self._self
        await queue_probe_turn(self.runtime.lag, lambda token: handle.queue_probe.remote(token), counted)

    # --- operations ------------------------------------------------------------------------------

    async def is_loaded(self) -> bool:
        """Whether the log has been replayed and requests are served (with authorization: and the ACLs are known)."""
        return self.runtime.coord is not None and self.requests.guard.ready

    async def status(self) -> dict:
        """Facts for `groupcoord status`: node, load time, groups by state, members, commit rate, log, compaction."""
        return serving_status(self.partition, self._node, self._started, self.runtime, self.requests)

    async def close(self) -> None:
        """Stop serving and close the log; for an in-process PartitionActor (benchmarks, tests), not over Ray."""
        await self.runtime.close()


def serving_status(partition: int, node: tuple[str, str], started: float, rt: PartitionRuntime,
                   requests: RequestPath) -> dict:
    """The status facts of a partition that serves through `rt`: load, groups, members, commits, log, lag."""
    coord = rt.coord
    gauges = coord.gauges() if coord is not None else None
    telemetry, guard = requests.telemetry, requests.guard
    return {
        "partition": partition,
        "node_id": node[0],
        "node_ip": node[1],
        "pid": os.getpid(),
        "loaded": coord is not None,
        "load_ms": rt.load_ms,
        "load_cpu_ms": rt.load_cpu_ms,
        "loaded_at": rt.loaded_at,
        "records_replayed": rt.records_replayed,
        "load_mode": rt.load_mode,
        "groups": gauges.groups if gauges is not None else 0,
        "groups_by_state": dict(gauges.groups_by_state) if gauges is not None else {},
        "members": gauges.members if gauges is not None else 0,
        "offsets": gauges.offsets if gauges is not None else 0,
        "offset_commits": coord.stats.offset_commits if coord is not None else 0,
        "commit_rate": telemetry.commit_rate(),
        "log_end_offset": coord.runtime.end_offset if coord is not None else None,
        "log_bytes": rt.log_bytes(),
        "last_compaction": telemetry.last_compaction(),
        "loop_failures": rt.loop_failures(),
        "lag_ms": rt.lag.behind_ms(),
        "max_lag_ms": rt.lag.max_lag_ms,
        "uptime_s": time.time() - started,
        "security_version": guard.version,
        "auth_failures": guard.failure_counts(),
    }


def _current_actor() -> Any:
    import ray

    return ray.get_runtime_context().current_actor


def _node_facts() -> tuple[str, str]:
    """This process's Ray node id and IP (both known locally), read once at start for `status`."""
    import ray

    return ray.get_runtime_context().get_node_id(), ray.util.get_node_ip_address()
