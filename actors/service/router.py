"""The router actor: the directory of a service's partition actors, its admin fan-out and topic registry.

It is not on the hot path: clients compute a group's partition themselves and call the
partition actor directly; they come back here for admin calls and topic metadata.
"""

from __future__ import annotations

import asyncio
import contextlib
import dataclasses
import logging
import time
from typing import Any

import ray

from groupcoord.protocol import Errors, partition_for
from groupcoord.protocol.messages import (
    DeleteGroupsRequest,
    DeleteGroupsResponse,
    DescribeGroupsRequest,
    ListGroupsRequest,
)
from groupcoord.protocol.partitioner import partitions_for
from groupcoord.storage import StorageRoot
from groupcoord.storage.topics import TopicRegistry

from . import admin_fanout
from .admin_fanout import DescriptionRows, ListingRows
from .authorizer import RequestGuard
from .logs import configure_service_logging
from .names import ROUTER_NAME, partition_actor_name
from .partition_actor import PartitionActor
from .process_exit import EXIT_FAILURE, exit_process
from .replication.election import ReplicationManager
from .replication.repair import REPAIR_INTERVAL_S, repair_turn
from .replication.replica_actor import router_root_path
from .root_check import check_service_root
from .router_security import RouterSecurity
from .spec import ServiceSpec
from .supervisor import LoopSupervisor

log = logging.getLogger(__name__)


__all__ = ["ROUTER_NAME", "RouterActor", "partition_actor_options"]


def partition_actor_options(partition: int, namespace: str) -> dict:
    """Ray options of a partition actor: named, detached, restarted forever, spread, no whole CPU."""
    return {
        "name": partition_actor_name(partition),
        "namespace": namespace,
        "lifetime": "detached",
        "get_if_exists": True,
        "max_restarts": -1,
        "max_task_retries": 0,
        "num_cpus": 0,
        "scheduling_strategy": "SPREAD",
    }


def _router_metrics(spec: ServiceSpec) -> Any:
    """The router's own metrics (its auth failures), when the service exports metrics."""
    if not spec.observability.metrics or not spec.security.authorization:
        return None
    from .metrics import RayMetrics

    return RayMetrics(None)


class RouterActor(RouterSecurity):
    """Creates (or finds) the partition actors of a service and answers directory and admin calls."""

    def __init__(self, spec: ServiceSpec) -> None:
        configure_service_logging(None, spec.observability.log_format, spec.observability.log_level)
        self.spec = spec
        self.namespace = spec.namespace
        self.storage_path = storage_path = spec.storage_path
        self.num_partitions = num_partitions = spec.num_partitions
        self.error: str | None = None
        self.failures: dict[int, tuple[float, str]] = {}  # partition -> (when, why) of its last failure
        self.partitions: list[Any] = []
        self.topics: TopicRegistry | None = None
        self.replication: ReplicationManager | None = None
        self._root_lock: int | None = None
        self.security = None
        self.guard = RequestGuard(spec.security, "router")
        # A replicated service's router runs on the head node and keeps the placement in that node's own root.
        local_path = router_root_path(spec, ray.get_runtime_context().get_node_id())
        try:
            if spec.replication_factor > 1:
                check_service_root(local_path, num_partitions)  # on this node: start() checks a plain root
            root = StorageRoot(local_path, num_partitions, create=False)
            self._root_lock = root.lock_for_service()  # held for the router's life: one service per root
            self.topics = TopicRegistry(local_path)
            self._open_security(local_path, _router_metrics(spec))
            if spec.replication_factor > 1:
                self.replication = ReplicationManager(spec, self.partitions, local_path)
                replication = self.replication
                self.supervisor = LoopSupervisor("router", self._loop_failed)
                self.supervisor.start("replica repair", lambda: repair_turn(replication), REPAIR_INTERVAL_S)
                return
        except Exception as e:
            # Failing here would make Ray restart the router forever; report it instead.
            self.error = f"{type(e).__name__}: {e}"
            log.error("router cannot open storage root %s: %s", storage_path, self.error)
            return
        remote_cls = ray.remote(PartitionActor)
        self.partitions = [
            remote_cls.options(**partition_actor_options(i, spec.namespace)).remote(
                i, num_partitions, storage_path, spec.fsync, spec.config, spec.namespace, spec.observability,
                log_settings=spec.log,
                security=spec.security,
            )
            for i in range(num_partitions)
        ]

    # --- directory ---------------------------------------------------------------------------

    def _loop_failed(self, error: BaseException) -> None:
        """A supervised loop of the router cannot go on: end the process so that Ray restarts the router, which
        reads the replicas' epochs back (see election.py)."""
        log.critical("router: background loop failed, restarting: %r", error)
        exit_process(EXIT_FAILURE)

    async def info(self) -> dict:
        """The service's shape, and the error that keeps it from starting, if any."""
        return {
            "namespace": self.namespace,
            "storage_path": self.storage_path,
            "num_partitions": self.num_partitions,
            "fsync": self.spec.fsync,
            # How the service authorizes (super users, allow.everyone.if.no.acl.found), without the operator's hash.
            "security": dataclasses.replace(self.spec.security, admin_principal=None, admin_hash=None),
            "metrics": self.spec.observability.metrics,
            "error": self.error,
        }

    async def _leaders_learnt(self) -> None:
        """With replication, wait until a (re)started router has learnt each partition's leader from the replicas
        (or elected one): until then it knows none, and must not hand out None for an actor."""
        if self.replication is not None and not self.replication.ready.done():
            with contextlib.suppress(Exception):  # a failed bootstrap is the repair loop's to report
                await asyncio.shield(self.replication.ready)

    async def partition_handles(self) -> list:
        """The partition actors, by partition index (None for a partition without a leader now)."""
        await self._leaders_learnt()
        return list(self.partitions)

    async def find_coordinator(self, group_id: str) -> tuple[int, Any]:
        """The partition that owns `group_id` and its actor (Kafka's FindCoordinator); None for the actor while the
        partition has no leader (an election without a majority yet)."""
        p = partition_for(group_id, self.num_partitions)
        await self._leaders_learnt()
        return p, self.partitions[p]

    async def wait_ready(self, timeout_s: float = 120.0) -> bool:
        """Wait until every partition has replayed its log; False on timeout."""
        loop = asyncio.get_running_loop()
        deadline = loop.time() + timeout_s
        if self.replication is not None:
            try:
                await asyncio.wait_for(asyncio.shield(self.replication.ready), timeout_s)
            except TimeoutError:
                return False
        while loop.time() < deadline:
            # The current leaders each time: a partition whose first election found no majority yet has none
            # (a loaded machine), and its followers ask for another.
            handles = list(self.partitions)
            loaded = await asyncio.gather(*(h.is_loaded.remote() for h in handles if h is not None),
                                          return_exceptions=True)
            if None not in handles and all(ok is True for ok in loaded):
                return True
            await asyncio.sleep(0.05)
        return False

    async def status(self) -> list[dict]:
        """Every partition's status (see PartitionActor.status) and its last failure; an unreachable one says so."""
        results = await asyncio.gather(*(h.status.remote() for h in self.partitions), return_exceptions=True)
        out = [
            r
            if isinstance(r, dict)
            else {"partition": i, "loaded": False, "error": f"{type(r).__name__}: {r}"}
            for i, r in enumerate(results)
        ]
        for s in out:
            s["last_failure"] = await self.partition_failure(s["partition"])
        return out

    async def elect(self, partition: int, known_epoch: int) -> int:
        """A replica heard from no leader since epoch `known_epoch`: elect one unless a live leader exists."""
        if self.replication is None:
            raise RuntimeError("this service's partitions are not replicated")
        await self.replication.ready
        return await self.replication.elect(partition, known_epoch)

    async def describe_partitions(self) -> list[dict]:
        """Per partition: leader epoch, leader, replicas, in-sync replicas, follower lags (Ray node ids)."""
        if self.replication is None:
            statuses = await self.status()
            return [
                {"partition": s["partition"], "leader_epoch": 0, "leader": s.get("node_id"),
                 "replicas": [s["node_id"]] if s.get("node_id") else [],
                 "in_sync": [s["node_id"]] if s.get("loaded") else [], "lags": {}}
                for s in statuses
            ]
        return await self.replication.describe()

    async def report_failure(self, partition: int, reason: str) -> None:
        """A partition is about to exit because of `reason` (its storage failed); kept for clients and status."""
        log.error("partition %d failed: %s", partition, reason)
        self.failures[partition] = (time.time(), reason)

    async def partition_failure(self, partition: int) -> str | None:
        """The last failure a partition reported, with how long ago, or None."""
        failure = self.failures.get(partition)
        if failure is None:
            return None
        when, reason = failure
        return f"{reason} ({time.time() - when:.0f} s ago)"

    # --- admin fan-out -------------------------------------------------------------------------

    async def list_groups(self, req: ListGroupsRequest | None = None, credentials: Any = None) -> ListingRows:
        """ListGroups over every partition, arriving as a ListGroupsResponse sorted by group id; the first partition
        error is reported with the rest's groups."""
        return await admin_fanout.list_groups(self.partitions, req if req is not None else ListGroupsRequest(),
                                              credentials)

    def _by_partition(self, group_ids) -> dict[int, list[str]]:
        ids = list(group_ids)
        # An id that is not a string goes to partition 0, which refuses it; "" is an id partition 0 owns.
        owners = partitions_for([g if isinstance(g, str) else "" for g in ids], self.num_partitions)
        out: dict[int, list[str]] = {}
        for g, p in zip(ids, owners, strict=True):
            out.setdefault(p, []).append(g)
        return out

    async def describe_groups(self, req: DescribeGroupsRequest, credentials: Any = None) -> DescriptionRows:
        """DescribeGroups sent to the partitions that own the groups, arriving as a DescribeGroupsResponse in
        request order."""
        return await admin_fanout.describe_groups(self.partitions, self._describe_calls(req), req.group_ids,
                                                  credentials)

    async def describe_groups_parts(self, req: DescribeGroupsRequest, credentials: Any = None) -> list[Any]:
        """DescribeGroups sent to the partitions that own the groups; the refs of their answers (lists of
        DescribedRows), which the caller fetches from the partitions itself (AdminClient's big describes)."""
        return admin_fanout.describe_parts(self.partitions, self._describe_calls(req), credentials)

    def _describe_calls(self, req: DescribeGroupsRequest) -> list[tuple[int, list[str]]]:
        return admin_fanout.describe_calls(self._by_partition(req.group_ids), self.spec.config.max_items_per_request)

    async def delete_groups(self, req: DeleteGroupsRequest, credentials: Any = None) -> DeleteGroupsResponse:
        """DeleteGroups sent to the partitions that own the groups."""
        parts = self._by_partition(req.group_ids)
        responses = await asyncio.gather(
            *(self.partitions[p].delete_groups.remote(DeleteGroupsRequest(ids), credentials=credentials)
              for p, ids in parts.items())
        )
        results: dict[str, Errors] = {}
        for resp in responses:
            results.update(resp.results)
        return DeleteGroupsResponse(results)

    # --- topic registry ---------------------------------------------------------------------------

    def _registry(self) -> TopicRegistry:
        if self.topics is None:
            raise RuntimeError(f"the service cannot open its storage: {self.error}")
        return self.topics

    async def create_topic(self, name: str, partitions: int, credentials: Any = None) -> Errors:
        """Register a topic: TOPIC_ALREADY_EXISTS, INVALID_PARTITIONS or INVALID_TOPIC_EXCEPTION on bad input."""
        registry = self._registry()
        if (denied := self._topic_allowed(credentials, "create_topic", "CREATE", name)) != Errors.NONE:
            return denied
        if not isinstance(partitions, int) or isinstance(partitions, bool) or partitions < 1:
            return Errors.INVALID_PARTITIONS
        try:
            registry.create(name, partitions)
        except FileExistsError:
            return Errors.TOPIC_ALREADY_EXISTS
        except ValueError:
            return Errors.INVALID_TOPIC_EXCEPTION
        await self._push_topics()
        return Errors.NONE

    async def create_partitions(self, name: str, total: int, credentials: Any = None) -> Errors:
        """Grow a topic to `total` partitions (UNKNOWN_TOPIC_OR_PARTITION, INVALID_PARTITIONS)."""
        if (denied := self._topic_allowed(credentials, "create_partitions", "ALTER", name)) != Errors.NONE:
            return denied
        try:
            self._registry().set_partitions(name, total)
        except KeyError:
            return Errors.UNKNOWN_TOPIC_OR_PARTITION
        except (ValueError, TypeError):
            return Errors.INVALID_PARTITIONS
        await self._push_topics()
        return Errors.NONE

    async def _push_topics(self) -> None:
        """Tell every partition the partition counts (its consumer groups assign from them); best effort:
        a partition that misses this asks again when it loads or meets a topic it does not know."""
        counts = {name: topic.partitions for name, topic in self._registry().topics.items()}
        calls = [p.update_topic_metadata.remote(counts) for p in self.partitions]
        try:
            await asyncio.wait_for(asyncio.gather(*calls, return_exceptions=True), timeout=5.0)
        except TimeoutError:
            log.warning("not every partition took the new topic metadata within 5 s")

    async def describe_topics(self, names: list[str] | None = None, credentials: Any = None) -> dict[str, dict]:
        """Topic name → {"partitions": n, "end_offsets": {p: offset}} for the named (or all) topics."""
        topics = self._registry().topics
        wanted = topics.keys() if names is None else [n for n in names if n in topics]
        if self.guard.enabled:  # only the topics the caller may DESCRIBE (none without valid credentials)
            principal = self.guard.authenticate(credentials)
            authz = self.guard.authorizer
            wanted = [n for n in wanted if principal is not None and authz.authorize(principal, "DESCRIBE", "TOPIC", n)]
        return await self.topic_metadata(list(wanted))

    async def topic_metadata(self, names: list[str] | None = None) -> dict[str, dict]:
        """describe_topics for the service's own partitions (partition counts and end offsets, no check)."""
        topics = self._registry().topics
        wanted = topics.keys() if names is None else [n for n in names if n in topics]
        return {
            n: {"partitions": topics[n].partitions, "end_offsets": dict(topics[n].end_offsets)}
            for n in wanted
        }

    async def report_end_offsets(self, topic: str, offsets: dict[int, int], credentials: Any = None) -> Errors:
        """Record log-end offsets of a topic's partitions, for lag."""
        if (denied := self._topic_allowed(credentials, "report_end_offsets", "ALTER", topic)) != Errors.NONE:
            return denied
        try:
            self._registry().report_end_offsets(topic, offsets)
        except KeyError:
            return Errors.UNKNOWN_TOPIC_OR_PARTITION
        except (ValueError, TypeError, AttributeError):
            return Errors.INVALID_REQUEST
        return Errors.NONE

    # --- shutdown ---------------------------------------------------------------------------------

    async def stop_partitions(self) -> None:
        """Kill every partition actor for good (the service's data stays on disk)."""
        handles = self.partitions if self.replication is None else self.replication.handles()
        for h in handles:
            ray.kill(h, no_restart=True)
