"""Node losses under load for a replicated service, on a ray.cluster_utils.Cluster with one disk per node.

Used by test_rel_replication_ray.py (a few losses) and benchmarks/replication_chaos.py (long runs).
The events are: removing a worker node (its storage directory deleted with it), pausing a leader's
process (SIGSTOP) until another replica leads, then resuming it (SIGCONT), and (rel_replication_faults.py)
a live replica's directory wiped, the router restarted during a repair, a follower's disk full. The Chaos
ledger checks every acknowledged commit afterwards; rel_replication_checks.py adds that reads never go
back, that replicas agree below the high watermark, and that the voters agree after each repair.
"""

from __future__ import annotations

import contextlib
import os
import shutil
import signal
import time
from typing import Any, Callable, Iterator

import ray
from ray.cluster_utils import Cluster
from rel_chaos import TOPIC, Chaos
from rel_replication_checks import LogAgreement, Reader, ReadHistory, RecordingAdmin, voter_problems
from rel_replication_faults import NodeDisks, ReplicaFaults
from waiting import wait_for

from groupcoord.actors import Observability, start, stop
from groupcoord.actors.service.names import partition_actor_name
from groupcoord.protocol import Errors, GroupConfig, OffsetAndMetadata, TopicPartition, partition_for
from groupcoord.protocol.messages import OffsetCommitRequest

ZOMBIE_TP = TopicPartition("zombie", 0)


class DiskCluster(Cluster):
    """A ray.cluster_utils.Cluster whose worker nodes each get their storage root on a small tmpfs as they join
    (see NodeDisks), so that a node's disk can fill up."""

    def __init__(self, storage: str, **kw: Any) -> None:
        self.disks = NodeDisks(storage)
        super().__init__(**kw)

    def add_node(self, *args: Any, **kw: Any) -> Any:
        """Cluster.add_node, then a tmpfs for a worker node's storage root."""
        node = super().add_node(*args, **kw)
        if node is not self.head_node:
            self.disks.add(node.node_id)
        return node


@contextlib.contextmanager
def replicated_cluster(
    tmp_path: Any, namespace: str, workers: int, num_partitions: int, factor: int = 3
) -> Iterator[tuple[DiskCluster, Any, str]]:
    """A fresh Ray cluster (head + `workers`), a service with `factor` replicas per partition on it; torn down after."""
    if ray.is_initialized():
        ray.shutdown()  # these tests need a cluster of their own
    storage = os.path.join(str(tmp_path), "{node_id}")
    # Every node exports metrics on its own port, each report interval (short here, for the scrapes). The GCS
    # declares a removed node dead after 4 failed health checks 0.5 s apart (Ray's default: 5 checks 3 s apart),
    # so that repairs start within seconds; a slow node's check still has Ray's 10 s timeout to answer.
    cluster = DiskCluster(storage, initialize_head=True, head_node_args={
        "num_cpus": 1, "include_dashboard": False, "_system_config": {
            "metrics_report_interval_ms": 500, "health_check_period_ms": 500, "health_check_failure_threshold": 4}})
    for _ in range(workers):
        cluster.add_node(num_cpus=1)
    cluster.wait_for_nodes()
    try:
        ray.init(address=cluster.address, namespace=namespace, log_to_driver=False)
        svc = start(
            num_partitions=num_partitions,
            storage_path=storage,
            namespace=namespace,
            replication_factor=factor,
            min_insync_replicas=factor // 2 + 1,
            config=GroupConfig(min_session_timeout_ms=100, initial_rebalance_delay_ms=300),
            observability=Observability(interval_s=0.2),
        )
        yield cluster, svc, storage
    finally:
        with contextlib.suppress(Exception):
            stop(namespace)
        ray.shutdown()
        cluster.shutdown()
        cluster.disks.release_all()


def metrics_ports() -> list[int]:
    """The metrics export ports of the cluster's alive nodes."""
    return [n["MetricsExportPort"] for n in ray.nodes() if n.get("Alive")]


def leader_roles(svc: Any) -> list[dict]:
    """The role (node, pid, epoch, ...) of every partition's current leader."""
    svc.refresh()
    return ray.get([svc.partition(p).role.remote() for p in range(svc.num_partitions)], timeout=10)


def follower_roles(partition: int) -> list[dict]:
    """The roles (node, pid, ...) of a partition's live replicas that do not lead, found by their registered names
    in this driver's namespace (the service's)."""
    prefix = f"{partition_actor_name(partition)}-replica-"
    handles = [ray.get_actor(n) for n in ray.util.list_named_actors() if n.startswith(prefix)]
    roles = []
    for h in handles:
        with contextlib.suppress(ray.exceptions.RayActorError, ray.exceptions.GetTimeoutError):
            roles.append(ray.get(h.role.remote(), timeout=10))
    return [r for r in roles if not r["leading"] and not r["lost"]]


def epochs(svc: Any) -> list[int]:
    """Every partition's leader epoch, as the router knows it."""
    return [d.leader_epoch for d in svc.describe_partitions()]


class NodeChaos(ReplicaFaults, Chaos):
    """Chaos whose faults are node losses (with their disks), paused leaders, wiped directories, full disks and
    router restarts, instead of actor kills; every offset fetch is checked never to go back."""

    def __init__(self, cluster: DiskCluster, svc: Any, storage: str, **kw: Any) -> None:
        kw.setdefault("request_timeouts_ms", (4_000, 1_500))
        super().__init__(svc, **kw)
        self.cluster = cluster
        self.storage = storage
        self.disks = cluster.disks
        self.reads = ReadHistory()
        self.admin = RecordingAdmin(svc, self.reads, TOPIC, self.topic_partitions)  # Chaos's default timeouts
        self.reader = Reader(RecordingAdmin(svc, self.reads, TOPIC, self.topic_partitions, request_timeout_ms=4_000),
                             self.group_ids)
        self.logs = LogAgreement(storage, svc.num_partitions)
        self.voter_problems: list[str] = []
        self._init_faults()
        self.node_losses = 0
        self.lost_nodes: list[str] = []
        self.pauses = 0
        self.zombie_acks: list[str] = []
        self.failover_s: list[float] = []  # one per counted node loss: removal -> every new leader elected
        self.failovers: list[dict] = []  # what each counted node loss did to the partitions it led
        self.overlapped_s: list[float] = []  # node losses while another leader was paused (pause included)
        self.overlaps = 0
        self.paused_followers = 0  # followers paused while their leader's node was lost
        self.minority_leaders: list[str] = []  # leaders seen elected while a majority was down (a violation)
        self.follower_losses = 0  # nodes removed on request (`node_id`) that led nothing: no failover
        self.factor = len(svc.describe_partitions()[0].replicas)

    def _wait_new_leaders(self, before: list[int], partitions: list[int], lost: str | None = None) -> None:
        def elected() -> bool:
            now = self.svc.describe_partitions()
            return all(now[p].leader_epoch > before[p] and now[p].leader not in (None, lost) for p in partitions)

        wait_for(elected, 120, f"new leaders of partitions {partitions}", 0.05)
        self.svc.refresh()

    def _worker_leaders(self) -> list[str]:
        """The worker nodes (removable, unlike the head) that lead some partition now."""
        workers = {n.node_id for n in self.cluster.worker_nodes}
        return sorted({d.leader for d in self.svc.describe_partitions() if d.leader in workers})

    def lose_node(self, node_id: str | None = None) -> str:
        """Remove a worker node that leads a partition (or `node_id`), delete its disk, and wait for new leaders.

        Counted as a node loss, with its failover time, only if the node led something and every partition
        it led then has a higher epoch and a leader on another node. When every leader is on the head node
        (which cannot be removed), one of them is paused first, so that the loss hits a leader; a `node_id`
        that leads nothing is counted in `follower_losses` instead.
        """
        if node_id is None:
            self._leader_off_the_head()
            node_id = self.rng.choice(self._worker_leaders())
        hit, before, started = self._remove(node_id)
        if hit:
            self._count_failover(node_id, hit, before, started)
        return node_id

    def _leader_off_the_head(self) -> None:
        """When the head node (which cannot be removed) leads every partition, pause one leader so another leads."""
        if not self._worker_leaders():
            head = self.cluster.head_node.node_id
            self.pause_leader(next(d.partition for d in self.svc.describe_partitions() if d.leader == head))
            self.wait_repaired()

    def _remove(self, node_id: str) -> tuple[list[int], list[int], float]:
        """Remove a worker node with its disk: the partitions it led, every epoch before, and when it went."""
        workers = {n.node_id: n for n in self.cluster.worker_nodes}
        described = self.svc.describe_partitions()
        hit = [d.partition for d in described if d.leader == node_id]
        before = [d.leader_epoch for d in described]
        started = time.monotonic()
        self.cluster.remove_node(workers[node_id], allow_graceful=False)
        self.lost_nodes.append(node_id)
        shutil.rmtree(self.storage.replace("{node_id}", node_id), ignore_errors=True)
        self.disks.release(node_id)
        if not hit:
            self.follower_losses += 1
        return hit, before, started

    def _count_failover(self, node_id: str, hit: list[int], before: list[int], started: float,
                        overlapped: bool = False) -> None:
        """Wait until every partition the lost node led has a new leader elsewhere; record it as a node loss."""
        self._wait_new_leaders(before, hit, lost=node_id)
        elapsed = time.monotonic() - started
        after = self.svc.describe_partitions()
        self.failovers.append({
            "lost_node": node_id, "partitions": hit, "seconds": elapsed,
            "epochs": [(before[p], after[p].leader_epoch) for p in hit],
            "new_leaders": [after[p].leader for p in hit],
            "overlapped": overlapped,
        })
        (self.overlapped_s if overlapped else self.failover_s).append(elapsed)
        self.node_losses += 1
        self.check_after_restart(hit)

    def real_failovers(self) -> bool:
        """Whether every counted node loss raised the epoch of each partition it led and moved its leader away."""
        return len(self.failovers) == self.node_losses and all(
            f["partitions"] and all(after > before for before, after in f["epochs"])
            and f["lost_node"] not in f["new_leaders"] and None not in f["new_leaders"]
            for f in self.failovers
        )

    def pause_leader(self, partition: int) -> None:
        """SIGSTOP a leader until another replica leads, send it a commit, SIGCONT it: the commit must fail."""
        with self._paused(partition):
            pass

    @contextlib.contextmanager
    def _paused(self, partition: int) -> Iterator[str]:
        """A leader SIGSTOPped until another replica leads and sent a commit; SIGCONT on exit, then the commit
        must have failed. Yields the paused leader's node."""
        def stopped() -> tuple[dict, list[int]] | None:
            before, role = epochs(self.svc), leader_roles(self.svc)[partition]
            try:
                os.kill(role["pid"], signal.SIGSTOP)
            except ProcessLookupError:  # that leader's process ended meanwhile (deposed on a loaded machine)
                return None
            return role, before

        role, before = wait_for(stopped, 120, f"the leader of partition {partition} to pause", 0.2)
        old = self.svc.partition(partition)
        n = self.svc.num_partitions
        # A standalone group's commit, which any leader would accept, sent to the paused one.
        group = next(g for g in (f"zombie-{i}" for i in range(10_000)) if partition_for(g, n) == partition)
        try:
            self._wait_new_leaders(before, [partition])
            zombie = old.commit_offsets.remote(OffsetCommitRequest(group, {ZOMBIE_TP: OffsetAndMetadata(1)}))
            yield role["node_id"]
        finally:
            os.kill(role["pid"], signal.SIGCONT)
        try:
            if ray.get(zombie, timeout=30).errors.get(ZOMBIE_TP) == Errors.NONE:
                self.zombie_acks.append(f"partition {partition}: the deposed leader acknowledged a commit")
        except (ray.exceptions.RayActorError, ray.exceptions.GetTimeoutError):
            pass
        if ZOMBIE_TP in self.admin.list_group_offsets(group):
            self.zombie_acks.append(f"partition {partition}: the deposed leader's commit is visible")
        self.pauses += 1
        self.check_after_restart([partition])

    def pause_and_lose(self) -> str:
        """Overlapping faults: while a deposed leader is still paused, lose a node that leads a partition
        (often the paused partition's new leader, which leaves that partition one live replica until the old
        leader resumes: it must then yield to the replica that holds every acknowledged commit). Returns the
        lost node."""
        partition = self.rng.randrange(self.svc.num_partitions)
        with self._paused(partition) as paused_node:
            leaders = [n for n in self._worker_leaders() if n != paused_node]
            others = [n.node_id for n in self.cluster.worker_nodes if n.node_id != paused_node]
            successor = self.svc.describe_partitions()[partition].leader
            lose_successor = successor in leaders and self.rng.random() < 0.5
            node_id = successor if lose_successor else self.rng.choice(leaders or others)
            hit, before, started = self._remove(node_id)
        if hit:
            self._count_failover(node_id, hit, before, started, overlapped=True)
        self.overlaps += 1
        return node_id

    def pause_follower_and_lose_leader(self, pause_s: float = 5.0) -> str:
        """Overlapping faults: a follower of a partition paused (SIGSTOP), then its leader's node lost. With the
        factor 3, that leaves one live replica, no majority, until the follower resumes `pause_s` later; the
        two must then elect a leader that holds every acknowledged commit. Returns the lost node."""
        self._leader_off_the_head()
        node_id = self.rng.choice(self._worker_leaders())
        partition = self.rng.choice([d.partition for d in self.svc.describe_partitions() if d.leader == node_id])
        follower = self.rng.choice([r for r in follower_roles(partition) if r["node_id"] != node_id])
        os.kill(follower["pid"], signal.SIGSTOP)
        try:
            hit, before, started = self._remove(node_id)
            # Poll for the violation, a leader elected with a majority down, until the pause ends.
            def minority_leader() -> str | None:
                now = self.svc.describe_partitions()[partition]
                if now.leader_epoch > before[partition] and now.leader not in (None, node_id):
                    return f"partition {partition}: {now.leader} leads epoch {now.leader_epoch} with a majority down"
                return None

            with contextlib.suppress(AssertionError):  # the deadline passing without one is the expected outcome
                self.minority_leaders.append(wait_for(minority_leader, pause_s, "a minority leader", 0.1))
        finally:
            os.kill(follower["pid"], signal.SIGCONT)
        self.paused_followers += 1
        if hit:
            self._count_failover(node_id, hit, before, started, overlapped=True)
        self.overlaps += 1
        return node_id

    def wait_repaired(self, timeout_s: float = 120) -> None:
        """Wait until every partition again has its full factor of replicas on live nodes, all in sync."""
        def repaired() -> bool:
            alive = {n["NodeID"] for n in ray.nodes() if n.get("Alive")} - set(self.lost_nodes)
            return all(
                len(set(d.replicas)) == self.factor and set(d.replicas) <= alive and set(d.in_sync) == set(d.replicas)
                for d in self.svc.describe_partitions()
            )

        def state() -> str:
            alive = sorted(n["NodeID"][:8] for n in ray.nodes() if n.get("Alive"))
            described = [(d.partition, d.leader_epoch, (d.leader or "-")[:8], sorted(r[:8] for r in d.replicas),
                          sorted(r[:8] for r in d.in_sync), d.lags) for d in self.svc.describe_partitions()]
            return f"alive nodes {alive}, lost {[n[:8] for n in self.lost_nodes]}, partitions {described}"

        wait_for(repaired, timeout_s, "every partition's lost replicas to be replaced and in sync", 0.2, state)

    def kill_some(self, overlap: bool = False, only: list[str] | None = None) -> None:
        """One fault: a pause of a random leader, or the loss of a node hosting a leader (see lose_node); with
        `overlap`, faults that overlap too: a loss during a leader's or a follower's pause, the router restarted
        during the repair after a loss, a live replica's directory wiped (a leader's a third of the time, and
        half the time while another partition's leader is paused), a learner's directory wiped during the repair
        after a loss, a follower's disk full. Afterwards the replicas' logs are compared below their watermarks
        and the voters checked (see check_replicas). `only` limits the draw to the kinds it names."""
        kinds = {"pause_leader": 1, "lose_node": 1} if not overlap else {
            "pause_and_lose": 1, "pause_follower_and_lose_leader": 1, "router_restart_in_repair": 1, "wipe": 1,
            "wipe_learner_in_repair": 1, "disk_full": 1, "pause_leader": 1, "lose_node": 2}
        if only:
            kinds = {k: w for k, w in kinds.items() if k in only}
        kind = self.rng.choices(list(kinds), list(kinds.values()))[0]
        losses: dict[str, Callable[[], str]] = {"lose_node": self.lose_node, "pause_and_lose": self.pause_and_lose,
                                                "pause_follower_and_lose_leader": self.pause_follower_and_lose_leader}
        if kind == "pause_leader":
            self.pause_leader(self.rng.randrange(self.svc.num_partitions))
        elif kind == "wipe":
            self.wipe_replica(leader=self.rng.random() < 1 / 3, during_a_pause=self.rng.random() < 0.5)
        elif kind == "disk_full":
            self.fill_follower_disk()
        else:
            if kind == "router_restart_in_repair":
                self.restart_router_during_repair(losses[self.rng.choice(list(losses))])
            elif kind == "wipe_learner_in_repair":
                self.wipe_learner_in_repair(self.lose_node)
            else:
                losses[kind]()
            self.cluster.add_node(num_cpus=1)
            self.wait_repaired()
        if kind not in ("wipe", "disk_full", "router_restart_in_repair", "wipe_learner_in_repair"):
            self._count(kind)
        self.check_replicas()

    def check_replicas(self, full: bool = False) -> None:
        """Compare the replicas' logs below their watermarks (what is new since the last check, or everything
        with `full`) and, once every partition is repaired, that the voters agree (see rel_replication_checks)."""
        self.logs.check(full)
        self.wait_repaired()
        last: list[str] = []

        def agreed() -> bool:
            last[:] = voter_problems(self.svc, self.storage, self.cluster.head_node.node_id)
            return not last

        # Right after a promotion the leader and the router may answer a moment apart: agreement within 60 s.
        with contextlib.suppress(AssertionError):
            wait_for(agreed, 60, "the placement, the router and the leaders to agree on the voters", 0.2)
        self.voter_problems += last

    def close(self) -> None:
        """Stop the reader, then stop and close every member."""
        self.reader.stop()
        super().close()

    def restart_all(self) -> None:
        """Kill every leader's actor at once (Ray restarts them as followers) and wait for new leaders."""
        # The current leaders' handles: an election since the last fault moves a leader, and killing the old
        # handle (now a follower) would elect no one.
        self.svc.refresh()
        before = epochs(self.svc)
        for p in range(self.svc.num_partitions):
            ray.kill(self.svc.partition(p), no_restart=False)
        self._wait_new_leaders(before, list(range(self.svc.num_partitions)))
