"""Start, connect to and stop a groupcoord service on a Ray cluster."""

from __future__ import annotations

import logging
import os
import time
from pathlib import Path
from typing import Any

import ray
from ray.util.scheduling_strategies import NodeAffinitySchedulingStrategy

from groupcoord.protocol.config import GroupConfig
from groupcoord.storage.fileops import OS_FILES
from groupcoord.storage.root import PARTITION_DIR_PREFIX, ROOT_LOCK_FILE
from groupcoord.storage.writer import LOCK_FILE

from ..client.handle import Service, ServiceError
from .election import alive_node_ids
from .kafka import ensure_listener, listener_bootstrap, parse_listener, stop_listener
from .logs import LOG_FORMATS
from .names import ROUTER_NAME
from .placement import check_alive_nodes, check_replication, head_node_id
from .replica_actor import NODE_ID_FIELD, node_storage_path
from .root_check import check_service_root
from .router import RouterActor
from .spec import Observability, ServiceSpec

log = logging.getLogger(__name__)

DEFAULT_NAMESPACE = "groupcoord"
DEFAULT_STORAGE_PATH = os.environ.get("GROUPCOORD_STORAGE", os.path.join(os.getcwd(), "data", "groupcoord"))
FSYNC_POLICIES = ("always", "interval", "never")


def _ensure_ray(address: str | None, namespace: str) -> None:
    if ray.is_initialized():
        return
    if address is not None:
        ray.init(address=address, namespace=namespace)
        return
    try:
        ray.init(address="auto", namespace=namespace)
    except ConnectionError:
        log.info("no Ray cluster found; starting a local one")
        ray.init(namespace=namespace, include_dashboard=False)


def _router_options(namespace: str) -> dict:
    return {
        "name": ROUTER_NAME,
        "namespace": namespace,
        "lifetime": "detached",
        "get_if_exists": True,
        "max_restarts": -1,
        "max_task_retries": -1,
        "num_cpus": 0,
    }


def start(
    num_partitions: int = 16,
    storage_path: str | None = None,
    namespace: str = DEFAULT_NAMESPACE,
    fsync: str = "always",
    address: str | None = None,
    config: GroupConfig | None = None,
    wait_ready_s: float = 120.0,
    observability: Observability | None = None,
    replication_factor: int = 1,
    min_insync_replicas: int = 1,
    kafka_listener: str | None = None,
) -> Service:
    """Start the service on the current Ray cluster (or a local one), or reconnect to it if it runs.

    `observability` switches the Ray metrics on or off and sets their interval and the log format.
    With `replication_factor` > 1 every partition has that many replicas on distinct nodes, and a
    write is acknowledged once `min_insync_replicas` of them (at least a majority) hold it durably;
    `{node_id}` in `storage_path` names each node's own root (the router's is the head node's).
    ServiceError naming the path, touching nothing there, for a storage root another running service
    holds, a directory that is neither empty nor a groupcoord root, or a root listing a partition
    whose directory is missing. `kafka_listener` ("host:port", port 0: any free one) also serves Kafka's
    protocol there (see `Service.kafka_bootstrap`).
    """
    if not isinstance(num_partitions, int) or num_partitions < 1:
        raise ServiceError(f"num_partitions must be a positive int, got {num_partitions!r}")
    if fsync not in FSYNC_POLICIES:
        raise ServiceError(f"fsync must be one of {FSYNC_POLICIES}, got {fsync!r}")
    observability = observability or Observability()
    if observability.log_format not in LOG_FORMATS:
        raise ServiceError(f"log_format must be one of {LOG_FORMATS}, got {observability.log_format!r}")
    if not observability.interval_s > 0 or not observability.lag_interval_s > 0:
        raise ServiceError("the metrics interval and the lag interval must be positive (seconds)")
    check_replication(replication_factor, min_insync_replicas)
    if kafka_listener is not None:
        try:
            parse_listener(kafka_listener)
        except ValueError as e:
            raise ServiceError(str(e)) from None
    storage_path = os.path.abspath(storage_path or DEFAULT_STORAGE_PATH)
    _ensure_ray(address, namespace)
    options = _router_options(namespace)
    if replication_factor > 1:
        check_alive_nodes(replication_factor)
        # The router keeps the replica placement on its node's disk: the head node, whose loss ends the Ray
        # cluster anyway (its GCS is there). Hard affinity: on a loaded head a soft one lands on a worker,
        # whose loss would lose the placement. That node's own root is checked (and created) by the router
        # itself, on its node: the driver's node id on a shared machine can be any node's.
        options["scheduling_strategy"] = NodeAffinitySchedulingStrategy(head_node_id(), soft=False)
    elif _running_router(namespace) is None:
        check_service_root(storage_path, num_partitions)
    router = (
        ray.remote(RouterActor)
        .options(**options)
        .remote(
            ServiceSpec(
                namespace,
                storage_path,
                num_partitions,
                fsync,
                config or GroupConfig(),
                observability=observability,
                replication_factor=replication_factor,
                min_insync_replicas=min_insync_replicas,
            )
        )
    )
    info = ray.get(router.info.remote())
    if info["error"]:
        ray.kill(router, no_restart=True)
        raise ServiceError(f"the service cannot start: {info['error']}")
    if info["num_partitions"] != num_partitions or info["storage_path"] != storage_path:
        raise ServiceError(
            f"a service already runs in namespace {namespace!r} with {info['num_partitions']} partitions "
            f"at {info['storage_path']}; connect() to it, or stop() it first"
        )
    if not ray.get(router.wait_ready.remote(wait_ready_s)):
        raise ServiceError(f"partitions did not load their logs within {wait_ready_s} s")
    if kafka_listener is not None:
        try:
            ensure_listener(namespace, kafka_listener)
        except RuntimeError as e:
            raise ServiceError(str(e)) from None
    return _handle(router, info)


def _running_router(namespace: str) -> Any | None:
    try:
        return ray.get_actor(ROUTER_NAME, namespace=namespace)
    except ValueError:
        return None


def connect(namespace: str = DEFAULT_NAMESPACE, address: str | None = None) -> Service:
    """A handle on the service running in `namespace`; ServiceError if there is none."""
    _ensure_ray(address, namespace)
    try:
        router = ray.get_actor(ROUTER_NAME, namespace=namespace)
    except ValueError:
        raise ServiceError(
            f"no groupcoord service runs in namespace {namespace!r}; start one with `groupcoord start`"
        ) from None
    return _handle(router, ray.get(router.info.remote()))


def _handle(router: Any, info: dict) -> Service:
    return Service(
        info["namespace"],
        info["num_partitions"],
        info["storage_path"],
        router,
        ray.get(router.partition_handles.remote()),
        listener_bootstrap(info["namespace"]),
    )


def stop(namespace: str = DEFAULT_NAMESPACE) -> bool:
    """Stop the service's actors (its data stays on disk); False if none was running."""
    if not ray.is_initialized():
        _ensure_ray(None, namespace)
    router = _running_router(namespace)
    if router is None:
        return False
    info = ray.get(router.info.remote())
    stop_listener(namespace)
    ray.get(router.stop_partitions.remote())
    ray.kill(router, no_restart=True)
    _wait_storage_released(info["storage_path"], info["num_partitions"])
    return True


def _wait_storage_released(storage_path: str, num_partitions: int, timeout_s: float = 30.0) -> None:
    """Wait until the killed actors' processes let go of the root and partition locks (seen from this node)."""
    if NODE_ID_FIELD in storage_path:  # the own roots of the alive nodes (a dead node's actors hold nothing)
        roots = [Path(node_storage_path(storage_path, n)) for n in alive_node_ids()]
    else:
        roots = [Path(storage_path)]
    locks = [path for root in roots for path in
             [root / ROOT_LOCK_FILE] + [root / f"{PARTITION_DIR_PREFIX}{p}" / LOCK_FILE for p in range(num_partitions)]]
    pending = [path for path in locks if path.exists()]
    deadline = time.monotonic() + timeout_s
    while pending and time.monotonic() < deadline:
        still = []
        for path in pending:
            handle = OS_FILES.lock(path)
            if handle is None:
                still.append(path)
            else:
                OS_FILES.unlock(handle)
        pending = still
        if pending:
            time.sleep(0.02)
    if pending:
        log.warning("stopped, but %s still locked after %.0f s", pending[0], timeout_s)
