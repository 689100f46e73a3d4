"""The request path of one offsets partition, shared by the partition actor and a replicated partition's replicas.

`RequestPath` takes a request from the remote API to the shard and back: the ownership check, the
credentials and ACLs, the shard's answer once it is durable, Kafka's throttle_time_ms, telemetry,
batches, and the topics the consumer groups' assignors need. `GroupApi` is the remote API itself,
written out once; an actor that has a `requests` path serves it.
"""

from __future__ import annotations

import asyncio
import dataclasses
import functools
import logging
import time
from typing import Any, Awaitable, Callable

from groupcoord.protocol import Deferred, Errors, partition_for
from groupcoord.protocol.apis import Api
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
    ListedRow,
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
    described_rows,
    listed_rows,
    pack_described_rows,
)
from groupcoord.protocol.responses import error_response
from groupcoord.protocol.security.snapshot import SecurityConfig

from ..client.wire import OnePickle
from .authorizer import RequestGuard
from .names import lookup_router
from .partition_runtime import PartitionRuntime
from .process_exit import EXIT_CRASH, exit_process
from .security_feed import CHECK_INTERVAL_S, SecurityFeed
from .telemetry import PartitionTelemetry

log = logging.getLogger(__name__)

# `batch` yields to the event loop after this long, so that a big batch does not hold up other callers.
_BATCH_YIELD_S = 0.002

# The requests `batch` accepts: the GroupCoordinator's request handlers.
_BATCH_APIS = frozenset(Api)

# Responses that carry Kafka's throttle_time_ms: the requests a client sends again and again.
_THROTTLED_APIS = frozenset({Api.HEARTBEAT, Api.OFFSET_COMMIT})

# Group ids whose owner `RequestPath.owns` remembers: a partition's live groups, with room to spare.
_OWNED_CACHE_SIZE = 100_000

# How often a heartbeat naming a topic the shard does not know may ask the router again.
TOPIC_REFRESH_S = 1.0


_MANY_GROUPS_APIS = frozenset({Api.DESCRIBE_GROUPS, Api.DELETE_GROUPS, Api.CONSUMER_GROUP_DESCRIBE})


class RouterLink:
    """The service router's handle, looked up in Ray's GCS once, in a worker thread.

    A named-actor lookup is a synchronous GCS call (and the first one loads the router's class
    from GCS's function table); on the event loop it stalled every request behind it, and under
    overload a GCS call that timed out aborted the process. The handle stays valid across
    restarts of the (detached, restartable) router.
    """

    def __init__(self, namespace: str | None) -> None:
        self.namespace = namespace
        self._router: Any = None

    async def handle(self) -> Any:
        """The router's actor handle."""
        if self._router is None:
            loop = asyncio.get_running_loop()
            self._router = await loop.run_in_executor(None, lookup_router, self.namespace)
        return self._router

    async def topic_metadata(self) -> dict:
        """The topics' partition counts and end offsets from the router's registry."""
        router = await self.handle()
        return await router.topic_metadata.remote()


class RequestPath:
    """From a request to its answer on one partition: ownership, authorization, the shard, throttling, telemetry.

    `runtime()` is the runtime that serves now (None: a replica that does not lead); `serves()` says
    whether requests may reach it at all (else NOT_COORDINATOR); `read_topics()` returns the router's
    topics, asked once per shard and, with `topic_refresh_s`, again when a heartbeat names an unknown one.
    """

    def __init__(
        self,
        partition: int,
        num_partitions: int,
        runtime: Callable[[], PartitionRuntime | None],
        telemetry: PartitionTelemetry,
        security: SecurityConfig | None,
        supervisor: Any,
        namespace: str | None,
        read_topics: Callable[[], Awaitable[dict]],
        serves: Callable[[], bool] | None = None,
        topic_refresh_s: float | None = TOPIC_REFRESH_S,
    ) -> None:
        self.partition = partition
        self.num_partitions = num_partitions
        self._owned: dict[str, bool] = {}  # group id -> whether this partition owns it (hashing it costs a µs)
        self.runtime = runtime
        self.telemetry = telemetry
        self.serves = serves
        self.read_topics = read_topics
        self.topic_refresh_s = topic_refresh_s
        self.topics: dict[str, int] = {}  # topic -> partition count, for the consumer groups' assignors
        self._topics_for: Any = None  # the shard that has them
        self._topics_asked = 0.0
        self.guard = RequestGuard(security, str(partition), telemetry.metrics)
        self.security_feed = SecurityFeed(self.guard, namespace)
        if self.guard.enabled:  # check every request's credentials and ACLs from now on
            self._first_feed = asyncio.get_running_loop().create_task(self.security_feed.turn())
            supervisor.start("security", self.security_feed.turn, CHECK_INTERVAL_S)

    def start(self, api: str, req: Any, method: str | None = None) -> Any:
        """Hand one request to the shard (its `method`, by default the one named as the API): an immediate
        response, or the shard's Deferred one."""
        if self.serves is not None and not self.serves():
            return error_response(api, req, Errors.NOT_COORDINATOR)
        if not self._owns_groups_of(api, req):
            return error_response(api, req, Errors.NOT_COORDINATOR)
        runtime = self.runtime()
        coord = runtime.coord if runtime is not None else None
        if coord is None:
            if api == Api.HEARTBEAT:
                return error_response(api, req, Errors.NONE)  # Kafka answers heartbeats blindly
            return error_response(api, req, Errors.COORDINATOR_LOAD_IN_PROGRESS)
        try:
            return getattr(coord, method or api)(req)
        except Exception:
            # The one place an exception becomes an answer: this request's, never its batch's neighbours'.
            self.telemetry.request_failed(api, req)
            return error_response(api, req, Errors.UNKNOWN_SERVER_ERROR)

    def _owns_groups_of(self, api: str, req: Any) -> bool:
        """Whether this partition owns every group `req` names (a field that is not a str names none)."""
        if api in _MANY_GROUPS_APIS:
            ids = getattr(req, "group_ids", ())
            return not isinstance(ids, (list, tuple)) or all(self.owns(g) for g in ids if isinstance(g, str))
        group_id = getattr(req, "group_id", None)  # ListGroups has none
        return not isinstance(group_id, str) or self.owns(group_id)

    def owns(self, group_id: str) -> bool:
        """Whether `group_id` hashes to this partition (remembered for the last _OWNED_CACHE_SIZE ids or so)."""
        owned = self._owned.get(group_id)
        if owned is None:
            if len(self._owned) >= _OWNED_CACHE_SIZE:
                self._owned.clear()
            owned = self._owned[group_id] = partition_for(group_id, self.num_partitions) == self.partition
        return owned

    async def call(self, api: str, req: Any, credentials: Any = None, method: str | None = None) -> Any:
        """One request of the remote API, authorized when the service authorizes; its answer once durable.
        `method` names the shard's handler when it is not the API's own (see start)."""
        if self.guard.enabled:
            handler = self._handle if method is None else functools.partial(self._handle, method=method)
            return await self.guard.call(api, req, credentials, handler)
        return await self._handle(api, req, method)

    async def _handle(self, api: str, req: Any, method: str | None = None) -> Any:
        started = time.perf_counter()
        result = self.start(api, req, method)
        response = await self._runtime().wait(result) if isinstance(result, Deferred) else result
        throttle_ms = self.throttle_ms()
        if throttle_ms and api in _THROTTLED_APIS:
            response = dataclasses.replace(response, throttle_time_ms=throttle_ms)
        self.telemetry.request(api, req, response, time.perf_counter() - started)
        return response

    def _runtime(self) -> PartitionRuntime:
        runtime = self.runtime()
        assert runtime is not None, "a Deferred answer comes only from a runtime's shard"
        return runtime

    def throttle_ms(self) -> int:
        """Kafka's throttle_time_ms for the responses going out now: > 0 once this actor runs behind."""
        runtime = self.runtime()
        return runtime.lag.throttle_time_ms() if runtime is not None else 0

    def update_topic_metadata(self, partitions: dict[str, int]) -> None:
        """Topic partition counts from the router; kept for a shard that is not serving yet."""
        self.topics.update(partitions)
        runtime = self.runtime()
        if runtime is not None and runtime.coord is not None:
            runtime.coord.update_topic_metadata(partitions)

    async def ensure_topics(self, reqs: list[Any]) -> None:
        """Ask the router for the topics once per serving shard, and again (at most every `topic_refresh_s`)
        when a heartbeat subscribes to a topic the shard has not heard of."""
        runtime = self.runtime()
        coord = runtime.coord if runtime is not None else None
        if coord is None:
            return
        unknown = any(t not in self.topics for r in reqs for t in (getattr(r, "subscribed_topic_names", None) or ()))
        refresh = unknown and self.topic_refresh_s is not None and \
            time.monotonic() - self._topics_asked > self.topic_refresh_s
        if self._topics_for is coord and not refresh:
            return
        self._topics_asked = time.monotonic()
        try:
            described = await self.read_topics()
            self.topics.update({name: info["partitions"] for name, info in described.items()})
        except Exception as e:  # no router (an in-process actor) or it is restarting: use what we have
            log.warning("partition %d could not read the topics from the router: %r", self.partition, e)
        self._topics_for = coord
        coord.update_topic_metadata(self.topics)

    async def batch(self, calls: list[tuple[str, Any]], credentials: Any = None) -> list[Any]:
        """Many requests in one actor call, handled in order; their responses in the same order once all are
        complete (a parked JoinGroup holds the batch)."""
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
            await self.ensure_topics(heartbeats)
        results: list[Any] = []
        started = False  # whether the shard produced a Deferred since the last kick
        deadline = time.perf_counter() + _BATCH_YIELD_S
        runtime = self.runtime()
        lag = runtime.lag if runtime is not None else None
        # Until its last request has run, the batch's age is lag: none of them may be judged late (see LagProbe).
        key = lag.batch_arrived() if lag is not None else 0
        try:
            for api, req in calls:
                result = self.start(api, req)
                results.append(result)
                started = started or isinstance(result, Deferred)
                if time.perf_counter() > deadline:
                    # Let finished flushes answer other callers, and start the fsync of what this batch wrote.
                    if started:
                        self._runtime().kick()
                        started = False
                    await asyncio.sleep(0)
                    deadline = time.perf_counter() + _BATCH_YIELD_S
        finally:
            if lag is not None:
                lag.batch_served(key)
        pending = [r for r in results if isinstance(r, Deferred)]
        if pending:
            await self._runtime().wait_all(pending)
        responses = [r.result() if isinstance(r, Deferred) else r for r in results]
        throttle_ms = self.throttle_ms()
        if throttle_ms:  # past its capacity: tell every heartbeat and commit of the batch to back off (Kafka's way)
            responses = _throttled(calls, responses, throttle_ms)
        self.telemetry.requests(calls, responses, time.perf_counter() - arrived)
        return responses


def _throttled(calls: list[tuple[str, Any]], responses: list[Any], throttle_ms: int) -> list[Any]:
    """The batch's responses with `throttle_time_ms` set on those of `_THROTTLED_APIS`. Heartbeat answers are
    frozen and mostly equal: each distinct one is copied once and shared (a batch of 500 NONEs: one object)."""
    heartbeats: dict[HeartbeatResponse, HeartbeatResponse] = {}
    out = []
    for (api, _), r in zip(calls, responses, strict=True):
        if api == Api.HEARTBEAT and type(r) is HeartbeatResponse:
            copy = heartbeats.get(r)
            if copy is None:
                copy = heartbeats[r] = dataclasses.replace(r, throttle_time_ms=throttle_ms)
            r = copy
        elif api in _THROTTLED_APIS:
            r = dataclasses.replace(r, throttle_time_ms=throttle_ms)
        out.append(r)
    return out


class GroupApi:
    """The remote API of an offsets partition, one method per request, served by the actor's `requests` path;
    each answers once its records are durable."""

    requests: RequestPath

    async def join_group(self, req: JoinGroupRequest, credentials: Any = None) -> JoinGroupResponse:
        """JoinGroup: join or rejoin a classic group; parks until the rebalance's join phase completes."""
        return await self.requests.call(Api.JOIN_GROUP, req, credentials)

    async def sync_group(self, req: SyncGroupRequest, credentials: Any = None) -> SyncGroupResponse:
        """SyncGroup: the member's assignment of the current generation (the leader sends everyone's)."""
        return await self.requests.call(Api.SYNC_GROUP, req, credentials)

    async def heartbeat(self, req: HeartbeatRequest, credentials: Any = None) -> HeartbeatResponse:
        """Heartbeat: keep a classic member's session alive; REBALANCE_IN_PROGRESS asks it to rejoin."""
        return await self.requests.call(Api.HEARTBEAT, req, credentials)

    async def leave_group(self, req: LeaveGroupRequest, credentials: Any = None) -> LeaveGroupResponse:
        """LeaveGroup: remove members (by member id or static instance id) from a classic group."""
        return await self.requests.call(Api.LEAVE_GROUP, req, credentials)

    async def commit_offsets(self, req: OffsetCommitRequest, credentials: Any = None) -> OffsetCommitResponse:
        """OffsetCommit: store a group's offsets, answered once they are durable."""
        return await self.requests.call(Api.OFFSET_COMMIT, req, credentials)

    async def fetch_offsets(self, req: OffsetFetchRequest, credentials: Any = None) -> OffsetFetchResponse:
        """OffsetFetch: a group's committed offsets (all, or of the partitions named)."""
        return await self.requests.call(Api.OFFSET_FETCH, req, credentials)

    async def list_groups(self, req: ListGroupsRequest | None = None, credentials: Any = None) -> ListGroupsResponse:
        """ListGroups over this partition's groups of both protocols (every group when `req` is None)."""
        return await self.requests.call(Api.LIST_GROUPS, req if req is not None else ListGroupsRequest(), credentials)

    async def describe_groups(self, req: DescribeGroupsRequest, credentials: Any = None) -> DescribeGroupsResponse:
        """DescribeGroups: classic groups' state, protocol and members, in request order."""
        return await self.requests.call(Api.DESCRIBE_GROUPS, req, credentials)

    async def list_groups_rows(self, req: ListGroupsRequest | None = None, credentials: Any = None
                               ) -> tuple[int, list[ListedRow]]:
        """ListGroups as (error code, flat rows), built without ListedGroups: how the router gathers a listing
        (see admin_fanout)."""
        resp = await self.requests.call(Api.LIST_GROUPS, req if req is not None else ListGroupsRequest(), credentials,
                                        method="list_groups_rows")
        if type(resp) is list:
            return int(Errors.NONE), resp
        rows = listed_rows(resp.groups)  # refused as a whole
        if rows is None:
            raise TypeError(f"a ListGroups answer that is not a list of ListedGroups: {resp!r:.200}")
        return int(resp.error), rows

    async def describe_groups_packed(self, req: DescribeGroupsRequest, credentials: Any = None) -> bytes:
        """DescribeGroups as flat rows packed by msgpack: how the router and AdminClient gather descriptions
        without building them here (see admin_fanout)."""
        resp = await self.requests.call(Api.DESCRIBE_GROUPS, req, credentials, method="describe_groups_rows")
        rows = resp if type(resp) is list else described_rows(resp.groups)  # refused, or some groups denied
        if rows is None:
            raise TypeError(f"a DescribeGroups answer that is not a list of DescribedGroups: {resp!r:.200}")
        return pack_described_rows(rows)

    async def delete_groups(self, req: DeleteGroupsRequest, credentials: Any = None) -> DeleteGroupsResponse:
        """DeleteGroups: remove empty groups with their offsets; a result per group id."""
        return await self.requests.call(Api.DELETE_GROUPS, req, credentials)

    async def delete_offsets(self, req: OffsetDeleteRequest, credentials: Any = None) -> OffsetDeleteResponse:
        """OffsetDelete: remove a group's offsets of topics it does not consume (KIP-496)."""
        return await self.requests.call(Api.OFFSET_DELETE, req, credentials)

    async def consumer_group_heartbeat(
        self, req: ConsumerGroupHeartbeatRequest, credentials: Any = None
    ) -> ConsumerGroupHeartbeatResponse:
        """ConsumerGroupHeartbeat (KIP-848), once the shard knows the topics the request subscribes to."""
        await self.requests.ensure_topics([req])
        return await self.requests.call(Api.CONSUMER_GROUP_HEARTBEAT, req, credentials)

    async def consumer_group_describe(
        self, req: ConsumerGroupDescribeRequest, credentials: Any = None
    ) -> ConsumerGroupDescribeResponse:
        """ConsumerGroupDescribe (KIP-848): consumer groups' epochs, assignor and members, in request order."""
        return await self.requests.call(Api.CONSUMER_GROUP_DESCRIBE, req, credentials)

    async def batch(self, calls: list[tuple[str, Any]], credentials: Any = None) -> OnePickle:
        """Many requests in one actor call (say, the heartbeats of every member a process hosts).

        The (api, request) pairs are handled in order, as if sent one after another; the answer is
        their responses in the same order, once all are complete (a parked JoinGroup holds it): a
        list to a caller through Ray, pickled whole (see client/wire.py).
        """
        return OnePickle(await self.requests.batch(calls, credentials))

    async def update_security(self) -> None:
        """The router's word that its security state changed: read it from the router now."""
        await self.requests.security_feed.turn()

    async def update_topic_metadata(self, partitions: dict[str, int]) -> None:
        """Topic partition counts from the router (pushed when topics are created or grow)."""
        self.requests.update_topic_metadata(partitions)

    async def set_metrics(self, on: bool, credentials: Any = None) -> bool:
        """Turn this partition's Ray metrics off or back on at runtime; returns whether they are on now.

        They can only come back on where the service was started with metrics; counters resume
        from the shard's totals, so nothing counted meanwhile is lost.
        """
        telemetry = self.requests.telemetry
        if not self.requests.guard.cluster_allowed(credentials, "set_metrics", "ALTER"):
            return telemetry.recording
        return telemetry.set_recording(on)

    async def crash(self, credentials: Any = None) -> None:
        """End this process at once, as a crash would (for fault tests and the demo; ALTER on the cluster)."""
        if not self.requests.guard.cluster_allowed(credentials, "crash", "ALTER"):
            return
        exit_process(EXIT_CRASH)

