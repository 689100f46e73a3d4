"""A kafka-python consumer in a thread, as the Kafka-wire tests drive it (the consumers get no records)."""

from __future__ import annotations

import threading

import kafka
from kafka_wire_names import TOPIC


class PythonConsumer(threading.Thread):
    """A kafka-python KafkaConsumer polling in its own thread; what it owns is readable from the test."""

    def __init__(self, bootstrap: str, group: str, name: str, session_timeout_ms: int = 10000) -> None:
        super().__init__(name=name, daemon=True)
        self.consumer = kafka.KafkaConsumer(
            TOPIC, bootstrap_servers=bootstrap, group_id=group, client_id=name, enable_auto_commit=False,
            heartbeat_interval_ms=200, session_timeout_ms=session_timeout_ms, fetch_max_wait_ms=100,
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
