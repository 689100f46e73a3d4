"""One Apache Kafka 4.4 broker (KRaft, single node) shared by every test of this folder, stopped after the last."""

from __future__ import annotations

import logging

import pytest
from session_resources import release_after_last_use

from benchmarks.kafka.broker import KafkaBroker

logger = logging.getLogger(__name__)


@pytest.fixture(scope="session")
def kafka_broker():
    """The session's Kafka broker on loopback (started on first use, about 1 GiB of heap)."""
    broker = KafkaBroker()
    broker.start()
    logger.info("Kafka broker %s started in %.1f s", broker.bootstrap, broker.start_seconds)
    release_after_last_use("kafka_broker", broker.stop)
    try:
        yield broker
    finally:
        broker.stop()
