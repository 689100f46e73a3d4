"""One replica of a replicated offsets partition: a hot-standby follower, or the leader that serves requests.

A follower appends what its leader ships to its own log on its node's disk, fsyncs it, and
replays into a standby shard the records below the leader's high watermark (records above it
may still be cut by a later leader). Elections are run by the router (see election.py): a
replica promises an epoch durably and from then on refuses records from older leaders; the
chosen one takes its standby shard over at once (no replay) and writes its epoch-start marker.
A leader that learns of a newer epoch ends its process, so that no write of its can be
acknowledged any more; Ray restarts it, and it comes back as a follower from its disk.

Each node's storage (`{node_id}` in the service's path) is its own storage root. A replica the
router creates (a new service, or a repair) may create its node's root; a replica reopened from
the placement must find its root and partition directory (a lost one is refused, never rejoined
empty: it would vote with a log missing acknowledged writes). The replica's actor is the one
writer of its log (storage.writer): appending, truncating and its epoch checkpoint all check it.
"""

from __future__ import annotations

import asyncio
import dataclasses
import logging
import os
import threading
import time
from collections import deque
from typing import Any

import ray

from groupcoord.protocol import Errors, SystemClock
from groupcoord.protocol.config import GroupConfig
from groupcoord.protocol.responses import error_response
from groupcoord.protocol.shard.coordinator import GroupCoordinator
from groupcoord.storage import StorageRoot
from groupcoord.storage.epoch_checkpoint import EpochState, LeaderEpochCheckpoint
from groupcoord.storage.truncation import TruncationError, truncate_partition_dir

from .names import ROUTER_NAME
from .partition_actor import PartitionActor
from .partition_runtime import PartitionRuntime
from .replicated_log import LeaderFencedError, ReplicatedLog, epoch_marker
from .spec import ServiceSpec
from .supervisor import LoopSupervisor
from .telemetry import PartitionTelemetry, ReplicationFacts

log = logging.getLogger(__name__)

HEARTBEAT_INTERVAL_S = 0.1  # how often a leader contacts its followers when idle
LEADER_TIMEOUT_S = 0.6  # a follower that hears nothing from a leader for this long (6 heartbeats) asks for an election
_DEPOSED_EXIT_CODE = 75
_WATCH_FAILURE_EXIT_CODE = 70
NODE_ID_FIELD = "{node_id}"


def node_storage_path(template: str, node_id: str) -> str:
    """A storage path with `{node_id}` replaced by the Ray node id (how node-local disks are named)."""
    return template.replace(NODE_ID_FIELD, node_id)


def router_root_path(spec: ServiceSpec, node_id: str) -> str:
    """The storage root of a service's router on `node_id`: its node's own root when replicated."""
    return node_storage_path(spec.storage_path, node_id) if spec.replication_factor > 1 else spec.storage_path


class LeaderRuntime(PartitionRuntime):
    """The partition runtime of a promoted replica: it adopts the standby shard instead of replaying a log."""

    def __init__(
        self, partition: int, spec: ServiceSpec, rlog: ReplicatedLog, coord: GroupCoordinator, root: StorageRoot
    ) -> None:
        self._adopted = (rlog, coord)
        super().__init__(partition, spec)
        self.root = root

    def _open_and_replay(self) -> tuple[Any, GroupCoordinator, int]:
        rlog, coord = self._adopted
        self.load_cpu_ms = 0.0
        return rlog, coord, 0


class ReplicaActor(PartitionActor):
    """A replica of one offsets partition; it serves requests only while it leads (else NOT_COORDINATOR)."""

    def __init__(
        self,
        partition: int,
        spec: ServiceSpec,
        replica_id: str,
        min_insync: int,
        create_root: bool = False,
    ) -> None:
        self.partition = partition
        self.num_partitions = spec.num_partitions
        self.replica_id = replica_id
        self.node_id = ray.get_runtime_context().get_node_id()
        path = node_storage_path(spec.storage_path, self.node_id)
        self.spec = dataclasses.replace(spec, storage_path=path, config=spec.config or GroupConfig())
        self.root = StorageRoot(path, spec.num_partitions, create=create_root)
        self.directory = self.root.partition_dir(partition)
        self.checkpoint = LeaderEpochCheckpoint(self.directory, self.root.files, fence=self._check_writer)
        self.runtime: LeaderRuntime | None = None  # set while leading
        self._started = time.time()
        self._io = asyncio.Lock()
        self.loop = asyncio.get_running_loop()
        self._min_insync = min_insync
        # PartitionActor's request path records every answer and keeps the topics for consumer groups;
        # a follower has no runtime yet, so its telemetry gets the leader's runtime when it leads.
        self._namespace = spec.namespace
        self._topics: dict[str, int] = {}
        self._topics_for: Any = None
        self._topics_asked = 0.0
        end_offsets = self._topic_end_offsets if spec.namespace is not None else None
        self.telemetry = PartitionTelemetry(partition, None, self.spec.observability, end_offsets)
        self._open(reset_standby=True)
        self.synced_epoch: int | None = None  # the epoch whose leader this log was truncated against
        self.leader_history: tuple[tuple[int, int], ...] = ()
        self.hw = 0
        self.leader_id: str | None = None
        self._last_contact = time.monotonic()
        self._electing = False
        self._router: Any = None
        self.supervisor = LoopSupervisor(partition, self._watch_failed)
        self.supervisor.start("leader watch", self._watch_turn, LEADER_TIMEOUT_S / 10)
        self._guard_requests(spec.security, self.supervisor)

    # --- the local log and the standby shard ---------------------------------------------------------

    def _open(self, reset_standby: bool) -> None:
        plog = self.root.open_partition(self.partition, sync=self.spec.fsync)
        self.state = self.checkpoint.read().truncated(plog.end_offset)
        if reset_standby:
            self.rlog = ReplicatedLog(plog, self._min_insync)
            self.standby = GroupCoordinator(self.spec.config, SystemClock(), self.rlog)
            self.applied = 0
            self.unapplied: deque[tuple[int, list]] = deque()
            for rec in plog.read(0):
                self._queue(rec.offset, [rec.record])
        else:
            self.rlog.plog = plog

    def _queue(self, base: int, records: list) -> None:
        last = self.unapplied[-1] if self.unapplied else None
        if last is not None and last[0] + len(last[1]) == base:
            last[1].extend(records)
        else:
            self.unapplied.append((base, list(records)))

    def _apply_until(self, offset: int) -> None:
        """Replay into the standby shard the received records below `offset`."""
        while self.unapplied and self.unapplied[0][0] < offset:
            base, records = self.unapplied.popleft()
            n = min(len(records), offset - base)
            self.standby.replay_replicated(records[:n])
            if n < len(records):
                self.unapplied.appendleft((base + n, records[n:]))
            self.applied = base + n

    def _check_writer(self) -> None:
        self.rlog.plog.check_writer()  # a replica another writer replaced writes nothing, not even its epochs

    @property
    def end(self) -> int:
        """The end offset of this replica's log."""
        return self.rlog.plog.end_offset

    async def _save(self, state: EpochState) -> None:
        await self.loop.run_in_executor(None, self.checkpoint.write, state)
        self.state = state

    # --- the request path: only a leader serves ----------------------------------------------------

    def _start(self, api: str, req: Any) -> Any:
        if self.runtime is None:
            return error_response(api, req, Errors.NOT_COORDINATOR)
        return super()._start(api, req)

    async def is_loaded(self) -> bool:
        """Whether this replica leads and serves requests."""
        return self.runtime is not None and self.runtime.coord is not None and self.guard.ready

    async def update_topic_metadata(self, partitions: dict[str, int]) -> None:
        """Topic partition counts from the router; a follower keeps them for when it leads."""
        if self.runtime is None:
            self._topics.update(partitions)
        else:
            await super().update_topic_metadata(partitions)

    async def _ensure_topics(self, reqs: list[Any]) -> None:
        if self.runtime is not None:  # a follower answers NOT_COORDINATOR without the topics
            await super()._ensure_topics(reqs)

    # --- election ----------------------------------------------------------------------------------------

    async def promise(self, epoch: int) -> dict:
        """Promise `epoch` durably (refuse older leaders from now on); the answer says how up to date the log is."""
        async with self._io:
            if epoch <= self.state.promised_epoch:
                return {"ok": False, "promised": self.state.promised_epoch}
            await self._save(EpochState(epoch, self.state.history))
            if self.runtime is not None:
                log.warning("partition %d leader %s deposed by epoch %d", self.partition, self.replica_id, epoch)
                self.loop.call_later(0.05, os._exit, _DEPOSED_EXIT_CODE)
            self._last_contact = time.monotonic()
            return {"ok": True, "replica_id": self.replica_id, "last_epoch": self.state.last_epoch(self.end),
                    "end": self.end, "leading": self.runtime is not None}

    async def lead(self, epoch: int, followers: list[tuple[str, Any]]) -> bool:
        """Become the leader of `epoch` (which this replica promised last) with these followers."""
        async with self._io:
            if epoch != self.state.promised_epoch or self.runtime is not None:
                return False
            self._apply_until(self.end)
            end = self.end
            state = self.state.with_epoch_start(epoch, end)
            await self._save(state)
            self.standby.take_over(end, self.hw)
            self.rlog.lead(epoch, self.replica_id, state, self.hw, followers)
            self.standby.runtime.append([epoch_marker(epoch)])
            self.synced_epoch, self.leader_id = epoch, self.replica_id
            self.runtime = LeaderRuntime(self.partition, self.spec, self.rlog, self.standby, self.root)
            self.telemetry.runtime = self.runtime
            self.runtime.on_flushed = self.telemetry.flushed
            self.telemetry.replication = self._replication_facts
            self.telemetry.leader_elected()
            self.runtime.supervisor.start("metrics", self.telemetry.turn, self.spec.observability.interval_s)
            name = f"replica-heartbeats-{self.partition}"
            threading.Thread(target=self._heartbeats, name=name, daemon=True).start()
            log.info("partition %d: replica %s leads epoch %d from %d", self.partition, self.replica_id, epoch, end)
            return True

    def _replication_facts(self) -> ReplicationFacts:
        voters = [f for f in self.rlog.followers if f.voter]
        return ReplicationFacts(self.rlog.epoch, 1 + len(voters), 1 + len(self.rlog.in_sync()), self.rlog.lags())

    def _heartbeats(self) -> None:
        runtime = self.runtime
        assert runtime is not None
        while True:
            time.sleep(HEARTBEAT_INTERVAL_S)
            try:
                self.rlog.tick()
            except LeaderFencedError as e:
                self.loop.call_soon_threadsafe(runtime.fail, e)
                return
            except Exception:
                log.exception("partition %d: leader heartbeat failed", self.partition)

    async def _watch_turn(self) -> None:
        """Ask the router for an election when no leader has been heard from for LEADER_TIMEOUT_S (monotonic)."""
        if self.runtime is not None or self._electing or self.spec.namespace is None:
            return
        if time.monotonic() - self._last_contact < LEADER_TIMEOUT_S:
            return
        self._electing = True
        try:
            self._router = self._router or ray.get_actor(ROUTER_NAME, namespace=self.spec.namespace)
            await self._router.elect.remote(self.partition, self.state.promised_epoch)
        except Exception as e:
            log.debug("partition %d: asking for an election failed: %r", self.partition, e)
            self._router = None
        finally:
            self._electing = False
            self._last_contact = time.monotonic()

    def _watch_failed(self, error: BaseException) -> None:
        log.critical("partition %d: replica %s cannot watch its leader, exiting: %r", self.partition,
                     self.replica_id, error)
        logging.shutdown()
        os._exit(_WATCH_FAILURE_EXIT_CODE)

    # --- following ---------------------------------------------------------------------------------------

    async def _accept_epoch(self, epoch: int) -> dict | None:
        """None when a leader of `epoch` may ship to us (promising it if it is new), else the refusal."""
        if self.runtime is not None:
            if epoch <= self.rlog.epoch:
                return {"fenced": self.rlog.epoch}
            log.warning("partition %d leader %s deposed by epoch %d", self.partition, self.replica_id, epoch)
            self.loop.call_later(0.05, os._exit, _DEPOSED_EXIT_CODE)
            return {"retry": True}  # as a follower, after the restart
        if epoch < self.state.promised_epoch:
            return {"fenced": self.state.promised_epoch}
        if epoch > self.state.promised_epoch:
            await self._save(EpochState(epoch, self.state.history))
        self._last_contact = time.monotonic()
        return None

    async def follow(self, epoch: int, leader_id: str, leader_history: list, leader_end: int) -> dict:
        """The handshake of a new leader: cut our log where it diverges from the leader's (KIP-279)."""
        async with self._io:
            refusal = await self._accept_epoch(epoch)
            if refusal is not None:
                return refusal
            history = EpochState(epoch, tuple((int(e), int(s)) for e, s in leader_history))
            cut = min(self.end, history.end_of_epoch(self.state.last_epoch(self.end), leader_end))
            if cut < self.end:
                await self.loop.run_in_executor(None, self._truncate, cut)
            self.synced_epoch, self.leader_id, self.leader_history = epoch, leader_id, history.history
            await self._save(EpochState(epoch, self.state.history).truncated(cut))
            return {"end": self.end}

    def _truncate(self, cut: int) -> None:
        if cut < self.applied:
            log.critical("partition %d: cut %d below applied %d; reloading", self.partition, cut, self.applied)
            os._exit(_DEPOSED_EXIT_CODE)
        self.rlog.plog.close()
        try:
            truncate_partition_dir(self.directory, cut, self.root.files)
            self._open(reset_standby=False)
        except TruncationError:
            log.warning("partition %d: cannot cut at %d; copying the leader's log again", self.partition, cut)
            truncate_partition_dir(self.directory, 0, self.root.files)
            self._open(reset_standby=True)
        while self.unapplied and self.unapplied[-1][0] >= cut:
            self.unapplied.pop()
        if self.unapplied:
            base, records = self.unapplied[-1]
            del records[cut - base:]

    async def replicate(self, epoch: int, leader_id: str, from_offset: int, batches: list, hw: int) -> dict:
        """Append what the leader shipped (from `from_offset`, our end), durably; the answer is our new end."""
        async with self._io:
            refusal = await self._accept_epoch(epoch)
            if refusal is not None:
                return refusal
            if self.synced_epoch != epoch:
                return {"handshake": True}
            if from_offset != self.end:
                return {"end": self.end}
            if batches:
                last_end = batches[-1][0] + len(batches[-1][1])
                new_epochs = tuple(h for h in self.leader_history if h[1] < last_end)
                if new_epochs != self.state.history:
                    await self._save(EpochState(self.state.promised_epoch, new_epochs))
                await self.loop.run_in_executor(None, self._append, batches)
            self.hw = max(self.hw, min(hw, self.end))
            self._apply_until(self.hw)
            return {"end": self.end}

    def _append(self, batches: list) -> None:
        plog = self.rlog.plog
        for base, records in batches:
            plog.append_at(base, records)
            self._queue(base, records)
        plog.flush()

    # --- repair: a new replica joins as a learner --------------------------------------------------------

    async def add_learner(self, replica_id: str, handle: Any) -> bool:
        """As leader, start copying the log to a new replica (False when not leading)."""
        if self.runtime is None:
            return False
        await self.loop.run_in_executor(None, self.rlog.add_learner, replica_id, handle)
        return True

    async def promote(self, replica_id: str, replaces: str) -> bool:
        """As leader, count a caught-up learner's acks in place of the lost `replaces` (False if not yet)."""
        if self.runtime is None:
            return False
        return await self.loop.run_in_executor(None, self.rlog.promote, replica_id, replaces)

    # --- facts ---------------------------------------------------------------------------------------------

    async def role(self) -> dict:
        """This replica's node, role, epochs, log end and, when leading, its followers' lags."""
        leading = self.runtime is not None
        return {
            "replica_id": self.replica_id,
            "node_id": self.node_id,
            "pid": os.getpid(),
            "leading": leading,
            "leader_epoch": self.rlog.epoch if leading else self.synced_epoch,
            "promised_epoch": self.state.promised_epoch,
            "end": self.end,
            "high_watermark": self.rlog.hw if leading else self.hw,
            "lags": self.rlog.lags() if leading else {},
            "in_sync": self.rlog.in_sync() if leading else [],
            "learners": self.rlog.learners() if leading else [],
        }

    async def status(self) -> dict:
        """Facts for `groupcoord status`; a follower reports itself as not loaded (it serves nothing)."""
        if self.runtime is not None:
            return {**await super().status(), "replica": await self.role()}
        return {"partition": self.partition, "node_id": self.node_id, "pid": os.getpid(), "loaded": False,
                "groups": 0, "replica": await self.role()}
