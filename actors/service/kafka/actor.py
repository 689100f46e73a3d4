"""The Ray actor that runs a service's Kafka listener: its own event loop in a thread, bound in the constructor,
so that a listener Ray restarts serves again on the same address without anyone asking it to."""

from __future__ import annotations

import asyncio
import logging
import socket
import threading
from typing import Any

import ray

from ..names import ROUTER_NAME
from .bridge import ServiceBridge, cluster_id_of
from .listener import KafkaListener
from .sasl_verifier import PlainVerifier

log = logging.getLogger(__name__)

KAFKA_LISTENER_NAME = "groupcoord-kafka-listener"
_BIND_TIMEOUT_S = 30.0


def parse_listener(address: str) -> tuple[str, int]:
    """("host", port) of "host:port" (port 0: any free port); ValueError naming the address otherwise."""
    host, sep, port = str(address).rpartition(":")
    if not sep or not host or not port.isdigit() or not 0 <= int(port) <= 65535:
        raise ValueError(f"a Kafka listener is HOST:PORT with PORT in 0..65535, got {address!r}")
    return host.strip("[]"), int(port)


def free_port(host: str) -> int:
    """A port free on `host` now (the listener then keeps it across restarts)."""
    family = socket.AF_INET6 if ":" in host else socket.AF_INET
    with socket.socket(family, socket.SOCK_STREAM) as s:
        s.bind((host, 0))
        return s.getsockname()[1]


def advertised_host(host: str) -> str:
    """The host clients are told: the bind address, or this node's address for a wildcard bind."""
    return ray.util.get_node_ip_address() if host in ("0.0.0.0", "::", "") else host


class KafkaListenerActor:
    """Runs a KafkaListener for the service of `namespace` on (host, port); `info()` says where, or why not."""

    def __init__(self, namespace: str, host: str, port: int) -> None:
        self.error: str | None = None
        self._loop = asyncio.new_event_loop()
        self._thread = threading.Thread(target=self._loop.run_forever, name="kafka-listener", daemon=True)
        self._thread.start()
        self.listener: KafkaListener | None = None
        try:
            router = ray.get_actor(ROUTER_NAME, namespace=namespace)
            info = ray.get(router.info.remote())
            partitions = ray.get(router.partition_handles.remote())
            bridge = ServiceBridge(
                namespace, info["num_partitions"], router, partitions,
                cluster_id_of(namespace, info["storage_path"]),
            )
            # A service that authorizes gets a SASL_PLAINTEXT listener checking its principals.
            security = info["security"]
            verifier = PlainVerifier(namespace, security, _auth_metrics(info)) if security.authorization else None
            listener = KafkaListener(bridge, host, port, advertised_host(host), verifier=verifier)
            asyncio.run_coroutine_threadsafe(listener.start(), self._loop).result(_BIND_TIMEOUT_S)
            self.listener = listener
        except Exception as e:  # reported through info() (raising would make Ray restart it forever)
            self.error = f"{type(e).__name__}: {e}"
            log.error("Kafka listener cannot start on %s:%d: %s", host, port, self.error)

    def info(self) -> dict[str, Any]:
        """{"bootstrap": "host:port" or None, "error": why it does not listen, or None}."""
        listener = self.listener
        bootstrap = f"{listener.advertised_host}:{listener.port}" if listener is not None else None
        return {"bootstrap": bootstrap, "error": self.error}

    def stats(self) -> dict[str, Any]:
        """The listener's counters (connections, requests by API version, bad input, handler failures)."""
        return self.listener.stats() if self.listener is not None else {}

    def close(self) -> None:
        """Stop listening and end every connection."""
        if self.listener is not None:
            asyncio.run_coroutine_threadsafe(self.listener.close(), self._loop).result(_BIND_TIMEOUT_S)


def _auth_metrics(info: dict) -> Any:
    """The metrics the listener counts failed logins in (groupcoord_auth_failures_total), when the service
    exports metrics."""
    if not info.get("metrics"):
        return None
    from ..metrics import RayMetrics

    return RayMetrics(None)


def _listener_options(namespace: str) -> dict:
    from ray.util.scheduling_strategies import NodeAffinitySchedulingStrategy

    from ..replication.placement import head_node_id

    return {"name": KAFKA_LISTENER_NAME, "namespace": namespace, "lifetime": "detached", "get_if_exists": True,
            "max_restarts": -1, "num_cpus": 0,
            "scheduling_strategy": NodeAffinitySchedulingStrategy(head_node_id(), soft=False)}


def running_listener(namespace: str) -> Any | None:
    """The Kafka listener actor of the service in `namespace`, or None."""
    try:
        return ray.get_actor(KAFKA_LISTENER_NAME, namespace=namespace)
    except ValueError:
        return None


def ensure_listener(namespace: str, address: str) -> str:
    """Start the service's Kafka listener on `address` (unless one runs) and return its bootstrap "host:port";
    RuntimeError saying why when it cannot listen."""
    actor = running_listener(namespace)
    if actor is None:
        host, port = parse_listener(address)
        port = port or free_port(host)  # fixed now, so that a restarted listener binds the same port
        actor = ray.remote(KafkaListenerActor).options(**_listener_options(namespace)).remote(namespace, host, port)
    info = ray.get(actor.info.remote())
    if info["error"]:
        ray.kill(actor, no_restart=True)
        raise RuntimeError(f"the Kafka listener cannot start on {address}: {info['error']}")
    return info["bootstrap"]


def listener_bootstrap(namespace: str) -> str | None:
    """The bootstrap "host:port" of the service's Kafka listener, or None without one."""
    actor = running_listener(namespace)
    return None if actor is None else ray.get(actor.info.remote())["bootstrap"]


def stop_listener(namespace: str) -> None:
    """Stop the service's Kafka listener, if it has one."""
    actor = running_listener(namespace)
    if actor is not None:
        try:
            ray.get(actor.close.remote(), timeout=10)
        except Exception as e:  # it is killed anyway
            log.debug("Kafka listener did not close cleanly: %r", e)
        ray.kill(actor, no_restart=True)
