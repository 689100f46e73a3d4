"""Repair: a replica lost with its node is recreated on another live node and caught up, restoring the factor.

The new replica joins as a learner: the leader copies its whole log to it (the compacted
segments, then the tail) and keeps shipping, but its acknowledgements do not count. Once it
holds everything below the leader's high watermark, the leader counts it in place of the lost
replica and the router makes it a voter of future elections (under the partition's election
lock, and recorded in the placement file). Every acknowledged write is then on a majority of
the new replica set: whatever a majority of the old set held, the leader held, and so does the
new replica.
"""

from __future__ import annotations

import asyncio
import logging
from collections import Counter

from .election import PartitionReplicaSet, ReplicationManager, alive_node_ids

log = logging.getLogger(__name__)

REPAIR_INTERVAL_S = 1.0
_CALL_TIMEOUT_S = 2.0


async def repair_turn(manager: ReplicationManager) -> None:
    """One pass over every partition's replicas, repairing what a lost node took (the router's supervisor runs it
    every REPAIR_INTERVAL_S, and logs, counts and backs off from a pass that fails)."""
    await manager.ready
    alive = set(alive_node_ids())
    for rs in manager.sets:
        await repair_partition(manager, rs, alive)


def _pick_node(manager: ReplicationManager, rs: PartitionReplicaSet, alive: set[str]) -> str | None:
    """The live node without a replica of this partition that hosts the fewest replicas."""
    used = {r.node_id for r in rs.replicas}
    load = Counter(r.node_id for s in manager.sets for r in s.replicas)
    free = sorted((load[n], n) for n in alive if n not in used)
    return free[0][1] if free else None


async def repair_partition(manager: ReplicationManager, rs: PartitionReplicaSet, alive: set[str]) -> None:
    """One step of repairing a partition: start a learner for a lost replica, or promote a caught-up one."""
    if rs.learner is None:
        lost = [i for i, r in enumerate(rs.replicas) if r.node_id not in alive]
        node = _pick_node(manager, rs, alive) if lost else None
        if node is None:
            return
        manager.generation += 1
        rs.learner = (lost[0], manager.create(rs.partition, lost[0], manager.generation, node))
        log.warning("partition %d: replica %s lost with its node; new replica %s on node %s", rs.partition,
                    rs.replicas[lost[0]].replica_id, rs.learner[1].replica_id, node[:8])
    index, learner = rs.learner
    if learner.node_id not in alive:
        rs.learner = None  # lost too: start again elsewhere
        return
    leader = rs.leader
    if leader is None or leader.handle is None:
        return
    role = await asyncio.wait_for(leader.handle.role.remote(), _CALL_TIMEOUT_S)
    if not role["leading"]:
        return
    lag = role["lags"].get(learner.replica_id, "absent")
    if lag == "absent":
        await asyncio.wait_for(leader.handle.add_learner.remote(learner.replica_id, learner.handle), _CALL_TIMEOUT_S)
        return
    if lag is None or role["end"] - lag < role["high_watermark"]:
        return  # still catching up
    async with rs.lock:
        if rs.leader is not leader:
            return
        lost = rs.replicas[index]
        if await asyncio.wait_for(leader.handle.promote.remote(learner.replica_id, lost.replica_id), _CALL_TIMEOUT_S):
            rs.replicas[index] = learner
            rs.learner = None
            manager.save()
            log.warning("partition %d: replica %s on node %s is in sync and replaces %s", rs.partition,
                        learner.replica_id, learner.node_id[:8], lost.replica_id)
