"""One service with a Kafka listener for a test module, and the bootstrap address Kafka clients are given."""

from __future__ import annotations

import pytest
from services import running_service

from groupcoord.actors import AdminClient

NAMESPACE = "gc-test-kafka-wire"
TOPIC = "orders"


@pytest.fixture(scope="module")
def kafka_service(ray_local, tmp_path_factory):
    """A service (2 partitions, test-sized timeouts) serving Kafka's protocol on a free loopback port, with the
    topic "orders" (6 partitions, end offsets 100 each) in its registry."""
    with running_service(
        tmp_path_factory, NAMESPACE, 2, kafka_listener="127.0.0.1:0",
        consumer_heartbeat_interval_ms=300, consumer_session_timeout_ms=6000,
    ) as service:
        admin = AdminClient(service)
        admin.create_topic(TOPIC, 6)
        admin.report_end_offsets(TOPIC, {p: 100 for p in range(6)})
        yield service


@pytest.fixture(scope="module")
def kafka_bootstrap(kafka_service) -> str:
    """The "host:port" Kafka clients bootstrap from."""
    assert kafka_service.kafka_bootstrap is not None
    return kafka_service.kafka_bootstrap
