"""A groupcoord service for one test module, on the suite's shared local Ray."""

from __future__ import annotations

import contextlib
from typing import Any, Iterator

from groupcoord.actors import start, stop
from groupcoord.protocol import GroupConfig


@contextlib.contextmanager
def running_service(
    tmp_path_factory: Any, namespace: str, num_partitions: int, initial_rebalance_delay_ms: int = 300,
    kafka_listener: str | None = None, security: dict | None = None, **config: Any
) -> Iterator[Any]:
    """Start a service with its storage in a fresh temporary directory and test-sized timeouts (and a Kafka
    listener on `kafka_listener`, and start()'s security options `security`, if given); stop it after."""
    service = start(
        num_partitions=num_partitions,
        storage_path=str(tmp_path_factory.mktemp(namespace)),
        namespace=namespace,
        kafka_listener=kafka_listener,
        config=GroupConfig(min_session_timeout_ms=100, initial_rebalance_delay_ms=initial_rebalance_delay_ms, **config),
        **(security or {}),
    )
    try:
        yield service
    finally:
        stop(namespace)
