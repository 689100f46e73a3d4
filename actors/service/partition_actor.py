"""The remote API of one offsets partition: a Ray actor serving the requests of its groups.

Each method hands its request to the partition's shard and answers once the shard's records
are durable; `PartitionRuntime` owns the shard, its log and the loops behind it.
"""

from __future__ import annotations

import asyncio
import dataclasses
import logging
import os
import time
from typing import Any

from groupcoord.protocol import Deferred, Errors, partition_for
from groupcoord.protocol.apis import Api
from groupcoord.protocol.config import GroupConfig
from groupcoord.protocol.consumer.messages import (
    ConsumerGroupDescribeRequest,
    ConsumerGroupDescribeResponse,
    ConsumerGroupHeartbeatRequest,
    ConsumerGroupHeartbeatResponse,
)
from groupcoord.protocol.messages import (
    DeleteGroupsRequest,
    DeleteGroupsResponse,
    DescribeGroupsRequest,
    DescribeGroupsResponse,
    HeartbeatRequest,
    HeartbeatResponse,
    JoinGroupRequest,
    JoinGroupResponse,
    LeaveGroupRequest,
    LeaveGroupResponse,
    ListGroupsRequest,
    ListGroupsResponse,
    OffsetCommitRequest,
    OffsetCommitResponse,
    OffsetDeleteRequest,
    OffsetDeleteResponse,
    OffsetFetchRequest,
    OffsetFetchResponse,
    SyncGroupRequest,
    SyncGroupResponse,
)
from groupcoord.protocol.responses import error_response
from groupcoord.protocol.security.snapshot import SecurityConfig

from .authorizer import RequestGuard
from .logs import configure_service_logging
from .names import ROUTER_NAME
from .overload import queue_probe_turn
from .partition_runtime import PartitionRuntime
from .process_exit import EXIT_CRASH, exit_process
from .security_feed import CHECK_INTERVAL_S, SecurityFeed
from .spec import LogSettings, Observability, ServiceSpec
from .telemetry import PartitionTelemetry

log = logging.getLogger(__name__)

# `batch` yields to the event loop after this long, so that a big batch does not hold up other callers.
_BATCH_YIELD_S = 0.002

# The requests `batch` accepts: the GroupCoordinator's request handlers.
_BATCH_APIS = frozenset(Api)

# Responses that carry Kafka's throttle_time_ms: the requests a client sends again and again.
_THROTTLED_APIS = frozenset({Api.HEARTBEAT, Api.OFFSET_COMMIT})

# How often a heartbeat naming a topic the shard does not know may ask the router again.
_TOPIC_REFRESH_S = 1.0


def _group_ids_of(api: str, req: Any) -> list[str]:
    if api in (Api.DESCRIBE_GROUPS, Api.DELETE_GROUPS, Api.CONSUMER_GROUP_DESCRIBE):
        ids = getattr(req, "group_ids", ())
        return [g for g in ids if isinstance(g, str)] if isinstance(ids, (list, tuple)) else []
    if api == Api.LIST_GROUPS:
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
        self.telemetry = PartitionTelemetry(
            partition, self.runtime, options, self._topic_end_offsets if namespace is not None else None
        )
        self.runtime.on_flushed = self.telemetry.flushed
        self.runtime.supervisor.start("metrics", self.telemetry.turn, options.interval_s)
        self._started = time.time()
        self._namespace = namespace
        self._topics: dict[str, int] = {}  # topic -> partition count, for the consumer groups' assignors
        self._topics_for: Any = None  # the shard that has them
        self._topics_asked = 0.0
        self._router: Any = None  # the router's handle, looked up once off the event loop (see _router_handle)
        self._node = _node_facts() if namespace is not None else ("", "")
        self._guard_requests(security, self.runtime.supervisor)
        self._self: Any = None  # this actor's own handle, for the queue probe (see _queue_probe_turn)
        if namespace is not None:  # a Ray actor: requests wait in Ray's queue before the loop's
            self.runtime.supervisor.start("queue probe", self._queue_probe_turn)

    def _guard_requests(self, security: SecurityConfig | None, supervisor: Any) -> None:
        """Check every request's credentials and ACLs from now on if the service authorizes."""
        self.guard = RequestGuard(security, str(self.partition), self.telemetry.metrics)
        self.security_feed = SecurityFeed(self.guard, self._namespace)
        if self.guard.enabled:
            self._first_feed = asyncio.get_running_loop().create_task(self.security_feed.turn())
            supervisor.start("security", self.security_feed.turn, CHECK_INTERVAL_S)

    # --- the request path --------------------------------------------------------------------

    def _start(self, api: str, req: Any) -> Any:
        """Hand one request to the shard: an immediate response, or the shard's Deferred one."""
        for group_id in _group_ids_of(api, req):
            if partition_for(group_id, self.num_partitions) != self.partition:
                return error_response(api, req, Errors.NOT_COORDINATOR)
        coord = self.runtime.coord
        if coord is None:
            if api == Api.HEARTBEAT:
                return error_response(api, req, Errors.NONE)  # Kafka answers heartbeats blindly
            return error_response(api, req, Errors.COORDINATOR_LOAD_IN_PROGRESS)
        try:
            return getattr(coord, api)(req)
        except Exception:
            # The one place an exception becomes an answer: this request's, never its batch's neighbours'.
            self.telemetry.request_failed(api, req)
            return error_response(api, req, Errors.UNKNOWN_SERVER_ERROR)

    async def _call(self, api: str, req: Any, credentials: Any = None) -> Any:
        if self.guard.enabled:
            return await self.guard.call(api, req, credentials, self._handle)
        return await self._handle(api, req)

    async def _handle(self, api: str, req: Any) -> Any:
        started = time.perf_counter()
        result = self._start(api, req)
        response = await self.runtime.wait(result) if isinstance(result, Deferred) else result
        throttle_ms = self._throttle_ms()
        if throttle_ms and api in _THROTTLED_APIS:
            response = dataclasses.replace(response, throttle_time_ms=throttle_ms)
        self.telemetry.request(api, req, response, time.perf_counter() - started)
        return response

    def _throttle_ms(self) -> int:
        """Kafka's throttle_time_ms for the responses going out now: > 0 once this actor runs behind."""
        runtime = self.runtime
        return runtime.lag.throttle_time_ms() if runtime is not None else 0  # a replica's follower has none

    # --- the remote API: one method per request; each answers once its records are durable -------------

    async def join_group(self, req: JoinGroupRequest, credentials: Any = None) -> JoinGroupResponse:
        """JoinGroup: join or rejoin a classic group; parks until the rebalance's join phase completes."""
        return await self._call(Api.JOIN_GROUP, req, credentials)

    async def sync_group(self, req: SyncGroupRequest, credentials: Any = None) -> SyncGroupResponse:
        """SyncGroup: the member's assignment of the current generation (the leader sends everyone's)."""
        return await self._call(Api.SYNC_GROUP, req, credentials)

    async def heartbeat(self, req: HeartbeatRequest, credentials: Any = None) -> HeartbeatResponse:
        """Heartbeat: keep a classic member's session alive; REBALANCE_IN_PROGRESS asks it to rejoin."""
        return await self._call(Api.HEARTBEAT, req, credentials)

    async def leave_group(self, req: LeaveGroupRequest, credentials: Any = None) -> LeaveGroupResponse:
        """LeaveGroup: remove members (by member id or static instance id) from a classic group."""
        return await self._call(Api.LEAVE_GROUP, req, credentials)

    async def commit_offsets(self, req: OffsetCommitRequest, credentials: Any = None) -> OffsetCommitResponse:
        """OffsetCommit: store a group's offsets, answered once they are durable."""
        return await self._call(Api.OFFSET_COMMIT, req, credentials)

    async def fetch_offsets(self, req: OffsetFetchRequest, credentials: Any = None) -> OffsetFetchResponse:
        """OffsetFetch: a group's committed offsets (all, or of the partitions named)."""
        return await self._call(Api.OFFSET_FETCH, req, credentials)

    async def list_groups(self, req: ListGroupsRequest | None = None, credentials: Any = None) -> ListGroupsResponse:
        """ListGroups over this partition's groups of both protocols (every group when `req` is None)."""
        return await self._call(Api.LIST_GROUPS, req if req is not None else ListGroupsRequest(), credentials)

    async def describe_groups(self, req: DescribeGroupsRequest, credentials: Any = None) -> DescribeGroupsResponse:
        """DescribeGroups: classic groups' state, protocol and members, in request order."""
        return await self._call(Api.DESCRIBE_GROUPS, req, credentials)

    async def delete_groups(self, req: DeleteGroupsRequest, credentials: Any = None) -> DeleteGroupsResponse:
        """DeleteGroups: remove empty groups with their offsets; a result per group id."""
        return await self._call(Api.DELETE_GROUPS, req, credentials)

    async def delete_offsets(self, req: OffsetDeleteRequest, credentials: Any = None) -> OffsetDeleteResponse:
        """OffsetDelete: remove a group's offsets of topics it does not consume (KIP-496)."""
        return await self._call(Api.OFFSET_DELETE, req, credentials)

    async def consumer_group_heartbeat(
        self, req: ConsumerGroupHeartbeatRequest, credentials: Any = None
    ) -> ConsumerGroupHeartbeatResponse:
        """ConsumerGroupHeartbeat (KIP-848), once the shard knows the topics the request subscribes to."""
        await self._ensure_topics([req])
        return await self._call(Api.CONSUMER_GROUP_HEARTBEAT, req, credentials)

    async def consumer_group_describe(
        self, req: ConsumerGroupDescribeRequest, credentials: Any = None
    ) -> ConsumerGroupDescribeResponse:
        """ConsumerGroupDescribe (KIP-848): consumer groups' epochs, assignor and members, in request order."""
        return await self._call(Api.CONSUMER_GROUP_DESCRIBE, req, credentials)

    # --- topics, security and batches -------------------------------------------------------------

    async def update_security(self) -> None:
        """The router's word that its security state changed: read it from the router now."""
        await self.security_feed.turn()

    async def update_topic_metadata(self, partitions: dict[str, int]) -> None:
        """Topic partition counts from the router (pushed when topics are created or grow)."""
        self._topics.update(partitions)
        if self.runtime.coord is not None:
            self.runtime.coord.update_topic_metadata(partitions)

    async def _ensure_topics(self, reqs: list[Any]) -> None:
        """Ask the router for the topics once per loaded shard, and again (at most every second) when a
        heartbeat subscribes to a topic the shard has not heard of."""
        coord = self.runtime.coord
        if coord is None:
            return
        unknown = any(t not in self._topics for r in reqs for t in (getattr(r, "subscribed_topic_names", None) or ()))
        if self._topics_for is coord and not (unknown and time.monotonic() - self._topics_asked > _TOPIC_REFRESH_S):
            return
        self._topics_asked = time.monotonic()
        try:
            router = await self._router_handle()
            described = await router.topic_metadata.remote()
        except Exception as e:  # no router (an in-process actor) or it is restarting: use what we have
            log.warning("partition %d could not read the topics from the router: %r", self.partition, e)
            self._topics_for = coord
            coord.update_topic_metadata(self._topics)
            return
        self._topics.update({name: info["partitions"] for name, info in described.items()})
        self._topics_for = coord
        coord.update_topic_metadata(self._topics)

    async def batch(self, calls: list[tuple[str, Any]], credentials: Any = None) -> list[Any]:
        """Many requests in one actor call (say, the heartbeats of every member a process hosts).

        The (api, request) pairs are handled in order, as if sent one after another; the answer is
        their responses in the same order, once all are complete (a parked JoinGroup holds it).
        """
        if not isinstance(calls, list) or not all(
                type(c) in (tuple, list) and len(c) == 2 and c[0] in _BATCH_APIS for c in calls):
            raise ValueError(f"a batch holds (api, request) pairs with api one of {sorted(_BATCH_APIS)}")
        if self.guard.enabled:
            return await self.guard.batch(calls, credentials, self._batch)
        return await self._batch(calls)

    async def _batch(self, calls: list[tuple[str, Any]]) -> list[Any]:
        arrived = time.perf_counter()
        heartbeats = [req for api, req in calls if api == Api.CONSUMER_GROUP_HEARTBEAT]
        if heartbeats:
            await self._ensure_topics(heartbeats)
        results: list[Any] = []
        started = False  # whether the shard produced a Deferred since the last kick
        deadline = time.perf_counter() + _BATCH_YIELD_S
        lag = self.runtime.lag if self.runtime is not None else None  # a replica's follower has none
        # Until its last request has run, the batch's age is lag: none of them may be judged late (see LagProbe).
        key = lag.batch_arrived() if lag is not None else 0
        try:
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
        finally:
            if lag is not None:
                lag.batch_served(key)
        pending = [r for r in results if isinstance(r, Deferred)]
        if pending:
            await self.runtime.wait_all(pending)
        responses = [r.result() if isinstance(r, Deferred) else r for r in results]
        throttle_ms = self._throttle_ms()
        if throttle_ms:  # past its capacity: tell every heartbeat and commit of the batch to back off (Kafka's way)
            responses = [dataclasses.replace(r, throttle_time_ms=throttle_ms) if c[0] in _THROTTLED_APIS else r
                         for c, r in zip(calls, responses, strict=True)]
        self.telemetry.requests(calls, responses, time.perf_counter() - arrived)
        return responses

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
        return self.runtime.coord is not None and self.guard.ready

    async def status(self) -> dict:
        """Facts for `groupcoord status`: node, load time, groups by state, members, commit rate, log, compaction."""
        rt = self.runtime
        coord = rt.coord
        gauges = coord.gauges() if coord is not None else None
        return {
            "partition": self.partition,
            "node_id": self._node[0],
            "node_ip": self._node[1],
            "pid": os.getpid(),
            "loaded": coord is not None,
            "load_ms": rt.load_ms,
            "load_cpu_ms": rt.load_cpu_ms,
            "records_replayed": rt.records_replayed,
            "groups": gauges.groups if gauges is not None else 0,
            "groups_by_state": dict(gauges.groups_by_state) if gauges is not None else {},
            "members": gauges.members if gauges is not None else 0,
            "offsets": gauges.offsets if gauges is not None else 0,
            "offset_commits": coord.stats.offset_commits if coord is not None else 0,
            "commit_rate": self.telemetry.commit_rate(),
            "log_end_offset": coord.runtime.end_offset if coord is not None else None,
            "log_bytes": rt.log_bytes(),
            "last_compaction": self.telemetry.last_compaction(),
            "loop_failures": rt.loop_failures(),
            "lag_ms": rt.lag.behind_ms(),
            "max_lag_ms": rt.lag.max_lag_ms,
            "uptime_s": time.time() - self._started,
            "security_version": self.guard.version,
            "auth_failures": self.guard.failure_counts(),
        }

    async def _topic_end_offsets(self) -> dict:
        """The topics' end offsets from the router's registry, for consumer lag."""
        router = await self._router_handle()
        return await router.topic_metadata.remote()

    async def _router_handle(self) -> Any:
        """The service router's handle, looked up in Ray's GCS once, in a worker thread.

        A named-actor lookup is a synchronous GCS call (and the first one loads the router's class
        from GCS's function table); on the event loop it stalled every request behind it, and under
        overload a GCS call that timed out aborted the process. The handle stays valid across
        restarts of the (detached, restartable) router.
        """
        if self._router is None:
            loop = asyncio.get_running_loop()
            self._router = await loop.run_in_executor(None, _lookup_router, self._namespace)
        return self._router

    async def set_metrics(self, on: bool, credentials: Any = None) -> bool:
        """Turn this partition's Ray metrics off or back on at runtime; returns whether they are on now.

        They can only come back on where the service was started with metrics; counters resume
        from the shard's totals, so nothing counted meanwhile is lost.
        """
        if not self.guard.cluster_allowed(credentials, "set_metrics", "ALTER"):
            return self.telemetry.recording
        return self.telemetry.set_recording(on)

    async def crash(self, credentials: Any = None) -> None:
        """End this process at once, as a crash would (for fault tests and the demo; ALTER on the cluster)."""
        if not self.guard.cluster_allowed(credentials, "crash", "ALTER"):
            return
        exit_process(EXIT_CRASH)

    async def close(self) -> None:
        """Stop serving and close the log; for an in-process PartitionActor (benchmarks, tests), not over Ray."""
        await self.runtime.close()


def _lookup_router(namespace: str | None) -> Any:
    import ray

    return ray.get_actor(ROUTER_NAME, namespace=namespace)


def _current_actor() -> Any:
    import ray

    return ray.get_runtime_context().current_actor


def _node_facts() -> tuple[str, str]:
    """This process's Ray node id and IP (both known locally), read once at start for `status`."""
    import ray

    return ray.get_runtime_context().get_node_id(), ray.util.get_node_ip_address()
