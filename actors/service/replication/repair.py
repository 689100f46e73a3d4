"""Repair: a replica lost with its node is recreated on another live node and caught up, restoring the factor.

The new replica joins as a learner: the leader copies its whole log to it (the compacted
segments, then the tail) and keeps shipping, but its acknowledgements do not count. Once it is
within a few flushes of the leader's end, and the new set of voters (the leader, the other
followers, the learner) holds everything below the high watermark on as many replicas as an
acknowledgement needs, the leader counts it in place of the lost replica and the router makes it
a voter of future elections (under the partition's election lock, and recorded in the placement
file). No acknowledged write is then on fewer replicas of the new set than it was acknowledged on.
Under steady commits a learner is never exactly at the watermark, so it is not asked to be.
A learner that loses its storage (its disk full as it starts, its directory wiped) answers the leader
that it did; it is then ended and forgotten, and a new learner takes its place.
"""

from __future__ import annotations

import asyncio
import logging
from collections import Counter

from .election import PartitionReplicaSet, Replica, ReplicationManager

log = logging.getLogger(__name__)

REPAIR_INTERVAL_S = 1.0
_CALL_TIMEOUT_S = 2.0
PROMOTE_LAG_RECORDS = 1_000  # a learner this close to the leader's end catches up as a voter within a few flushes


async def repair_turn(manager: ReplicationManager) -> None:
    """One pass over every partition's replicas, repairing what a lost node took (the router's supervisor runs it
    every REPAIR_INTERVAL_S, and logs, counts and backs off from a pass that fails)."""
    await manager.ready
    alive = set(manager.transport.alive_nodes())
    for rs in manager.sets:
        try:
            await repair_partition(manager, rs, alive)
        except Exception as e:  # one partition whose leader does not answer must not hold up the others
            log.warning("partition %d: repair step failed: %r", rs.partition, e)


def _pick_node(manager: ReplicationManager, rs: PartitionReplicaSet, alive: set[str], lost: int) -> str | None:
    """The live node without another replica of this partition that hosts the fewest replicas (the lost
    replica's own node last: its actor is ended before a learner takes its directory)."""
    used = {r.node_id for i, r in enumerate(rs.replicas) if i != lost}
    load = Counter(r.node_id for s in manager.sets for r in s.replicas)
    own = rs.replicas[lost].node_id
    free = sorted((n == own, load[n], n) for n in alive if n not in used)
    return free[0][2] if free else None


async def _lost_storage(manager: ReplicationManager, rs: PartitionReplicaSet, alive: set[str]) -> list[int]:
    """The replicas that lost their storage (a wiped disk: they refuse to vote) on live nodes."""
    roles = await asyncio.gather(
        *(manager.role(r, _CALL_TIMEOUT_S) for r in rs.replicas if r.node_id in alive), return_exceptions=True
    )
    live = [i for i, r in enumerate(rs.replicas) if r.node_id in alive]
    return [i for i, role in zip(live, roles, strict=True) if isinstance(role, dict) and role.get("lost")]


async def _give_up(manager: ReplicationManager, rs: PartitionReplicaSet, learner: Replica, leader: Replica) -> None:
    """End a learner that its leader found without its storage (its disk was full or wiped as it started or caught
    up: it refuses every record, so it would never catch up, and must never vote), and forget it durably; the next
    pass starts a new one."""
    if learner.handle is not None:
        manager.transport.kill(learner.handle)
    try:
        await asyncio.wait_for(manager.transport.call(leader.handle, "drop_learner", learner.replica_id),
                               _CALL_TIMEOUT_S)
    except Exception as e:  # a leader elected since never shipped to it
        log.debug("partition %d: dropping learner %s: %r", rs.partition, learner.replica_id, e)
    rs.learner = None
    manager.save()
    log.warning("partition %d: learner %s lost its storage; a new one replaces it", rs.partition, learner.replica_id)


async def repair_partition(manager: ReplicationManager, rs: PartitionReplicaSet, alive: set[str]) -> None:
    """One step of repairing a partition: start a learner for a lost replica, or promote a caught-up one."""
    if rs.learner is None:
        lost = [i for i, r in enumerate(rs.replicas) if r.node_id not in alive]
        if not lost:
            lost = await _lost_storage(manager, rs, alive)
        node = _pick_node(manager, rs, alive, lost[0]) if lost else None
        if node is None:
            return
        gone = rs.replicas[lost[0]]
        if gone.handle is not None and gone.node_id in alive:
            manager.transport.kill(gone.handle)  # a replica without its storage: ended before a learner replaces it
        manager.generation += 1
        # The learner is recorded durably before its actor exists: a restarted router finds it, and never
        # reuses its name or generation for another.
        rs.learner = (lost[0], manager.planned(rs.partition, lost[0], manager.generation, node))
        try:
            manager.save()
        except BaseException:
            rs.learner = None  # not recorded, so not created: the next pass plans it again
            raise
        rs.learner = (lost[0], manager.create(rs.partition, lost[0], manager.generation, node))
        log.warning("partition %d: replica %s lost; new replica %s on node %s", rs.partition,
                    gone.replica_id, rs.learner[1].replica_id, node[:8])
    index, learner = rs.learner
    if learner.node_id not in alive:
        rs.learner = None  # lost too: start again elsewhere
        return
    leader = rs.leader
    if leader is None or leader.handle is None:
        return
    role = await manager.role(leader, _CALL_TIMEOUT_S)
    if not role["leading"]:
        return
    if learner.replica_id in role.get("lost_followers", ()):
        await _give_up(manager, rs, learner, leader)
        return
    lag = role["lags"].get(learner.replica_id, "absent")
    if lag == "absent":
        call = manager.transport.call(leader.handle, "add_learner", learner.replica_id, learner.handle)
        await asyncio.wait_for(call, _CALL_TIMEOUT_S)
        return
    if lag is None or lag > PROMOTE_LAG_RECORDS:
        return  # still catching up (whether it may vote with a few records to go, the leader decides in `promote`)
    async with rs.lock:
        if rs.leader is not leader:
            return
        lost = rs.replicas[index]
        call = manager.transport.call(leader.handle, "promote", learner.replica_id, lost.replica_id)
        if await asyncio.wait_for(call, _CALL_TIMEOUT_S):
            rs.replicas[index] = learner
            rs.learner = None
            manager.save()
            log.warning("partition %d: replica %s on node %s is a voter and replaces %s", rs.partition,
                        learner.replica_id, learner.node_id[:8], lost.replica_id)
