"""The Kafka fixture itself: the broker answers over our wire client with Kafka 4.4's group APIs."""

from __future__ import annotations

from benchmarks.kafka.wire import KafkaConnection, api_versions, request_class

GROUP_APIS = {10: "FindCoordinator", 11: "JoinGroup", 12: "Heartbeat", 13: "LeaveGroup", 14: "SyncGroup",
              15: "DescribeGroups", 16: "ListGroups", 42: "DeleteGroups", 47: "OffsetDelete",
              68: "ConsumerGroupHeartbeat", 69: "ConsumerGroupDescribe"}


def test_broker_serves_the_group_apis(kafka_broker):
    with KafkaConnection(kafka_broker.bootstrap) as conn:
        versions = api_versions(conn)
        missing = [name for key, name in GROUP_APIS.items() if key not in versions]
        assert missing == []
        assert versions[68][1] >= 1  # ConsumerGroupHeartbeat v1: KIP-848 on by default in Kafka 4
        answer = conn.request(request_class("find_coordinator", 6)(key_type=0, coordinator_keys=("g",)))
        (coordinator,) = answer.coordinators
        assert (coordinator.error_code, coordinator.port) == (0, kafka_broker.port)


def test_pipelined_requests_come_back_in_order(kafka_broker):
    describe = request_class("describe_groups", 5)
    with KafkaConnection(kafka_broker.bootstrap) as conn:
        for name in ("a", "b", "c"):
            conn.send(describe(groups=(f"pipelined-{name}",), include_authorized_operations=False))
        answers = [conn.receive() for _ in range(3)]
    assert [a.groups[0].group_id for a in answers] == ["pipelined-a", "pipelined-b", "pipelined-c"]
    assert [(a.groups[0].error_code, a.groups[0].group_state) for a in answers] == [(0, "Dead")] * 3, answers


def test_a_new_cluster_id_never_starts_with_a_dash(monkeypatch):
    """kafka-storage's parser takes an id starting with "-" for an option: 1 broker start in 64 failed so."""
    import uuid

    from benchmarks.kafka import broker

    dashed = uuid.UUID(bytes=b"\xfb" + bytes(15))  # URL-safe base64 "-w..."
    draws = iter([dashed, dashed, uuid.UUID(int=1)])
    monkeypatch.setattr(broker.uuid, "uuid4", lambda: next(draws))
    assert broker.new_cluster_id() == "AAAAAAAAAAAAAAAAAAAAAQ"
