"""A single-node Apache Kafka 4.4 broker (KRaft, broker and controller in one JVM) on loopback.

`KafkaBroker` formats a temporary log directory with Kafka's own storage tool, starts
`kafka.Kafka` on two free ports with short group timeouts and about a gigabyte of heap, waits
until it answers ApiVersions, Metadata and FindCoordinator (its offsets topic created), and
stops it (SIGTERM, then SIGKILL) on `stop()`, at interpreter exit, and if this process dies
first (the JVM gets SIGTERM through PR_SET_PDEATHSIG).
The group settings below are what the differential tests assume of any target: a groupcoord
listener compared with this broker should be configured the same way (`GROUP_SETTINGS`).
"""

from __future__ import annotations

import atexit
import contextlib
import ctypes
import logging
import os
import shutil
import signal
import socket
import subprocess
import tempfile
import time
import uuid
from base64 import urlsafe_b64encode
from pathlib import Path

from benchmarks.kafka.dist import classpath
from benchmarks.kafka.wire import KafkaConnection, WireError, api_versions

logger = logging.getLogger(__name__)

# The group coordinator's settings that responses depend on; a target compared with Kafka needs the same.
GROUP_SETTINGS: dict[str, str] = {
    "group.initial.rebalance.delay.ms": "0",
    "group.min.session.timeout.ms": "100",
    "group.max.session.timeout.ms": "60000",
    "group.max.size": "1000000",
    "group.consumer.min.session.timeout.ms": "1000",
    "group.consumer.session.timeout.ms": "10000",
    "group.consumer.min.heartbeat.interval.ms": "100",
    "group.consumer.heartbeat.interval.ms": "1000",
    "group.consumer.max.size": "1000000",
    # Kafka 4.4 batches KIP-848 target assignments (KIP-1263); compute them in the heartbeat that
    # changes the group, as groupcoord does, so that epochs do not depend on timing.
    "group.consumer.min.assignment.interval.ms": "0",
    "group.consumer.assignment.interval.ms": "0",
    "group.consumer.assignor.offload.enable": "false",
    "offsets.topic.replication.factor": "1",
    "offsets.topic.num.partitions": "4",
    "offsets.retention.minutes": "10080",
}

_BASE_SETTINGS: dict[str, str] = {
    "process.roles": "broker,controller",
    "node.id": "1",
    "controller.listener.names": "CONTROLLER",
    "listener.security.protocol.map": "PLAINTEXT:PLAINTEXT,CONTROLLER:PLAINTEXT",
    "inter.broker.listener.name": "PLAINTEXT",
    "num.partitions": "1",
    "default.replication.factor": "1",
    "transaction.state.log.replication.factor": "1",
    "transaction.state.log.min.isr": "1",
    "auto.create.topics.enable": "false",
    "num.network.threads": "2",
    "num.io.threads": "4",
    "log.flush.interval.messages": "9223372036854775807",  # Kafka's default: the page cache, no fsync
}

_LOG4J = """log4j.rootLogger=INFO, F
log4j.appender.F=org.apache.log4j.FileAppender
log4j.appender.F.File={path}
log4j.appender.F.layout=org.apache.log4j.PatternLayout
log4j.appender.F.layout.ConversionPattern=[%d] %p %m (%c)%n
log4j.logger.kafka.request.logger=WARN
"""
_LOG4J2 = "status = error\nrootLogger.level = error\n"
_PR_SET_PDEATHSIG = 1


def free_port() -> int:
    """A TCP port on 127.0.0.1 that nothing listens on right now."""
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def _java_hash(text: str) -> int:
    h = 0
    for unit in text.encode("utf-16-be").hex(" ", 2).split():  # String.hashCode over UTF-16 code units
        h = (31 * h + int(unit, 16)) & 0xFFFFFFFF
    return h - (1 << 32) if h & 0x80000000 else h


def _one_group_per_partition(partitions: int) -> tuple[str, ...]:
    """Group ids that land on each of Kafka's offsets partitions (abs(hashCode) % partitions)."""
    chosen: dict[int, str] = {}
    i = 0
    while len(chosen) < partitions:
        key = f"ready-{i}"
        chosen.setdefault(abs(_java_hash(key)) % partitions, key)
        i += 1
    return tuple(chosen[p] for p in range(partitions))


def new_cluster_id() -> str:
    """A fresh KRaft cluster id (22 characters of URL-safe base64), as kafka-storage random-uuid prints.

    Like Kafka's Uuid.randomUuid, never one that starts with "-": kafka-storage's argument parser would
    take it for an option (1 start in 64 failed with "--cluster-id: expected one argument").
    """
    while (cluster_id := urlsafe_b64encode(uuid.uuid4().bytes).decode().rstrip("=")).startswith("-"):
        pass
    return cluster_id


def _die_with_parent() -> None:  # runs in the child between fork and exec
    try:
        ctypes.CDLL("libc.so.6", use_errno=True).prctl(_PR_SET_PDEATHSIG, signal.SIGTERM)
    except OSError:
        pass


class KafkaBrokerError(RuntimeError):
    """The broker did not start (its log's tail is in the message)."""


class KafkaBroker:
    """One KRaft broker+controller JVM on loopback; `bootstrap` is its "127.0.0.1:port"."""

    def __init__(self, heap: str = "1g", settings: dict[str, str] | None = None,
                 workdir: str | os.PathLike | None = None, cluster_id: str | None = None) -> None:
        self.heap = heap
        # One id for every node of a cluster (formatted with it); a single broker makes its own.
        self.cluster_id = cluster_id or new_cluster_id()
        self.settings = {**GROUP_SETTINGS, **(settings or {})}
        self._own_dir = workdir is None
        self.workdir = Path(workdir or tempfile.mkdtemp(prefix="groupcoord-kafka-"))
        self.port = 0
        self.controller_port = 0
        self.start_seconds = 0.0
        self._proc: subprocess.Popen | None = None

    @property
    def bootstrap(self) -> str:
        """The PLAINTEXT listener's address."""
        return f"127.0.0.1:{self.port}"

    @property
    def log_path(self) -> Path:
        """The broker's own log file."""
        return self.workdir / "server.log"

    def __enter__(self) -> KafkaBroker:
        self.start()
        return self

    def __exit__(self, *exc: object) -> None:
        self.stop()

    def _java(self, main: str, *args: str, heap: str) -> list[str]:
        return ["java", f"-Xmx{heap}", "-Xms256m" if heap == self.heap else "-Xms32m",
                "-XX:+UseG1GC", "-XX:TieredStopAtLevel=1" if heap != self.heap else "-XX:+UseStringDeduplication",
                "-Djava.awt.headless=true", "-Djava.security.egd=file:/dev/./urandom",
                f"-Dlog4j.configuration=file:{self.workdir / 'log4j.properties'}",
                f"-Dlog4j2.configurationFile={self.workdir / 'log4j2.properties'}",
                "-cp", classpath(), main, *args]

    def _write_config(self) -> Path:
        if not self.port:  # a restart keeps its ports: clients keep their bootstrap address
            self.port, self.controller_port = free_port(), free_port()
            while self.controller_port == self.port:
                self.controller_port = free_port()
        props = {
            **_BASE_SETTINGS,
            "controller.quorum.voters": f"1@127.0.0.1:{self.controller_port}",
            "listeners": f"PLAINTEXT://127.0.0.1:{self.port},CONTROLLER://127.0.0.1:{self.controller_port}",
            "advertised.listeners": f"PLAINTEXT://127.0.0.1:{self.port}",
            "log.dirs": str(self.workdir / "data"),
            **self.settings,
        }
        path = self.workdir / "server.properties"
        path.write_text("".join(f"{k}={v}\n" for k, v in props.items()))
        (self.workdir / "log4j.properties").write_text(_LOG4J.format(path=self.log_path))
        (self.workdir / "log4j2.properties").write_text(_LOG4J2)
        return path

    def start(self, timeout: float = 300.0) -> None:
        """Format the log directory (first start only), start the JVM and wait until it serves."""
        started = time.perf_counter()
        self.launch(timeout)
        self.wait_ready(timeout - (time.perf_counter() - started), started)

    def launch(self, timeout: float = 300.0) -> None:
        """Format the log directory (first start only) and start the JVM without waiting for it (a cluster's
        nodes start together: none is ready before a majority of controllers runs)."""
        if self._proc is not None:
            raise KafkaBrokerError("already started")
        self.workdir.mkdir(parents=True, exist_ok=True)
        config = self._write_config()
        if not (self.workdir / "data" / "meta.properties").exists():
            fmt = subprocess.run(self._java("kafka.tools.StorageTool", "format", "-t", self.cluster_id,
                                            "-c", str(config), heap="256m"),
                                 capture_output=True, text=True, timeout=timeout)
            if fmt.returncode != 0:
                raise KafkaBrokerError(f"kafka-storage format failed: {fmt.stdout[-1000:]}{fmt.stderr[-1000:]}")
        out = open(self.workdir / "stdout.log", "ab")
        self._proc = subprocess.Popen(self._java("kafka.Kafka", str(config), heap=self.heap), stdout=out,
                                      stderr=subprocess.STDOUT, stdin=subprocess.DEVNULL,
                                      preexec_fn=_die_with_parent, cwd=self.workdir)
        out.close()
        atexit.register(self.stop)

    def wait_ready(self, timeout: float = 300.0, started: float | None = None) -> None:
        """Wait until the launched JVM serves (its offsets topic created); stop it and raise if it does not."""
        started = time.perf_counter() if started is None else started
        try:
            self._wait_ready(time.perf_counter() + timeout)
        except BaseException:
            self.stop()
            raise
        self.start_seconds = time.perf_counter() - started
        logger.info("Kafka %s ready in %.1f s (log %s)", self.bootstrap, self.start_seconds, self.log_path)

    def _wait_ready(self, deadline: float) -> None:
        from kio.schema.metadata.v12.request import MetadataRequest

        last_error: Exception | None = None
        while time.perf_counter() < deadline:
            if self._proc is None or self._proc.poll() is not None:
                raise KafkaBrokerError(f"Kafka exited early ({self._proc and self._proc.returncode}): {self._tail()}")
            try:
                with KafkaConnection(self.bootstrap, timeout=5.0) as conn:
                    api_versions(conn)
                    meta = conn.request(MetadataRequest(topics=(), allow_auto_topic_creation=False,
                                                        include_topic_authorized_operations=False))
                    if meta.brokers and meta.controller_id >= 0 and self._coordinator_ready(conn):
                        return
            except (OSError, WireError) as e:
                last_error = e
            time.sleep(0.2)
        raise KafkaBrokerError(f"Kafka did not answer within the timeout ({last_error}): {self._tail()}")

    def _coordinator_ready(self, conn: KafkaConnection) -> bool:
        # The first FindCoordinator creates __consumer_offsets; ready once a group of every offsets
        # partition is found and described without COORDINATOR_LOAD_IN_PROGRESS.
        from kio.schema.describe_groups.v5.request import DescribeGroupsRequest
        from kio.schema.find_coordinator.v6.request import FindCoordinatorRequest

        keys = _one_group_per_partition(int(self.settings["offsets.topic.num.partitions"]))
        found = conn.request(FindCoordinatorRequest(key_type=0, coordinator_keys=keys))
        if any(c.error_code != 0 for c in found.coordinators):
            return False
        by_address: dict[str, list[str]] = {}  # in a cluster, each group is described by its own coordinator
        for c in found.coordinators:
            by_address.setdefault(f"{c.host}:{c.port}", []).append(c.key)
        for address, groups in by_address.items():
            with contextlib.ExitStack() as stack:
                there = conn if address == self.bootstrap else stack.enter_context(
                    KafkaConnection(address, timeout=5.0))
                described = there.request(DescribeGroupsRequest(groups=tuple(groups),
                                                                include_authorized_operations=False))
            if any(g.error_code != 0 for g in described.groups):
                return False
        return True

    def _tail(self) -> str:
        parts = []
        for name in ("stdout.log", "server.log"):
            path = self.workdir / name
            if path.exists():
                text = path.read_text(errors="replace")
                if name == "server.log":  # why it stopped is in its errors, before the shutdown's lines
                    parts += [line[:500] for line in text.splitlines() if "] ERROR " in line or "] FATAL " in line][-5:]
                parts.append(text[-1500:])
        return "\n".join(parts)

    def stop(self, timeout: float = 30.0) -> None:
        """Stop the JVM (SIGTERM, SIGKILL after `timeout`) and remove a temporary directory of ours."""
        proc, self._proc = self._proc, None
        if proc is not None:
            if proc.poll() is None:
                proc.terminate()
                try:
                    proc.wait(timeout)
                except subprocess.TimeoutExpired:
                    logger.warning("Kafka %s did not stop within %.0f s: killed", self.bootstrap, timeout)
                    proc.kill()
                    proc.wait()
            atexit.unregister(self.stop)
        if self._own_dir:
            shutil.rmtree(self.workdir, ignore_errors=True)

    def kill(self) -> None:
        """SIGKILL the JVM, as a machine's loss would end it, and keep its log directory for a later `start()`."""
        proc, self._proc = self._proc, None
        if proc is not None:
            proc.kill()
            proc.wait()
            atexit.unregister(self.stop)

    def stop_for_restart(self, timeout: float = 180.0) -> None:
        """Stop the JVM but keep its log directory, so that `start()` brings the same data back."""
        own, self._own_dir = self._own_dir, False
        try:
            self.stop(timeout)
        finally:
            self._own_dir = own

    @property
    def running(self) -> bool:
        """True while the JVM runs."""
        return self._proc is not None and self._proc.poll() is None


if __name__ == "__main__":
    logging.basicConfig(level=logging.INFO)
    with KafkaBroker() as broker:
        print(f"Kafka {broker.bootstrap} ready in {broker.start_seconds:.1f} s")
