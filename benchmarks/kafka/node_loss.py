"""Time from the loss of a group's coordinator node to the first acknowledged commit: Kafka 4.4 and groupcoord.

Both sides replicate offsets three times (at least two in sync to acknowledge) and are driven by the
same wire client: a `Committer` finds the group's coordinator with FindCoordinator (asking each
bootstrap address in turn) and sends simple OffsetCommits (generation -1, no member) to it; a
connection error, NOT_COORDINATOR, COORDINATOR_NOT_AVAILABLE, COORDINATOR_LOAD_IN_PROGRESS,
REQUEST_TIMED_OUT or NOT_ENOUGH_REPLICAS drops the connection, and it looks for the coordinator
again, as Kafka's clients do. A loss is timed from just before the kill to the first commit acknowledged
after it, and counts only if it hit the group's coordinator (Kafka: the broker FindCoordinator named;
groupcoord: the Ray node of the leader replica of the group's offsets partition, whose loss must
raise its leader epoch) and another node coordinates afterwards.

- Kafka: `cluster.KafkaCluster`, three KRaft broker+controller JVMs; the coordinator's JVM is SIGKILLed,
  and restarted (its replicas back in sync) before the next loss.
- groupcoord: a ray.cluster_utils.Cluster (head + 3 workers, one storage directory per node),
  replication_factor 3, min_insync_replicas 2, its Kafka listener on the head node; the worker node of
  the group's leader replica is removed (its directory deleted), and a new node added and the
  partitions repaired before the next loss. The head node (the router's placement, the listener, the
  GCS) cannot be removed, so the group is chosen among the partitions a worker leads.
"""

from __future__ import annotations

import contextlib
import logging
import os
import shutil
import statistics
import tempfile
import time
import uuid
from dataclasses import dataclass, field
from typing import Any, Sequence

from benchmarks.kafka import load
from benchmarks.kafka.ray_start import starting_priority
from benchmarks.kafka.wire import KafkaConnection, WireError

logger = logging.getLogger(__name__)

TOPIC = "bench-node-loss"
REQUEST_TIMEOUT_S = 10.0  # a commit unanswered this long is given up and sent again (to a coordinator found anew)
RETRY_BACKOFF_S = 0.02  # between a failed attempt and the next (Kafka's retry.backoff.ms is 100; shorter here)
# Errors after which a client looks for the coordinator again (Kafka's codes).
RETRIABLE = {7: "REQUEST_TIMED_OUT", 14: "COORDINATOR_LOAD_IN_PROGRESS", 15: "COORDINATOR_NOT_AVAILABLE",
             16: "NOT_COORDINATOR", 19: "NOT_ENOUGH_REPLICAS", 20: "NOT_ENOUGH_REPLICAS_AFTER_APPEND"}


class NodeLossError(RuntimeError):
    """A node loss could not be set up or did not recover in time."""


@dataclass
class Attempts:
    """What a run of commits until one is acknowledged went through."""

    seconds: float = 0.0
    attempts: int = 0
    errors: dict[str, int] = field(default_factory=dict)
    coordinator: int = -1  # the node id FindCoordinator gave for the acknowledged commit

    def count(self, what: str) -> None:
        """Count one failed attempt by its cause."""
        self.errors[what] = self.errors.get(what, 0) + 1


class Committer:
    """Commits one group's offsets through whichever node FindCoordinator names, finding it again after errors."""

    def __init__(self, bootstraps: Sequence[str], group: str, topic: str = TOPIC,
                 request_timeout_s: float = REQUEST_TIMEOUT_S) -> None:
        self.bootstraps = list(bootstraps)
        self.group = group
        self.topic = topic
        self.request_timeout_s = request_timeout_s
        self.coordinator: int = -1
        self._conn: KafkaConnection | None = None
        self._offset = 0

    def close(self) -> None:
        """Close the coordinator's connection."""
        if self._conn is not None:
            self._conn.close()
        self._conn, self.coordinator = None, -1

    def find_coordinator(self) -> tuple[int, str] | str:
        """(node id, "host:port") of the group's coordinator, from the first bootstrap address that knows it;
        else why not (the last error)."""
        from kio.schema.find_coordinator.v4.request import FindCoordinatorRequest

        why = "no bootstrap address"
        for address in self.bootstraps:
            try:
                with KafkaConnection(address, client_id="node-loss", timeout=self.request_timeout_s) as conn:
                    answer = conn.request(FindCoordinatorRequest(key_type=0, coordinator_keys=(self.group,)))
            except (OSError, WireError) as e:
                why = f"FindCoordinator: {type(e).__name__}"
                continue
            found = answer.coordinators[0]
            if int(found.error_code) == 0:
                return int(found.node_id), f"{found.host}:{found.port}"
            why = f"FindCoordinator: {RETRIABLE.get(int(found.error_code), int(found.error_code))}"
        return why

    def commit_once(self) -> str | None:
        """One commit to the coordinator (found first if need be): None if acknowledged, else why not."""
        if self._conn is None:
            found = self.find_coordinator()
            if isinstance(found, str):
                return found
            try:
                self._conn = KafkaConnection(found[1], client_id="node-loss", timeout=self.request_timeout_s)
            except OSError as e:
                return f"connect: {type(e).__name__}"
            self.coordinator = found[0]
        self._offset += 1
        try:
            answer = self._conn.request(load.commit_request(self.group, self.topic, range(1), self._offset))
        except (OSError, WireError) as e:
            self.close()
            return f"OffsetCommit: {'timeout' if 'within' in str(e) else type(e).__name__}"
        codes = [int(p.error_code) for t in answer.topics for p in t.partitions]
        if all(c == 0 for c in codes):
            return None
        self.close()
        bad = next(c for c in codes if c)
        if bad not in RETRIABLE:
            raise NodeLossError(f"OffsetCommit of {self.group}: error {bad}, which no client retries")
        return f"OffsetCommit: {RETRIABLE[bad]}"

    def until_acknowledged(self, timeout_s: float = 300.0, since: float | None = None) -> Attempts:
        """Commit until one is acknowledged; seconds from `since` (monotonic; default: now) to that answer."""
        since = time.monotonic() if since is None else since
        out = Attempts()
        while True:
            out.attempts += 1
            why = self.commit_once()
            if why is None:
                out.seconds, out.coordinator = time.monotonic() - since, self.coordinator
                return out
            out.count(why)
            if time.monotonic() - since > timeout_s:
                raise NodeLossError(f"no commit of {self.group} acknowledged within {timeout_s} s: {out.errors}")
            time.sleep(RETRY_BACKOFF_S)


def summary(losses: list[dict]) -> dict:
    """Median, min, max and every value of the counted losses' seconds (losses that missed the coordinator
    are kept in the list, but not counted)."""
    counted = [loss["seconds"] for loss in losses if loss["counted"]]
    return {"counted": len(counted), "attempted": len(losses), "values_s": counted,
            "median_s": statistics.median(counted) if counted else None,
            "min_s": min(counted) if counted else None, "max_s": max(counted) if counted else None}


def _warm(committer: Committer, commits: int = 5) -> Attempts:
    """A steady state before a loss: `commits` acknowledged commits in a row on one coordinator."""
    first = committer.until_acknowledged(timeout_s=300)
    for _ in range(commits - 1):
        committer.until_acknowledged(timeout_s=300)
    return first


# --- Kafka --------------------------------------------------------------------------------------


def kafka_node_losses(losses: int, settings: dict[str, str] | None = None) -> dict:
    """Three Kafka nodes; `losses` times: SIGKILL the group's coordinator, time the first commit after it,
    restart the node and wait until its replicas are back in sync."""
    from benchmarks.kafka.cluster import KafkaCluster

    with KafkaCluster(settings=settings) as cluster:
        print(f"  Kafka cluster {cluster.bootstraps} started in {cluster.start_seconds:.1f} s", flush=True)
        load.create_topic(cluster.bootstraps[0], TOPIC, 1)
        committer = Committer(cluster.bootstraps, f"node-loss-{uuid.uuid4().hex[:6]}")
        out: list[dict] = []
        try:
            for i in range(losses):
                _warm(committer)
                lost, controller = committer.coordinator, cluster.controller_id()
                started = time.monotonic()
                cluster.kill(lost)
                got = committer.until_acknowledged(since=started)
                counted = got.coordinator not in (-1, lost)
                out.append({"lost_node": lost, "was_controller": lost == controller, "seconds": got.seconds,
                            "attempts": got.attempts, "errors": got.errors, "new_coordinator": got.coordinator,
                            "counted": counted})
                print(f"  [kafka] loss {i + 1}: node {lost}{' (active controller)' if lost == controller else ''}"
                      f" -> commit acknowledged by node {got.coordinator} after {got.seconds:.2f} s "
                      f"({got.attempts} attempts {got.errors})", flush=True)
                out[-1]["restart_s"] = cluster.restart(lost)
        finally:
            committer.close()
        return {"losses": out, **summary(out), "settings": cluster.settings, "start_s": cluster.start_seconds}


# --- groupcoord ---------------------------------------------------------------------------------


def _start_cluster(workers: int) -> Any:
    """A ray.cluster_utils.Cluster with a head and `workers` worker nodes (one CPU each), connected to."""
    import ray
    from ray.cluster_utils import Cluster

    if ray.is_initialized():
        ray.shutdown()  # a cluster of its own
    with starting_priority():
        cluster = Cluster(initialize_head=True, head_node_args={"num_cpus": 1, "include_dashboard": False})
    try:
        for _ in range(workers):
            with starting_priority():
                cluster.add_node(num_cpus=1)
        cluster.wait_for_nodes()
        ray.init(address=cluster.address, log_to_driver=False, configure_logging=False)
    except BaseException:
        cluster.shutdown()
        raise
    return cluster


def _wait(condition: Any, timeout_s: float, what: str) -> None:
    deadline = time.monotonic() + timeout_s
    while not condition():
        if time.monotonic() > deadline:
            raise NodeLossError(f"{what}: not within {timeout_s} s")
        time.sleep(0.2)


def _repaired(svc: Any, factor: int, lost: set[str]) -> bool:
    """Whether every partition has `factor` replicas, none on a lost node, all in sync."""
    return all(len(set(d.replicas)) == factor and not set(d.replicas) & lost and set(d.in_sync) == set(d.replicas)
               for d in svc.describe_partitions())


def _group_led_by_worker(svc: Any, workers: set[str], salt: str) -> tuple[str, Any] | None:
    """A group id whose offsets partition a worker node leads, with that partition's description."""
    from groupcoord.protocol import partition_for

    led = {d.partition: d for d in svc.describe_partitions() if d.leader in workers}
    if not led:
        return None
    partition = sorted(led)[0]
    group = next(g for g in (f"node-loss-{salt}-{i}" for i in range(100_000))
                 if partition_for(g, svc.num_partitions) == partition)
    return group, led[partition]


def groupcoord_node_losses(losses: int, num_partitions: int = 4, config: Any = None) -> dict:
    """A Ray cluster (head + 3 workers), groupcoord at replication factor 3 with its Kafka listener; `losses`
    times: remove the worker node leading the group's partition, time the first commit after it, add a node
    and wait until every partition is repaired."""
    import ray

    from groupcoord.actors import start, stop
    from groupcoord.actors.service.replication import election, replica_actor, replicated_log

    namespace = f"gc-node-loss-{uuid.uuid4().hex[:6]}"
    started = time.perf_counter()
    cluster = _start_cluster(workers=3)
    tmp = tempfile.mkdtemp(prefix="gc-node-loss-")
    storage = os.path.join(tmp, "{node_id}")
    out: list[dict] = []
    try:
        svc = start(num_partitions=num_partitions, storage_path=storage, namespace=namespace, replication_factor=3,
                    min_insync_replicas=2, config=config, kafka_listener="127.0.0.1:0")
        start_s = time.perf_counter() - started
        print(f"  groupcoord on {len(cluster.list_all_nodes())} Ray nodes, listener {svc.kafka_bootstrap}, "
              f"started in {start_s:.1f} s", flush=True)
        load.create_topic(svc.kafka_bootstrap, TOPIC, 1)
        lost_nodes: set[str] = set()
        for i in range(losses):
            _wait(lambda: _repaired(svc, 3, lost_nodes), 300, "every partition repaired")
            workers = {n.node_id: n for n in cluster.worker_nodes}
            chosen = None
            deadline = time.monotonic() + 60
            while chosen is None and time.monotonic() < deadline:
                chosen = _group_led_by_worker(svc, set(workers), uuid.uuid4().hex[:4])
                time.sleep(0 if chosen else 0.5)
            if chosen is None:
                raise NodeLossError("no offsets partition is led by a worker node (only the head leads)")
            group, before = chosen
            committer = Committer([svc.kafka_bootstrap], group)
            try:
                _warm(committer)
                node = before.leader
                begun = time.monotonic()
                cluster.remove_node(workers[node], allow_graceful=False)
                shutil.rmtree(storage.replace("{node_id}", node), ignore_errors=True)
                lost_nodes.add(node)
                got = committer.until_acknowledged(since=begun)
            finally:
                committer.close()
            svc.refresh()
            after = svc.describe_partitions()[before.partition]
            counted = after.leader_epoch > before.leader_epoch and after.leader not in (None, node)
            out.append({"lost_node": node, "partition": before.partition, "seconds": got.seconds,
                        "attempts": got.attempts, "errors": got.errors,
                        "epochs": [before.leader_epoch, after.leader_epoch], "counted": counted})
            print(f"  [groupcoord] loss {i + 1}: node {node[:8]} (leader of partition {before.partition}, epoch "
                  f"{before.leader_epoch}) -> commit acknowledged after {got.seconds:.2f} s, epoch "
                  f"{after.leader_epoch} ({got.attempts} attempts {got.errors})", flush=True)
            repair_started = time.perf_counter()
            with starting_priority():
                cluster.add_node(num_cpus=1)
            _wait(lambda: _repaired(svc, 3, lost_nodes), 300, "every partition repaired")
            out[-1]["repair_s"] = time.perf_counter() - repair_started
    finally:
        with contextlib.suppress(Exception):
            stop(namespace)
        ray.shutdown()
        cluster.shutdown()
        shutil.rmtree(tmp, ignore_errors=True)
    settings = {"replication_factor": 3, "min_insync_replicas": 2, "num_partitions": num_partitions,
                "leader_heartbeat_interval_s": replica_actor.HEARTBEAT_INTERVAL_S,
                "follower_leader_timeout_s": replica_actor.LEADER_TIMEOUT_S,
                "leader_lease_s": replicated_log.LEASE_S, "election_promise_timeout_s": election.PROMISE_TIMEOUT_S}
    return {"losses": out, **summary(out), "settings": settings, "start_s": start_s}
