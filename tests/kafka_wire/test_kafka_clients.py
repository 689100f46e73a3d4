"""Kafka's own Python clients, unchanged, as members of groupcoord's groups through the Kafka listener."""

from __future__ import annotations

import asyncio
import threading
import time

import aiokafka
import kafka
from aiokafka.structs import OffsetAndMetadata as AioOffset
from aiokafka.structs import TopicPartition as AioTopicPartition
from confluent_kafka import Consumer
from confluent_kafka import TopicPartition as CkTopicPartition
from conftest import TOPIC
from waiting import wait_for

from groupcoord.actors import AdminClient, GroupMember
from groupcoord.protocol import OffsetAndMetadata, TopicPartition

ALL = {(TOPIC, p) for p in range(6)}


class PythonConsumer(threading.Thread):
    """A kafka-python KafkaConsumer polling in its own thread; what it owns is readable from the test."""

    def __init__(self, bootstrap: str, group: str, name: str) -> None:
        super().__init__(name=name, daemon=True)
        self.consumer = kafka.KafkaConsumer(
            TOPIC, bootstrap_servers=bootstrap, group_id=group, client_id=name, enable_auto_commit=False,
            heartbeat_interval_ms=200, session_timeout_ms=6000, fetch_max_wait_ms=100,
        )
        self.owned: set[tuple[str, int]] = set()
        self.commits: list[dict] = []
        self._stopping = threading.Event()
        self._lock = threading.Lock()

    def run(self) -> None:
        while not self._stopping.is_set():
            self.consumer.poll(timeout_ms=100)
            with self._lock:
                self.owned = {(tp.topic, tp.partition) for tp in self.consumer.assignment()}
                while self.commits:
                    self.consumer.commit(offsets=self.commits.pop(0))
        self.consumer.close()

    def commit(self, offsets: dict) -> None:
        with self._lock:
            self.commits.append(offsets)

    def stop(self) -> None:
        self._stopping.set()
        self.join(30)


def shares(consumers: list[PythonConsumer]) -> list[int]:
    """How many partitions each consumer owns, if together they own the topic exactly once (else [])."""
    owned = [c.owned for c in consumers]
    if sum(map(len, owned)) != len(ALL) or set().union(*owned) != ALL:
        return []
    return [len(o) for o in owned]


def test_three_kafka_python_consumers_share_six_partitions_rebalance_and_commit(kafka_bootstrap):
    consumers = [PythonConsumer(kafka_bootstrap, "kp-share", f"kp-{i}") for i in range(3)]
    for c in consumers:
        c.start()
    try:
        wait_for(lambda: shares(consumers) == [2, 2, 2], 60, "three kafka-python consumers to own two partitions each")
        for c in consumers:  # each commits what it owns; the consumers get no records, so offsets are given
            c.commit({kafka.TopicPartition(t, p): kafka.OffsetAndMetadata(10 + p, "kp", -1) for t, p in c.owned})
        leaving = consumers.pop()
        leaving.stop()
        wait_for(lambda: shares(consumers) == [3, 3], 60, "the two remaining consumers to take the leaver's partitions")
        reader = kafka.KafkaConsumer(bootstrap_servers=kafka_bootstrap, group_id="kp-share", enable_auto_commit=False)
        try:
            committed = {p: reader.committed(kafka.TopicPartition(TOPIC, p)) for p in range(6)}
            metadata = reader.committed(kafka.TopicPartition(TOPIC, 0), metadata=True).metadata
        finally:
            reader.close()
        assert committed == {p: 10 + p for p in range(6)}
        assert metadata == "kp"
    finally:
        for c in consumers:
            c.stop()


def _confluent(bootstrap: str, group: str, protocol: str) -> Consumer:
    conf = {"bootstrap.servers": bootstrap, "group.id": group, "enable.auto.commit": False,
            "group.protocol": protocol, "fetch.wait.max.ms": 100}
    if protocol == "classic":
        conf.update({"session.timeout.ms": 6000, "heartbeat.interval.ms": 200})
    return Consumer(conf)


def _confluent_round_trip(bootstrap: str, group: str, protocol: str) -> None:
    first, second = _confluent(bootstrap, group, protocol), _confluent(bootstrap, group, protocol)
    try:
        first.subscribe([TOPIC])
        second.subscribe([TOPIC])

        def shared() -> bool:
            first.poll(0.05)
            second.poll(0.05)
            a = {(tp.topic, tp.partition) for tp in first.assignment()}
            b = {(tp.topic, tp.partition) for tp in second.assignment()}
            return len(a) == 3 and len(b) == 3 and a | b == ALL

        wait_for(shared, 60, f"two confluent-kafka consumers ({protocol}) to share the topic", interval_s=0)
        owned = first.assignment()
        first.commit(offsets=[CkTopicPartition(TOPIC, tp.partition, 40 + tp.partition) for tp in owned],
                     asynchronous=False)
        back = first.committed([CkTopicPartition(TOPIC, tp.partition) for tp in owned], timeout=30)
        assert {tp.partition: tp.offset for tp in back} == {tp.partition: 40 + tp.partition for tp in owned}
    finally:
        first.close()
        second.close()


def test_confluent_kafka_classic_protocol(kafka_service, kafka_bootstrap):
    _confluent_round_trip(kafka_bootstrap, "ck-classic", "classic")
    listed = {g.group_id: g for g in AdminClient(kafka_service).list_groups()}
    assert listed["ck-classic"].group_type == "classic"


def test_confluent_kafka_consumer_protocol(kafka_service, kafka_bootstrap):
    _confluent_round_trip(kafka_bootstrap, "ck-consumer", "consumer")
    listed = {g.group_id: g for g in AdminClient(kafka_service).list_groups()}
    assert listed["ck-consumer"].group_type == "consumer"


def test_aiokafka_consumer_joins_and_commits(kafka_bootstrap):
    async def scenario() -> tuple[set, int | None]:
        consumer = aiokafka.AIOKafkaConsumer(TOPIC, bootstrap_servers=kafka_bootstrap, group_id="aio",
                                             enable_auto_commit=False, fetch_max_wait_ms=100)
        await consumer.start()
        try:
            deadline = time.monotonic() + 60
            while not consumer.assignment() and time.monotonic() < deadline:
                await consumer.getmany(timeout_ms=100)
            owned = {(tp.topic, tp.partition) for tp in consumer.assignment()}
            await consumer.commit({AioTopicPartition(TOPIC, 3): AioOffset(33, "")})
            return owned, await consumer.committed(AioTopicPartition(TOPIC, 3))
        finally:
            await consumer.stop()

    owned, committed = asyncio.run(scenario())
    assert owned == ALL
    assert committed == 33


def test_a_kafka_client_and_a_group_member_share_one_group(kafka_service, kafka_bootstrap):
    kp = PythonConsumer(kafka_bootstrap, "mixed", "kafka-python-member")
    kp.start()
    member = GroupMember(kafka_service, "mixed", topics=[TOPIC], client_id="ray-member", heartbeat_interval_ms=200,
                         session_timeout_ms=6000)
    try:
        def split() -> bool:
            mine = {(tp.topic, tp.partition) for tp in member.poll(timeout_ms=50)}
            return len(mine) == 3 and len(kp.owned) == 3 and mine | kp.owned == ALL

        wait_for(split, 60, "a kafka-python consumer and a GroupMember to split the topic", interval_s=0)
        mine = sorted(member.assignment())
        member.commit({tp: OffsetAndMetadata(77) for tp in mine})
        kp.commit({kafka.TopicPartition(t, p): kafka.OffsetAndMetadata(88, "", -1) for t, p in kp.owned})
        everything = [TopicPartition(TOPIC, p) for p in range(6)]
        wait_for(lambda: all(om is not None for om in member.committed(everything).values())
                 and len(member.committed(everything)) == 6, 30, "both members' commits")
        offsets = {tp.partition: om.offset for tp, om in member.committed(everything).items()}
        assert offsets == {p: 77 if TopicPartition(TOPIC, p) in mine else 88 for p in range(6)}
    finally:
        kp.stop()
        member.close()
