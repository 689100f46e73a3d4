"""Placement of a replicated service's replicas and the election of each partition's leader (the router runs it).

The scheme is a majority quorum with the router as the single elector (see docs/replication.md):
an election for epoch E asks every replica to promise E durably; a replica promises only an epoch
above any it promised before, and refuses records from older leaders from then on. With promises
from a majority, the router picks the most up-to-date log among them (last leader epoch, then end
offset) and tells that replica to lead E. Writes are acknowledged on at least a majority
(min_insync_replicas is never below it), and any two majorities share a replica, so the chosen log
holds every acknowledged write. Nothing of it lives only in the router: a restarted router reads
the epochs back from the replicas, and a fresh election always uses an epoch above every promise.
"""

from __future__ import annotations

import asyncio
import logging
from dataclasses import dataclass, field
from typing import Any

from ..names import partition_actor_name
from ..spec import ServiceSpec
from .decisions import choose_leader
from .messages import PromiseAnswer
from .placement import PlacementFile, acks_needed
from .replica_actor import ReplicaActor
from .transport import RayTransport, Transport

log = logging.getLogger(__name__)

PROMISE_TIMEOUT_S = 1.5  # how long an election waits for promises
PROMISE_GRACE_S = 0.05  # once a majority promised, how long to wait for the others' (maybe longer) logs
LEAD_TIMEOUT_S = 5.0
PING_TIMEOUT_S = 0.2
MAX_ROUNDS = 8


def replica_actor_name(partition: int, index: int) -> str:
    """The registered name of replica `index` of a partition."""
    return f"{partition_actor_name(partition)}-replica-{index}"


def alive_node_ids() -> list[str]:
    """The ids of the alive Ray nodes, sorted."""
    return RayTransport().alive_nodes()


@dataclass
class Replica:
    """One replica as the router knows it: its id, node and actor handle."""

    replica_id: str
    node_id: str
    handle: Any  # None when its actor is gone for good (its node died): repair replaces it
    name: str = ""


@dataclass
class PartitionReplicaSet:
    """A partition's replicas, its current leader epoch and leader."""

    partition: int
    replicas: list[Replica]
    epoch: int = 0
    leader: Replica | None = None
    learner: tuple[int, Replica] | None = None  # a new replica catching up to take the place of a lost one
    lock: asyncio.Lock = field(default_factory=asyncio.Lock)

    @property
    def majority(self) -> int:
        """How many replicas form a majority."""
        return len(self.replicas) // 2 + 1


class ReplicationManager:
    """Creates the replica actors of every partition on distinct nodes and elects their leaders."""

    def __init__(
        self, spec: ServiceSpec, leaders: list[Any], local_root: str, transport: Transport | None = None,
        files: Any = None,
    ) -> None:
        self.spec = spec
        self.transport = transport if transport is not None else RayTransport(spec.namespace)
        self.leaders = leaders  # the router's partition handle list, kept pointing at each leader
        self.placement = PlacementFile(local_root, files)
        self.generation = 0
        nodes = self.transport.alive_nodes()
        factor = spec.replication_factor
        if factor > len(nodes):
            raise ValueError(f"replication_factor {factor} exceeds the {len(nodes)} alive Ray nodes")
        saved = self.placement.read()
        if saved is not None:
            self.generation = saved["generation"]
            self.sets = [
                PartitionReplicaSet(p, [self._reopen(p, rid, node, name, nodes) for rid, node, name in entries])
                for p, entries in enumerate(saved["partitions"])
            ]
            for p, (index, rid, node, name) in saved.get("learners", {}).items():
                learner = self._spawn(int(p), rid, name, node, create_root=True) if node in nodes else None
                self.sets[int(p)].learner = (index, learner or Replica(rid, node, None, name))
        else:
            self.sets = [
                PartitionReplicaSet(p, [self.create(p, r, 0, nodes[(p + r) % len(nodes)]) for r in range(factor)])
                for p in range(spec.num_partitions)
            ]
            self.save()
        leaders[:] = [None] * spec.num_partitions
        self.ready = asyncio.get_running_loop().create_task(self._bootstrap())

    def create(self, partition: int, index: int, generation: int, node_id: str) -> Replica:
        """A new replica actor for slot `index` of a partition, pinned to `node_id` (it may create its node's root)."""
        replica = self.planned(partition, index, generation, node_id)
        return self._spawn(partition, replica.replica_id, replica.name, node_id, create_root=True)

    @staticmethod
    def planned(partition: int, index: int, generation: int, node_id: str) -> Replica:
        """The id and actor name a new replica of slot `index` in `generation` gets (no actor yet)."""
        name = replica_actor_name(partition, index) + (f"-g{generation}" if generation else "")
        replica_id = f"{partition}-{index}" + (f".{generation}" if generation else "")
        return Replica(replica_id, node_id, None, name)

    def _spawn(self, partition: int, replica_id: str, name: str, node_id: str, create_root: bool = False) -> Replica:
        acks = acks_needed(self.spec.replication_factor, self.spec.min_insync_replicas)
        args = (partition, self.spec, replica_id, acks, create_root)
        handle = self.transport.spawn_replica(ReplicaActor, name, node_id, args)
        return Replica(replica_id, node_id, handle, name)

    def _reopen(self, partition: int, replica_id: str, node_id: str, name: str, alive: list[str]) -> Replica:
        """A saved replica: its running actor, a new actor over its disk if its node lives, else a gap to repair."""
        if node_id in alive:
            return self._spawn(partition, replica_id, name, node_id)  # get_if_exists: the running one if any
        return Replica(replica_id, node_id, None, name)

    def save(self) -> None:
        """Record every partition's replicas (the voters elections use) and learners in the router's storage root."""
        placement = [[(r.replica_id, r.node_id, r.name) for r in rs.replicas] for rs in self.sets]
        learners = {
            str(rs.partition): (rs.learner[0], rs.learner[1].replica_id, rs.learner[1].node_id, rs.learner[1].name)
            for rs in self.sets if rs.learner is not None
        }
        self.placement.write(self.generation, placement, learners)

    async def role(self, replica: Replica, timeout: float | None = None) -> dict:
        """The role of a replica (raises when it has no actor or does not answer within `timeout`)."""
        if replica.handle is None:
            raise LookupError(f"replica {replica.replica_id} has no actor")
        return await asyncio.wait_for(self.transport.call(replica.handle, "role"), timeout)

    async def _bootstrap(self) -> None:
        """Learn the epochs and leaders the replicas hold (after a router restart), then elect where none leads."""
        await asyncio.gather(*(self._recover(rs) for rs in self.sets))

    async def _recover(self, rs: PartitionReplicaSet) -> None:
        roles = await asyncio.gather(*(self.role(r, LEAD_TIMEOUT_S) for r in rs.replicas), return_exceptions=True)
        for replica, role in zip(rs.replicas, roles, strict=True):
            if isinstance(role, dict):
                replica.node_id = role["node_id"]
                rs.epoch = max(rs.epoch, role["promised_epoch"])
        leading = [
            (replica, role) for replica, role in zip(rs.replicas, roles, strict=True)
            if isinstance(role, dict) and role["leading"] and role["leader_epoch"] == rs.epoch
        ]
        if leading:
            self._set_leader(rs, leading[0][0], rs.epoch)
        else:
            await self.elect(rs.partition, rs.epoch)

    def _set_leader(self, rs: PartitionReplicaSet, replica: Replica, epoch: int) -> None:
        rs.epoch, rs.leader = epoch, replica
        self.leaders[rs.partition] = replica.handle
        log.info("partition %d: leader %s (node %s) in epoch %d", rs.partition, replica.replica_id,
                 replica.node_id[:8], epoch)

    async def elect(self, partition: int, known_epoch: int) -> int:
        """Elect a leader unless one was elected after `known_epoch` and still answers; the leader epoch."""
        rs = self.sets[partition]
        async with rs.lock:
            if rs.leader is not None and rs.epoch >= known_epoch and await self._leads(rs):
                return rs.epoch
            if rs.leader is not None and not await self._leader_lost(rs):
                log.info("partition %d: leader %s kept: a majority of its replicas still hears it",
                         partition, rs.leader.replica_id)
                return rs.epoch
            epoch = rs.epoch + 1
            for _ in range(MAX_ROUNDS):
                started = self.transport.monotonic()
                promised, highest = await self._promises(rs, epoch)
                if len(promised) >= rs.majority:
                    best = promised[choose_leader([a for _, a in promised])]  # type: ignore[index]
                    followers = [(r.replica_id, r.handle) for r in rs.replicas if r is not best[0] and r.handle]
                    if await self._lead(best[0], epoch, followers):
                        self._set_leader(rs, best[0], epoch)
                        log.info("partition %d: election of epoch %d took %.0f ms", partition, epoch,
                                 (self.transport.monotonic() - started) * 1000)
                        return epoch
                else:
                    log.warning("partition %d: only %d of %d replicas promised epoch %d",
                                partition, len(promised), len(rs.replicas), epoch)
                    await asyncio.sleep(0.2)
                rs.epoch = epoch = max(epoch, highest) + 1
            return rs.epoch

    async def _leads(self, rs: PartitionReplicaSet) -> bool:
        assert rs.leader is not None
        try:
            role = await self.role(rs.leader, PING_TIMEOUT_S)
        except Exception:
            return False
        # A leader whose lease lapsed (its followers do not answer it) is replaced even if the router reaches it.
        return bool(role["leading"]) and role["leader_epoch"] == rs.epoch and bool(role.get("lease", True))

    async def _leader_lost(self, rs: PartitionReplicaSet) -> bool:
        """KIP-996's pre-vote: whether a majority of the replicas has heard from no leader for a leader timeout.

        An election deposes the leader (it promises the new epoch, or a follower that did refuses it), so it
        starts only then: a router ping that timed out on a busy machine, or one follower that stopped hearing
        the leader, is no proof that the leader is gone.
        """
        pending = {asyncio.ensure_future(self._ask(r, "prevote")): r for r in rs.replicas}
        lost = kept = 0
        deadline = self.transport.monotonic() + PROMISE_TIMEOUT_S
        try:
            while pending and (timeout := deadline - self.transport.monotonic()) > 0:
                done, _ = await asyncio.wait(pending, timeout=timeout, return_when=asyncio.FIRST_COMPLETED)
                for fut in [f for f in pending if f in done]:  # in the replicas' order: a replayable election
                    del pending[fut]
                    if fut.result() is True:
                        lost += 1
                    else:
                        kept += 1  # it still hears a leader, or did not answer: no vote to depose
                if lost >= rs.majority:
                    return True
                if kept > len(rs.replicas) - rs.majority:
                    return False
            return False
        finally:
            for fut in pending:
                fut.cancel()

    async def _promises(
        self, rs: PartitionReplicaSet, epoch: int
    ) -> tuple[list[tuple[Replica, PromiseAnswer]], int]:
        """Ask every replica to promise `epoch`: the (replica, answer) of those that did, and the highest refusal."""
        pending = {asyncio.ensure_future(self._ask(r, "promise", epoch)): r for r in rs.replicas}
        promised: list[tuple[Replica, PromiseAnswer]] = []
        highest = epoch
        deadline = self.transport.monotonic() + PROMISE_TIMEOUT_S
        while pending:
            timeout = deadline - self.transport.monotonic()
            if len(promised) >= rs.majority:
                timeout = min(timeout, PROMISE_GRACE_S)
            if timeout <= 0:
                break
            done, _ = await asyncio.wait(pending, timeout=timeout, return_when=asyncio.FIRST_COMPLETED)
            if not done:
                break
            for fut in [f for f in pending if f in done]:  # in the replicas' order: a replayable election
                replica = pending.pop(fut)
                answer = fut.result()
                if answer is None:
                    continue
                if answer.ok:
                    promised.append((replica, answer))
                else:
                    highest = max(highest, answer.promised)
        for fut in pending:
            fut.cancel()
        return promised, highest

    async def _ask(self, replica: Replica, method: str, *args: Any) -> Any:
        """A replica's answer to `method`, or None when it has no actor or the call failed."""
        if replica.handle is None:
            return None
        try:
            return await self.transport.call(replica.handle, method, *args)
        except Exception as e:
            log.debug("replica %s did not answer %s%r: %r", replica.replica_id, method, args, e)
            return None

    async def _lead(self, replica: Replica, epoch: int, followers: list[tuple[str, Any]]) -> bool:
        try:
            return bool(await asyncio.wait_for(self.transport.call(replica.handle, "lead", epoch, followers),
                                               LEAD_TIMEOUT_S))
        except Exception as e:
            log.warning("replica %s could not lead epoch %d: %r", replica.replica_id, epoch, e)
            return False

    def handles(self) -> list[Any]:
        """Every replica actor of every partition, learners included."""
        learners = [rs.learner[1] for rs in self.sets if rs.learner is not None]
        return [r.handle for rs in self.sets for r in [*rs.replicas, *learners] if r.handle is not None]

    # --- facts ----------------------------------------------------------------------------------------------

    async def describe(self) -> list[dict]:
        """Per partition: leader epoch, leader node, replica nodes, in-sync nodes and each follower's lag."""
        out = []
        for rs in self.sets:
            leader = rs.leader
            role = None
            if leader is not None:
                try:
                    role = await self.role(leader, PING_TIMEOUT_S * 3)
                except Exception as e:
                    log.debug("partition %d: leader unreachable: %r", rs.partition, e)
            lags = role["lags"] if role else {}
            voters = {r.replica_id for r in rs.replicas}
            learners = [rs.learner[1]] if rs.learner is not None else []
            node_of = {r.replica_id: r.node_id for r in [*rs.replicas, *learners]}
            in_sync = [leader.node_id] if role and leader is not None else []
            in_sync += [node_of[rid] for rid in (role["in_sync"] if role else []) if rid in voters]
            out.append({
                "partition": rs.partition,
                "leader_epoch": rs.epoch,
                "leader": leader.node_id if role else None,
                "replicas": [r.node_id for r in rs.replicas],
                "in_sync": in_sync,
                "lags": {node_of[rid]: lag for rid, lag in lags.items() if rid in node_of},
            })
        return out
