"""The listener's way into the service: group requests to the partition actors, admin calls to the router.

Heartbeats, commits, offset fetches and consumer-group heartbeats go through the client's request
coalescer (one link per partition actor, shared `batch` calls), as GroupMember's do; the others
are direct actor calls. Every call carries the credentials its connection authenticated with over
SASL/PLAIN (none when the service does not authorize), so the partition actors check it as they
check GroupMember's, and the throttle time they answer reaches the Kafka client. A Kafka client
does its own retries, so a partition actor that cannot answer is reported to it with Kafka's
error instead of being retried here.
"""

from __future__ import annotations

import asyncio
import base64
import logging
import time
import uuid
from typing import Any, Awaitable, Callable

import ray

from groupcoord.protocol import Errors, partition_for
from groupcoord.protocol.security.credentials import Credentials

from ...client.coalescer import COALESCED_APIS, CoalescerClosedError, coalescer_for

log = logging.getLogger(__name__)

# Topic metadata is read from the router at most this often (Metadata, ListOffsets, Fetch and topic ids use it).
TOPICS_MAX_AGE_S = 1.0
# May (principal, operation, resource type, resource name) go ahead, as the service's ACLs say now?
Authorize = Callable[[str, str, str, str], Awaitable[bool]]
# Principals whose topic views are cached at once (more: the cache starts again).
_TOPIC_VIEWS_LIMIT = 1024
_TOPIC_ID_NAMESPACE = uuid.UUID("5b0f3f2e-8f3a-4d6c-9a55-6b1c2d7e9f10")


def cluster_id_of(namespace: str, storage_path: str) -> str:
    """A Kafka-style cluster id (22 characters of URL-safe base64) that stays the same for one service."""
    raw = uuid.uuid5(_TOPIC_ID_NAMESPACE, f"{namespace}\0{storage_path}").bytes
    return base64.urlsafe_b64encode(raw).decode().rstrip("=")


class ServiceBridge:
    """Sends the listener's translated requests to a service's partition actors and router."""

    def __init__(self, namespace: str, num_partitions: int, router: Any, partitions: list[Any], cluster_id: str):
        self.namespace = namespace
        self.num_partitions = num_partitions
        self.router = router
        self.partitions = list(partitions)
        self.cluster_id = cluster_id
        # Topic metadata as each principal may see it (the router shows only the topics it may DESCRIBE):
        # credentials (None: none) -> (when read, topics).
        self._topics: dict[Credentials | None, tuple[float, dict[str, dict]]] = {}
        self._topics_lock = asyncio.Lock()
        self._id_seed = uuid.uuid5(_TOPIC_ID_NAMESPACE, cluster_id)

    def session(self, credentials: Credentials | None, authorize: Authorize | None = None) -> BridgeSession:
        """The bridge as one request of a connection authenticated as `credentials` (None: none) uses it;
        `authorize` tells a topic the principal may not see from one that does not exist."""
        return BridgeSession(self, credentials, authorize)

    async def call(self, group_id: str, api: str, request: Any, on_error: Callable[[Errors], Any],
                   credentials: Credentials | None = None) -> Any:
        """The response of the partition actor owning `group_id`, asked with `credentials`; `on_error(code)`
        when it cannot answer."""
        partition = partition_for(group_id, self.num_partitions)
        handle = self.partitions[partition]
        try:
            if api in COALESCED_APIS:
                try:
                    future = coalescer_for(self.namespace, partition, handle, credentials).submit(api, request)
                except CoalescerClosedError:  # retired just now: a new leader's link
                    future = coalescer_for(self.namespace, partition, handle, credentials).submit(api, request)
                response = await asyncio.wrap_future(future)
            elif credentials is None:
                response = await getattr(handle, api).remote(request)
            else:
                response = await getattr(handle, api).remote(request, credentials=credentials.wire)
        except (ray.exceptions.RayError, ConnectionError, RuntimeError) as e:
            log.info("partition %d could not answer %s for %r: %r", partition, api, group_id, e)
            await self._refresh_partitions()
            return on_error(Errors.COORDINATOR_NOT_AVAILABLE)
        if getattr(response, "error", None) == Errors.NOT_COORDINATOR:
            await self._refresh_partitions()  # another replica leads: the client retries through us
        return response

    async def _refresh_partitions(self) -> None:
        try:
            self.partitions = list(await self.router.partition_handles.remote())
        except ray.exceptions.RayError as e:
            log.info("router unreachable while refreshing partition handles: %r", e)

    async def router_call(self, method: str, *args: Any, credentials: Credentials | None = None) -> Any:
        """A call to the router (admin fan-out, topic registry) with `credentials`; Ray's error if it cannot answer."""
        call = getattr(self.router, method)
        if credentials is None:
            return await call.remote(*args)
        return await call.remote(*args, credentials=credentials.wire)

    async def topics(self, fresh: bool = False, credentials: Credentials | None = None) -> dict[str, dict]:
        """The registry's topics `credentials` may see: name -> {"partitions": n, "end_offsets": {p: offset}}
        (cached for a second)."""
        async with self._topics_lock:
            at, known = self._topics.get(credentials, (-1e9, {}))
            if fresh or time.monotonic() - at > TOPICS_MAX_AGE_S:
                try:
                    known = await self.router_call("describe_topics", None, credentials=credentials)
                    if len(self._topics) >= _TOPIC_VIEWS_LIMIT:
                        self._topics.clear()
                    self._topics[credentials] = (time.monotonic(), known)
                except ray.exceptions.RayError as e:
                    log.info("router unreachable for topic metadata, using the last known: %r", e)
            return known

    def topic_id(self, name: str) -> uuid.UUID:
        """The topic's id: derived from its name and the cluster, so it is the same on every listener."""
        return uuid.uuid5(self._id_seed, name)

    async def topic_name(self, topic_id: Any, credentials: Credentials | None = None) -> str | None:
        """The name of the registry topic with this id (among those `credentials` may see), or None."""
        for fresh in (False, True):
            for name in await self.topics(fresh, credentials):
                if self.topic_id(name) == topic_id:
                    return name
        return None


class BridgeSession:
    """The bridge as one request sees it: every call carries its connection's credentials, and the longest
    throttle time a partition actor asked for (a request quota) is kept for the Kafka response."""

    def __init__(self, bridge: ServiceBridge, credentials: Credentials | None,
                 authorize: Authorize | None = None) -> None:
        self.bridge = bridge
        self.credentials = credentials
        self.authorize = authorize
        self.cluster_id = bridge.cluster_id
        self.throttle_ms = 0

    async def call(self, group_id: str, api: str, request: Any, on_error: Callable[[Errors], Any]) -> Any:
        """ServiceBridge.call with this connection's credentials."""
        response = await self.bridge.call(group_id, api, request, on_error, self.credentials)
        self.throttle_ms = max(self.throttle_ms, getattr(response, "throttle_time_ms", 0) or 0)
        return response

    async def router_call(self, method: str, *args: Any) -> Any:
        """ServiceBridge.router_call with this connection's credentials."""
        return await self.bridge.router_call(method, *args, credentials=self.credentials)

    async def topics(self, fresh: bool = False) -> dict[str, dict]:
        """The topics this connection's principal may see."""
        return await self.bridge.topics(fresh, self.credentials)

    def topic_id(self, name: str) -> uuid.UUID:
        """The topic's id (the same for every principal)."""
        return self.bridge.topic_id(name)

    async def topic_name(self, topic_id: Any) -> str | None:
        """The name of the topic with this id, among those this connection's principal may see."""
        return await self.bridge.topic_name(topic_id, self.credentials)

    async def missing_topic(self, name: str | None, operation: str) -> Errors:
        """Why a topic named in a request is not among those this principal sees: TOPIC_AUTHORIZATION_FAILED
        if it may not do `operation` on it (whether or not it exists, as Kafka answers), else
        UNKNOWN_TOPIC_OR_PARTITION."""
        if self.credentials is None or self.authorize is None or name is None:
            return Errors.UNKNOWN_TOPIC_OR_PARTITION
        if await self.authorize(self.credentials.principal, operation, "TOPIC", name):
            return Errors.UNKNOWN_TOPIC_OR_PARTITION
        return Errors.TOPIC_AUTHORIZATION_FAILED
