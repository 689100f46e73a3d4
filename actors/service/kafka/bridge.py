"""The listener's way into the service: group requests to the partition actors, admin calls to the router.

Heartbeats, commits, offset fetches and consumer-group heartbeats go through the client's request
coalescer (one link per partition actor, shared `batch` calls), as GroupMember's do; the others
are direct actor calls. A Kafka client does its own retries, so a partition actor that cannot
answer is reported to it with Kafka's error instead of being retried here.
"""

from __future__ import annotations

import asyncio
import base64
import logging
import time
import uuid
from typing import Any, Callable

import ray

from groupcoord.protocol import Errors, partition_for

from ...client.coalescer import COALESCED_APIS, CoalescerClosedError, coalescer_for

log = logging.getLogger(__name__)

# Topic metadata is read from the router at most this often (Metadata, ListOffsets, Fetch and topic ids use it).
TOPICS_MAX_AGE_S = 1.0
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
        self._topics: dict[str, dict] = {}
        self._topics_at = -1e9
        self._topics_lock = asyncio.Lock()
        self._id_seed = uuid.uuid5(_TOPIC_ID_NAMESPACE, cluster_id)

    async def call(self, group_id: str, api: str, request: Any, on_error: Callable[[Errors], Any]) -> Any:
        """The response of the partition actor owning `group_id`; `on_error(code)` when it cannot answer."""
        partition = partition_for(group_id, self.num_partitions)
        handle = self.partitions[partition]
        try:
            if api in COALESCED_APIS:
                try:
                    future = coalescer_for(self.namespace, partition, handle).submit(api, request)
                except CoalescerClosedError:  # retired just now: a new leader's link
                    future = coalescer_for(self.namespace, partition, handle).submit(api, request)
                response = await asyncio.wrap_future(future)
            else:
                response = await getattr(handle, api).remote(request)
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

    async def router_call(self, method: str, *args: Any) -> Any:
        """A call to the router (admin fan-out, topic registry); Ray's error if it cannot answer."""
        return await getattr(self.router, method).remote(*args)

    async def topics(self, fresh: bool = False) -> dict[str, dict]:
        """The registry's topics: name -> {"partitions": n, "end_offsets": {p: offset}} (cached for a second)."""
        async with self._topics_lock:
            if fresh or time.monotonic() - self._topics_at > TOPICS_MAX_AGE_S:
                try:
                    self._topics = await self.router_call("describe_topics", None)
                    self._topics_at = time.monotonic()
                except ray.exceptions.RayError as e:
                    log.info("router unreachable for topic metadata, using the last known: %r", e)
            return self._topics

    def topic_id(self, name: str) -> uuid.UUID:
        """The topic's id: derived from its name and the cluster, so it is the same on every listener."""
        return uuid.uuid5(self._id_seed, name)

    async def topic_name(self, topic_id: Any) -> str | None:
        """The name of the registry topic with this id, or None."""
        for fresh in (False, True):
            for name in await self.topics(fresh):
                if self.topic_id(name) == topic_id:
                    return name
        return None
