"""Three Apache Kafka 4.4 nodes on loopback (KRaft, each broker+controller, 3 voters), offsets replicated 3 times.

`KafkaCluster` gives each `KafkaBroker` its node id, its ports and the shared quorum, launches the
three JVMs together (no controller is elected before a majority runs), waits until each serves,
and stops them all (and removes their directories) on exit. `kill(node_id)` SIGKILLs one node as a
machine's loss would; `restart(node_id)` brings it back on its ports and data. `NODE_LOSS_SETTINGS`
are the timeouts a lost node's detection depends on; they are written into the results.
"""

from __future__ import annotations

import contextlib
import logging
import shutil
import tempfile
import time
from pathlib import Path

from benchmarks.kafka.broker import KafkaBroker, free_port, new_cluster_id
from benchmarks.kafka.wire import KafkaConnection, WireError, nested_class, request_class

logger = logging.getLogger(__name__)

OFFSETS_TOPIC = "__consumer_offsets"

# Replication as groupcoord's replication_factor=3, min_insync_replicas=2.
REPLICATION_SETTINGS: dict[str, str] = {
    "offsets.topic.replication.factor": "3",
    "default.replication.factor": "3",
    "min.insync.replicas": "2",
    "transaction.state.log.replication.factor": "3",
    "transaction.state.log.min.isr": "2",
}

# How fast a lost node is noticed (Kafka's defaults in the comments): short, as groupcoord's are
# (its followers call an election after 0.6 s without their leader's 0.1 s heartbeats).
NODE_LOSS_SETTINGS: dict[str, str] = {
    "broker.heartbeat.interval.ms": "500",  # 2000: a broker's heartbeat to the active controller
    "broker.session.timeout.ms": "2000",  # 9000: the controller fences a broker silent this long (new leaders)
    "controller.quorum.fetch.timeout.ms": "2000",  # 2000: a voter suspects the active controller after this
    "controller.quorum.election.timeout.ms": "1000",  # 1000: the randomised wait before a controller election
    "replica.lag.time.max.ms": "5000",  # 30000: a follower this far behind leaves the ISR
}


def voters(node_ports: dict[int, int]) -> str:
    """Kafka's controller.quorum.voters for controllers on loopback: "1@127.0.0.1:p1,2@127.0.0.1:p2,..."."""
    return ",".join(f"{node}@127.0.0.1:{port}" for node, port in sorted(node_ports.items()))


def node_settings(node_id: int, quorum: str, extra: dict[str, str] | None = None) -> dict[str, str]:
    """The settings of one node of the cluster (on top of broker.GROUP_SETTINGS)."""
    return {"node.id": str(node_id), "controller.quorum.voters": quorum, **REPLICATION_SETTINGS,
            **NODE_LOSS_SETTINGS, **(extra or {})}


class KafkaCluster:
    """`size` KRaft broker+controller JVMs on loopback sharing one quorum; `bootstraps` are their addresses."""

    def __init__(self, size: int = 3, heap: str = "1g", settings: dict[str, str] | None = None) -> None:
        self.workdir = Path(tempfile.mkdtemp(prefix="groupcoord-kafka-cluster-"))
        ports = {n: (free_port(), free_port()) for n in range(1, size + 1)}
        while len({p for pair in ports.values() for p in pair}) < 2 * size:  # two sockets closed may share a port
            ports = {n: (free_port(), free_port()) for n in range(1, size + 1)}
        quorum = voters({n: controller for n, (_, controller) in ports.items()})
        cluster_id = new_cluster_id()
        self.nodes: dict[int, KafkaBroker] = {}
        for n, (port, controller) in ports.items():
            node = KafkaBroker(heap=heap, settings=node_settings(n, quorum, settings),
                               workdir=self.workdir / f"node-{n}", cluster_id=cluster_id)
            node.port, node.controller_port = port, controller
            self.nodes[n] = node
        self.start_seconds = 0.0

    @property
    def bootstraps(self) -> list[str]:
        """Every node's PLAINTEXT address."""
        return [n.bootstrap for n in self.nodes.values()]

    @property
    def settings(self) -> dict[str, str]:
        """The settings every node shares (node 1's, without its id)."""
        return {k: v for k, v in self.nodes[1].settings.items() if k != "node.id"}

    def __enter__(self) -> KafkaCluster:
        self.start()
        return self

    def __exit__(self, *exc: object) -> None:
        self.stop()

    def start(self, timeout: float = 600.0) -> None:
        """Launch every node, then wait until each one serves (groups of every offsets partition found)."""
        started = time.perf_counter()
        try:
            for node in self.nodes.values():
                node.launch(timeout)
            for node in self.nodes.values():
                node.wait_ready(max(1.0, started + timeout - time.perf_counter()), started)
            self.wait_in_sync(max(1.0, started + timeout - time.perf_counter()))
        except BaseException:
            self.stop()
            raise
        self.start_seconds = time.perf_counter() - started
        logger.info("Kafka cluster %s ready in %.1f s", self.bootstraps, self.start_seconds)

    def kill(self, node_id: int) -> None:
        """SIGKILL one node (its data stays for `restart`)."""
        self.nodes[node_id].kill()

    def restart(self, node_id: int, timeout: float = 600.0) -> float:
        """Start a killed node again and wait until every offsets partition has all its replicas in sync;
        the seconds that took."""
        started = time.perf_counter()
        self.nodes[node_id].start(timeout)
        self.wait_in_sync(max(1.0, started + timeout - time.perf_counter()))
        return time.perf_counter() - started

    def offsets_partitions(self) -> list:
        """Metadata's partitions of the offsets topic, asked of the first node that answers."""
        cls = request_class("metadata", 12)
        topic = nested_class(cls, "MetadataRequestTopic")
        request = cls(topics=(topic(topic_id=None, name=OFFSETS_TOPIC),), allow_auto_topic_creation=False,
                      include_topic_authorized_operations=False)
        for node in self.nodes.values():
            if not node.running:
                continue
            with contextlib.suppress(OSError, WireError), KafkaConnection(node.bootstrap, timeout=5.0) as conn:
                answer = conn.request(request)
                if int(answer.topics[0].error_code) == 0:
                    return list(answer.topics[0].partitions)
        return []

    def controller_id(self) -> int:
        """The active controller's node id as Metadata reports it (-1 if no node answers)."""
        from kio.schema.metadata.v12.request import MetadataRequest

        for node in self.nodes.values():
            if node.running:
                with contextlib.suppress(OSError, WireError), KafkaConnection(node.bootstrap, timeout=5.0) as conn:
                    return int(conn.request(MetadataRequest(topics=(), allow_auto_topic_creation=False,
                                                            include_topic_authorized_operations=False)).controller_id)
        return -1

    def wait_in_sync(self, timeout: float = 300.0) -> None:
        """Wait until every offsets partition has a leader and all its replicas in its ISR."""
        deadline = time.perf_counter() + timeout
        while time.perf_counter() < deadline:
            parts = self.offsets_partitions()
            if parts and all(int(p.leader_id) >= 0 and len(p.isr_nodes) == len(self.nodes) for p in parts):
                return
            time.sleep(0.2)
        raise WireError(f"the offsets partitions did not get all {len(self.nodes)} replicas in sync in {timeout} s")

    def stop(self) -> None:
        """Kill every node and remove the cluster's directory (its data is thrown away: a graceful shutdown
        of the last nodes would wait for a quorum that the first ones took with them)."""
        for node in self.nodes.values():
            node.kill()
        shutil.rmtree(self.workdir, ignore_errors=True)


if __name__ == "__main__":
    logging.basicConfig(level=logging.INFO)
    with KafkaCluster() as cluster:
        print(f"Kafka cluster {cluster.bootstraps} ready in {cluster.start_seconds:.1f} s; "
              f"controller {cluster.controller_id()}")
