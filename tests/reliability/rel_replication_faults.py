"""Storage and router faults of the Ray-level replication chaos, overlapping with commits and other faults.

- A live replica's disk wiped: its partition directory deleted under the running actor. Its next write
  fails (the writer-epoch file is gone), it ends, comes back without its epoch checkpoint, refuses to vote
  and is replaced by repair; it is never counted meanwhile.
- The router restarted during a repair: a node lost, and once the router has recorded a learner for a lost
  replica (or, half the time, once the leader copies to it), the router is killed and Ray restarts it; the
  repair must complete with the placement, the voters' nodes and each leader's followers agreeing.
- A follower's disk full: a real ENOSPC. Each worker node's storage root is a small tmpfs (mounted when the
  node joins) that a filler file fills; the follower's next append fails, it ends, and Ray restarts it until
  space returns; commits go on with the other replicas meanwhile. Where mounting is not allowed, the
  follower's process gets an RLIMIT_FSIZE below its log's size instead (a real EFBIG from the OS).
"""

from __future__ import annotations

import contextlib
import os
import resource
import shutil
import subprocess
import threading
from pathlib import Path
from typing import Any, Callable

import ray
from rel_replication_checks import partition_dir, read_placement, replica_roles
from waiting import wait_for

from groupcoord.storage.epoch_checkpoint import CHECKPOINT_FILE

TMPFS_SIZE = "128m"


def _failure(*cmd: str) -> str:
    """Run a command: "" if it succeeded, else what it said."""
    done = subprocess.run(cmd, capture_output=True, text=True)
    return "" if done.returncode == 0 else f"`{' '.join(cmd)}`: {(done.stderr or done.stdout).strip()}"


class NodeDisks:
    """A small tmpfs as the storage root of each worker node (when this machine lets us mount), so that a node's
    disk can really fill up."""

    def __init__(self, storage: str) -> None:
        self.storage = storage
        self.mounted: set[str] = set()
        self.why_not: str = ""  # why mounting failed (then disk-full faults use RLIMIT_FSIZE)

    def path(self, node_id: str) -> Path:
        """The node's storage root."""
        return Path(self.storage.replace("{node_id}", node_id))

    def add(self, node_id: str) -> None:
        """Mount a tmpfs at the node's storage root, unless a replica made it already (then it stays as it is)."""
        path = self.path(node_id)
        if self.why_not or path.exists():
            return
        path.mkdir(parents=True)
        self.why_not = _failure("mount", "-t", "tmpfs", "-o", f"size={TMPFS_SIZE}", "tmpfs", str(path))
        if not self.why_not:
            self.mounted.add(node_id)

    def release(self, node_id: str) -> None:
        """Unmount a lost node's tmpfs (lazily: a process of it may still hold a file)."""
        if node_id in self.mounted:
            self.mounted.discard(node_id)
            _failure("umount", "-l", str(self.path(node_id)))

    def release_all(self) -> None:
        """Unmount every tmpfs."""
        for node_id in list(self.mounted):
            self.release(node_id)

    def fill(self, node_id: str) -> Path:
        """Write a filler file until the node's file system is full (ENOSPC); returns it."""
        filler = self.path(node_id) / "filler"
        fd = os.open(filler, os.O_WRONLY | os.O_CREAT, 0o644)
        try:
            for chunk in (1 << 20, 1 << 16, 4096, 512, 1):
                with contextlib.suppress(OSError):
                    while True:
                        os.write(fd, b"\0" * chunk)
        finally:
            os.close(fd)
        return filler


class ReplicaFaults:
    """The storage and router faults of NodeChaos (a mixin: it uses NodeChaos's cluster, service and ledger)."""

    cluster: Any
    svc: Any
    storage: str
    rng: Any
    disks: NodeDisks

    def _init_faults(self) -> None:
        self.wipes: dict[str, int] = {"follower": 0, "leader": 0, "during_a_pause": 0, "learner_in_repair": 0}
        self.router_restarts: dict[str, int] = {"learner_recorded": 0, "learner_catching_up": 0}
        self.full_disks: dict[str, int] = {"tmpfs": 0, "rlimit": 0, "follower_restarts": 0, "acks_while_full": 0}
        self.fault_kinds: dict[str, int] = {}

    def _count(self, kind: str) -> None:
        self.fault_kinds[kind] = self.fault_kinds.get(kind, 0) + 1

    # --- a live replica's disk wiped ------------------------------------------------------------------

    def wipe_replica(self, leader: bool = False, during_a_pause: bool = False) -> str:
        """Delete a live replica's partition directory under its running actor (a follower's, or with `leader`
        the leader's; with `during_a_pause`, while another partition's deposed leader is paused), then wait
        until repair has replaced it as a voter and every partition is in sync. Returns the wiped replica's id."""
        p = self.rng.randrange(self.svc.num_partitions)
        others = [q for q in range(self.svc.num_partitions) if q != p]
        pause = self._paused(self.rng.choice(others)) if during_a_pause and others else contextlib.nullcontext()
        with pause:
            roles = [r for q, r in replica_roles(self.svc.num_partitions) if q == p and not r["lost"]]
            target = next((r for r in roles if r["leading"]), None) if leader else None
            target = target or self.rng.choice([r for r in roles if not r["leading"]] or roles)
            directory = partition_dir(self.storage, target["node_id"], p)
            for _ in range(10):  # the replica may create a file while the tree goes: delete until it is gone
                shutil.rmtree(directory, ignore_errors=True)
                if not directory.exists():
                    break
        self.wipes["leader" if target["leading"] else "follower"] += 1
        self.wipes["during_a_pause"] += during_a_pause and bool(others)
        self._count("wipe")
        rid = target["replica_id"]
        head = self.cluster.head_node.node_id
        wait_for(lambda: all(v[0] != rid for v in read_placement(self.storage, head)["partitions"][p]), 120,
                 f"replica {rid} (directory wiped) to be replaced", 0.2)
        self.wait_repaired()
        self.check_after_restart([p])
        return rid

    @staticmethod
    def _while_losing(lose: Callable[[], str], name: str, act: Callable[..., None], *args: Any) -> str:
        """Run `lose` (a node loss) while `act(*args)` runs in a thread, waiting for the repair to reach the point
        where it strikes; returns the lost node."""
        watcher = threading.Thread(target=act, args=args, name=name, daemon=True)
        watcher.start()
        try:
            return lose()
        finally:
            watcher.join(180)

    def wipe_learner_in_repair(self, lose: Callable[[], str]) -> str:
        """Overlapping faults: run `lose` (a node loss), and once the router has created a learner for a lost
        replica, delete the learner's directory while it catches up: it must be ended and replaced (never waited
        for), and the repair must complete. Returns the lost node."""
        wiped: list[str] = []
        node = self._while_losing(lose, "learner-wiper", self._wipe_a_learner, wiped)
        assert wiped, "no learner was seen, so none was wiped"
        self.wipes["learner_in_repair"] += 1
        self._count("wipe_learner_in_repair")
        head = self.cluster.head_node.node_id
        wait_for(lambda: all(v[0] != wiped[0] for p in read_placement(self.storage, head)["partitions"] for v in p),
                 120, f"the wiped learner {wiped[0]} to be gone from the voters", 0.2)
        return node

    def _wipe_a_learner(self, wiped: list[str]) -> None:
        """Delete the directory of the first learner the router records: half the time as soon as it exists (a
        node's root makes every partition's directory, so often before the learner starts), else once the learner
        has written its epoch checkpoint there (it runs, and its next write fails)."""
        head = self.cluster.head_node.node_id
        started = self.rng.random() < 0.5
        self.wipes["learner_started" if started else "learner_starting"] = \
            self.wipes.get("learner_started" if started else "learner_starting", 0) + 1

        def learner_dir() -> tuple[str, Path] | None:
            with contextlib.suppress(OSError, ValueError):  # the placement file being replaced
                for p, (_, rid, node, _) in read_placement(self.storage, head).get("learners", {}).items():
                    directory = partition_dir(self.storage, node, int(p))
                    if (directory / CHECKPOINT_FILE).exists() if started else directory.exists():
                        return rid, directory
            return None

        try:
            rid, directory = wait_for(learner_dir, 150, "a learner's directory", 0.02)
        except AssertionError:
            return
        for _ in range(10):
            shutil.rmtree(directory, ignore_errors=True)
            if not directory.exists():
                break
        wiped.append(rid)

    # --- the router restarted during a repair ---------------------------------------------------------

    def restart_router_during_repair(self, lose: Callable[[], str]) -> str:
        """Overlapping faults: run `lose` (a node loss, itself maybe overlapped), and kill the router (Ray restarts
        it) once it has recorded a learner for a lost replica, or, half the time, once a leader copies to one.
        Returns the lost node."""
        catching_up = self.rng.random() < 0.5
        killed: list[str] = []
        node = self._while_losing(lose, "router-killer", self._kill_router_in_repair, catching_up, killed)
        assert killed, "no repair was seen under way, so the router was not restarted during one"
        self.router_restarts[killed[0]] += 1
        self._count("router_restart_in_repair")
        wait_for(lambda: ray.get(self.svc.router.info.remote(), timeout=10), 120, "the router to restart")
        return node

    def _kill_router_in_repair(self, catching_up: bool, killed: list[str]) -> None:
        """Kill the router once its placement records a learner (the repair's first, durable step), or with
        `catching_up` once a leader copies its log to that learner; `killed` gets the stage."""
        head = self.cluster.head_node.node_id

        def learner_recorded() -> bool:
            with contextlib.suppress(OSError, ValueError):  # the placement file being replaced
                return bool(read_placement(self.storage, head).get("learners"))
            return False

        def learner_catching_up() -> bool:
            return any(r["leading"] and r["learners"] for _, r in replica_roles(self.svc.num_partitions, 2.0))

        try:
            wait_for(learner_recorded, 150, "the router to record a learner", 0.02)
        except AssertionError:
            return
        stage = "learner_recorded"
        if catching_up:
            with contextlib.suppress(AssertionError):  # promoted meanwhile: the router is killed all the same
                wait_for(learner_catching_up, 10, "a leader to copy its log to a learner", 0.05)
                stage = "learner_catching_up"
        ray.kill(self.svc.router, no_restart=False)
        killed.append(stage)

    # --- a follower's disk full ----------------------------------------------------------------------

    def fill_follower_disk(self) -> str:
        """Fill the disk of a worker node that hosts followers (one that leads nothing when there is one) while
        commits go on: its followers' next appends fail with ENOSPC and they end (Ray restarts them, to fail again)
        while the other replicas acknowledge commits; then space returns and they must catch up. Returns the
        node."""
        described = self.svc.describe_partitions()
        leaders = {d.leader for d in described}
        hosting = {n for d in described for n in d.replicas}
        workers = [n.node_id for n in self.cluster.worker_nodes if n.node_id in hosting]
        tmpfs = [n for n in workers if n in self.disks.mounted]
        pool = tmpfs or ([] if self.disks.mounted else workers)
        node = self.rng.choice([n for n in pool if n not in leaders] or pool)
        followers = [r for _, r in replica_roles(self.svc.num_partitions) if r["node_id"] == node]
        pids = {r["replica_id"]: r["pid"] for r in followers}
        acked = self.ledger.counts()["NONE"]
        undo = self._fill(node, followers)
        def failed_and_acked() -> bool:
            """Every replica on the node ended (its append failed) or is down, and 20 more commits were
            acknowledged meanwhile (by the other replicas)."""
            now = {r["replica_id"]: r["pid"] for _, r in replica_roles(self.svc.num_partitions, 2.0)}
            return self.ledger.counts()["NONE"] >= acked + 20 and all(now.get(rid) != pid for rid, pid in pids.items())

        try:
            wait_for(failed_and_acked, 120, f"the replicas on {node[:8]} to fail on a full disk while commits go on",
                     0.2)
            self.full_disks["follower_restarts"] += len(pids)
            self.full_disks["acks_while_full"] += self.ledger.counts()["NONE"] - acked
        finally:
            undo()
        self._count("disk_full")
        self.wait_repaired()
        self.check_after_restart(list(range(self.svc.num_partitions)))
        return node

    def _fill(self, node: str, followers: list[dict]) -> Callable[[], None]:
        """Make the node's disk full (tmpfs) or its followers' files unable to grow (RLIMIT_FSIZE); the undo."""
        if node in self.disks.mounted:
            filler = self.disks.fill(node)
            self.full_disks["tmpfs"] += 1
            return lambda: filler.unlink()
        self.full_disks["rlimit"] += 1
        for r in followers:
            with contextlib.suppress(ProcessLookupError):
                resource.prlimit(r["pid"], resource.RLIMIT_FSIZE, (0, resource.RLIM_INFINITY))
        # A restarted follower runs without the limit: the fault ends with its process.
        return lambda: None

