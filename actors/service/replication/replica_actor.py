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

A replica whose storage fails (a write, an fsync, the directory gone) ends its process, so it is
never counted with records it does not hold. A replica restarted (its constructor re-run) without
its epoch checkpoint lost its storage: it refuses to vote or follow, and the router's repair
replaces it with a learner. Every call to another process goes through the transport (transport.py).
"""

from __future__ import annotations

import asyncio
import dataclasses
import logging
import os
import time
from collections import deque
from typing import Any

from groupcoord.protocol.config import GroupConfig
from groupcoord.protocol.shard.coordinator import GroupCoordinator
from groupcoord.storage import StorageRoot
from groupcoord.storage.epoch_checkpoint import CHECKPOINT_FILE, EpochState, LeaderEpochCheckpoint
from groupcoord.storage.errors import StorageError
from groupcoord.storage.fileops import FileOps, makedirs_durably
from groupcoord.storage.truncation import TruncationError, truncate_partition_dir

from ..partition_actor import serving_status
from ..partition_runtime import PartitionRuntime
from ..process_exit import EXIT_DEPOSED, EXIT_FAILURE
from ..request_path import GroupApi, RequestPath, RouterLink
from ..spec import ServiceSpec
from ..supervisor import LoopSupervisor
from ..telemetry import PartitionTelemetry, ReplicationFacts
from .decisions import divergence_point
from .messages import Follow, FollowerAnswer, PromiseAnswer, Replicate
from .replicated_log import LEASE_S, LeaderFencedError, ReplicatedLog, epoch_marker
from .transport import RayTransport, Transport

log = logging.getLogger(__name__)

HEARTBEAT_INTERVAL_S = 0.1  # how often a leader contacts its followers when idle
LEADER_TIMEOUT_S = 0.6  # a follower that hears nothing from a leader for this long (6 heartbeats) asks for an election
FOLLOWER_COMPACTION_INTERVAL_S = 60.0
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
        self, partition: int, spec: ServiceSpec, rlog: ReplicatedLog, coord: GroupCoordinator, root: StorageRoot,
        transport: Transport, compaction_interval_s: float,
    ) -> None:
        self._adopted = (rlog, coord)
        self.transport = transport
        super().__init__(partition, spec)
        self.clock = coord.clock  # the standby's coordinator time goes on
        self.compaction_interval_s = compaction_interval_s
        self.root = root

    def fail(self, error: Exception) -> None:
        """Storage is broken (or this leader was fenced): end the process; Ray restarts it as a follower."""
        log.critical("partition %d: leader failing, exiting for a restart: %r", self.partition, error)
        self.transport.exit(EXIT_FAILURE)

    def _open_and_replay(self) -> tuple[Any, GroupCoordinator, int]:
        rlog, coord = self._adopted
        self.load_cpu_ms = 0.0
        return rlog, coord, 0


class ReplicaActor(GroupApi):
    """A replica of one offsets partition; it serves requests only while it leads (else NOT_COORDINATOR)."""

    def __init__(
        self,
        partition: int,
        spec: ServiceSpec,
        replica_id: str,
        min_insync: int,
        create_root: bool = False,
        transport: Transport | None = None,
        files: FileOps | None = None,
        compaction_interval_s: float = FOLLOWER_COMPACTION_INTERVAL_S,
    ) -> None:
        self.partition = partition
        self.num_partitions = spec.num_partitions
        self.replica_id = replica_id
        self.transport = transport if transport is not None else RayTransport(spec.namespace)
        self.node_id = self.transport.node_id()
        self._node = (self.node_id, self.transport.node_ip())
        path = node_storage_path(spec.storage_path, self.node_id)
        self.spec = dataclasses.replace(spec, storage_path=path, config=spec.config or GroupConfig())
        self.compaction_interval_s = compaction_interval_s
        restarted = self.transport.restarted()
        self.root = StorageRoot(path, spec.num_partitions, create=create_root, files=files)
        self.directory = self.root.partition_dir(partition)
        # A restarted replica without its checkpoint lost its storage (a wiped disk): what it promised and
        # held is gone, so it must not vote or count until repair replaces it (it writes no checkpoint). So did
        # one reopened from the placement (not created): a lost incarnation before it may have made the
        # directory again, empty (a router restarted mid-repair reopened such a replica, and it voted: seed 600).
        self.lost = (restarted or not create_root) and not (self.directory / CHECKPOINT_FILE).exists()
        # A new replica (a repair's learner) has held nothing yet: a directory of its node's root that went missing
        # (wiped before it started) is made again, empty, instead of failing its constructor (Ray never restarts an
        # actor whose constructor raised: its repair would wait for it forever).
        self._new = create_root and not restarted
        if self.lost:
            log.error("partition %d: replica %s restarted without its storage; it waits to be replaced",
                      partition, replica_id)
        self.checkpoint = LeaderEpochCheckpoint(self.directory, self.root.files, fence=self._check_writer)
        self.runtime: LeaderRuntime | None = None  # set while leading
        self._started = time.time()
        self._io = asyncio.Lock()
        self.loop = asyncio.get_running_loop()
        self._min_insync = min_insync
        # A follower has no runtime yet: its telemetry gets the leader's runtime when it leads.
        end_offsets = RouterLink(spec.namespace).topic_metadata if spec.namespace is not None else None
        self.telemetry = PartitionTelemetry(partition, None, self.spec.observability, end_offsets)
        # A storage error here ends the process like any other (Ray restarts it, and it comes back lost if its
        # storage is gone): raised from the constructor, it would end the actor for good (Ray never restarts an
        # actor whose constructor raised), and repair would wait for it forever (a directory wiped as it opened).
        self._storage_call(self._open, True)
        if not self.lost and not self.checkpoint.path.exists():
            self._storage_call(self.checkpoint.write, self.state)  # from now on, a restart without it means lost
        self.synced_epoch: int | None = None  # the epoch whose leader this log was truncated against
        self.leader_history: tuple[tuple[int, int], ...] = ()
        self.hw = 0
        self.leader_id: str | None = None
        self._last_contact = self.transport.monotonic()
        # When this replica last answered a leader: it grants that leader's lease, so it promises no newer
        # epoch until LEASE_S after. A restart may have forgotten an answer just given: it counts as one.
        self._granted_at = self.transport.monotonic()
        self._electing = False
        self._router: Any = None
        self.supervisor = LoopSupervisor(partition, self._watch_failed)
        self.supervisor.start("leader watch", self._watch_turn, LEADER_TIMEOUT_S / 10)
        self.supervisor.start("follower compaction", self._compaction_turn, compaction_interval_s)
        # The partition actor's request path; it serves only while this replica leads, and keeps the topics
        # (asked from the router once per leadership) for the consumer groups.
        self.requests = RequestPath(partition, spec.num_partitions, lambda: self.runtime, self.telemetry,
                                    spec.security, self.supervisor, spec.namespace, self._describe_topics,
                                    serves=self._serves, topic_refresh_s=None)

    # --- the local log and the standby shard ---------------------------------------------------------

    def _open(self, reset_standby: bool) -> None:
        if self.lost or self._new:
            makedirs_durably(self.root.files, self.directory)  # an empty log, which never votes or counts yet
        plog = self.root.open_partition(self.partition, sync=self.spec.fsync, **self.spec.log.options())
        self.state = self.checkpoint.read().truncated(plog.end_offset)
        if reset_standby:
            self.rlog = ReplicatedLog(plog, self._min_insync, self.transport)
            self.standby = GroupCoordinator(self.spec.config, self.transport.clock(), self.rlog)
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

    def _storage_call(self, fn: Any, *args: Any) -> Any:
        """Run a storage operation; a failure (disk full, I/O error, directory gone) ends the process."""
        try:
            return fn(*args)
        except (OSError, StorageError) as e:
            self._storage_failed(e)

    def _storage_failed(self, error: BaseException) -> None:
        log.critical("partition %d: replica %s storage failed, exiting: %r", self.partition, self.replica_id, error)
        self.transport.exit(EXIT_FAILURE)

    async def _run_storage(self, fn: Any, *args: Any) -> Any:
        try:
            return await self.loop.run_in_executor(None, fn, *args)
        except (OSError, StorageError) as e:
            self._storage_failed(e)

    async def _save(self, state: EpochState) -> None:
        await self._run_storage(self.checkpoint.write, state)
        self.state = state

    @property
    def durable_end(self) -> int:
        """The end of what this replica's log holds durably: the only end it may report to a leader."""
        return self.rlog.plog.durable_offset

    # --- the request path: only a leader serves ----------------------------------------------------

    def _serves(self) -> bool:
        return self.runtime is not None and self.rlog.fenced_by is None and self.rlog.lease_holds()

    async def is_loaded(self) -> bool:
        """Whether this replica leads and serves requests."""
        return self.runtime is not None and self.runtime.coord is not None and self.requests.guard.ready

    async def _describe_topics(self) -> dict:
        return await self.transport.call(self.transport.router(), "describe_topics")

    # --- election ----------------------------------------------------------------------------------------

    async def promise(self, epoch: int) -> PromiseAnswer:
        """Promise `epoch` durably (refuse older leaders from now on); the answer says how up to date the log is."""
        while (wait := self._granted_at + LEASE_S - self.transport.monotonic()) > 0 and self.runtime is None:
            await asyncio.sleep(wait)  # the leader we answered may still serve on its lease until then
        async with self._io:
            if self.lost:
                return PromiseAnswer(False, self.state.promised_epoch, self.replica_id, lost=True)
            if epoch <= self.state.promised_epoch:
                return PromiseAnswer(False, self.state.promised_epoch, self.replica_id)
            if self.runtime is None and self._granted_at + LEASE_S > self.transport.monotonic():
                return PromiseAnswer(False, self.state.promised_epoch, self.replica_id)  # answered a leader meanwhile
            end = self.durable_end
            if self.runtime is not None:
                # A leader answering for a newer epoch must acknowledge nothing after this answer: the election
                # counts its log as of now (it went on acknowledging with another follower for the 50 ms before
                # its exit, and a new leader without those writes lost them: seed 101571).
                end = await self.loop.run_in_executor(None, self.rlog.fence, epoch)
            await self._save(EpochState(epoch, self.state.history))
            if self.runtime is not None:
                log.warning("partition %d leader %s deposed by epoch %d", self.partition, self.replica_id, epoch)
                self.loop.call_later(0.05, self.transport.exit, EXIT_DEPOSED)
            self._last_contact = self.transport.monotonic()
            leading = self.runtime is not None
            return PromiseAnswer(True, epoch, self.replica_id, self.state.last_epoch(end), end, leading)

    async def prevote(self) -> bool:
        """KIP-996's pre-vote, asked before an election that would depose the leader: True once this replica has
        heard from no leader for LEADER_TIMEOUT_S, False as soon as it hears from one (or, leading, while its lease
        holds). Nothing is promised or saved: a healthy leader that a slow follower or router missed stays."""
        if self.runtime is not None:
            return self.rlog.fenced_by is not None or not self.rlog.lease_holds()
        heard = self._granted_at
        deadline = heard + LEADER_TIMEOUT_S
        while self._granted_at == heard:
            now = self.transport.monotonic()
            if now >= deadline:
                return True
            await asyncio.sleep(min(max(deadline - now, 0.001), LEADER_TIMEOUT_S / 10))
        return False

    async def lead(self, epoch: int, followers: list[tuple[str, Any]]) -> bool:
        """Become the leader of `epoch` (which this replica promised last) with these followers."""
        async with self._io:
            if epoch != self.state.promised_epoch or self.runtime is not None or self.lost:
                return False
            self._apply_until(self.end)
            end = self.end
            state = self.state.with_epoch_start(epoch, end)
            await self._save(state)
            self.standby.take_over(end, self.hw)
            self.rlog.lead(epoch, self.replica_id, state, self.hw, followers)
            self.standby.runtime.append([epoch_marker(epoch)])
            self.synced_epoch, self.leader_id = epoch, self.replica_id
            self.runtime = LeaderRuntime(self.partition, self.spec, self.rlog, self.standby, self.root,
                                         self.transport, self.compaction_interval_s)
            self.telemetry.runtime = self.runtime
            self.runtime.on_flushed = self.telemetry.flushed
            self.telemetry.replication = self._replication_facts
            self.telemetry.leader_elected()
            self.runtime.supervisor.start("metrics", self.telemetry.turn, self.spec.observability.interval_s)
            self.runtime.supervisor.start("heartbeats", self._heartbeat_turn, HEARTBEAT_INTERVAL_S)
            log.info("partition %d: replica %s leads epoch %d from %d", self.partition, self.replica_id, epoch, end)
            return True

    def _replication_facts(self) -> ReplicationFacts:
        voters = [f for f in self.rlog.followers if f.voter]
        return ReplicationFacts(self.rlog.epoch, 1 + len(voters), 1 + len(self.rlog.in_sync()), self.rlog.lags())

    async def _heartbeat_turn(self) -> None:
        """The leader's heartbeat: ship, collect answers; a fenced leader fails (a newer epoch exists)."""
        runtime = self.runtime
        assert runtime is not None
        try:
            await self.loop.run_in_executor(None, self.rlog.tick)
        except LeaderFencedError as e:
            runtime.fail(e)

    async def _watch_turn(self) -> None:
        """Ask the router for an election when no leader has been heard from for LEADER_TIMEOUT_S (monotonic)."""
        if self.runtime is not None or self._electing or self.spec.namespace is None or self.lost:
            return
        if self.transport.monotonic() - self._last_contact < LEADER_TIMEOUT_S:
            return
        self._electing = True
        try:
            self._router = self._router or self.transport.router()
            await self.transport.call(self._router, "elect", self.partition, self.state.promised_epoch)
        except Exception as e:
            log.debug("partition %d: asking for an election failed: %r", self.partition, e)
            self._router = None
        finally:
            self._electing = False
            self._last_contact = self.transport.monotonic()

    async def _compaction_turn(self) -> None:
        """A follower compacts its own log too (below its high watermark), so its disk does not fill first."""
        if self.runtime is not None or self.lost:
            return  # a leader's runtime compacts (capped at its watermark)
        plog = self.rlog.plog
        plog.compaction_limit = self.hw
        await self._run_storage(_compact_now, plog)

    def _watch_failed(self, error: BaseException) -> None:
        log.critical("partition %d: replica %s cannot watch its leader, exiting: %r", self.partition,
                     self.replica_id, error)
        self.transport.exit(EXIT_FAILURE)

    # --- following ---------------------------------------------------------------------------------------

    async def _accept_epoch(self, epoch: int) -> FollowerAnswer | None:
        """None when a leader of `epoch` may ship to us (promising it if it is new), else the refusal."""
        if self.lost:
            return FollowerAnswer(retry=True, lost=True)  # nothing of ours may count: repair replaces this replica
        if self.runtime is not None:
            if epoch <= self.rlog.epoch:
                return FollowerAnswer(fenced=self.rlog.epoch)
            log.warning("partition %d leader %s deposed by epoch %d", self.partition, self.replica_id, epoch)
            self.loop.call_later(0.05, self.transport.exit, EXIT_DEPOSED)
            return FollowerAnswer(retry=True)  # as a follower, after the restart
        if epoch < self.state.promised_epoch:
            return FollowerAnswer(fenced=self.state.promised_epoch)
        if epoch > self.state.promised_epoch:
            await self._save(EpochState(epoch, self.state.history))
        self._last_contact = self._granted_at = self.transport.monotonic()
        return None

    async def follow(self, msg: Follow) -> FollowerAnswer:
        """The handshake of a new leader: cut our log where it diverges from the leader's (KIP-279)."""
        async with self._io:
            refusal = await self._accept_epoch(msg.epoch)
            if refusal is not None:
                return refusal
            history = EpochState(msg.epoch, tuple((int(e), int(s)) for e, s in msg.leader_history))
            cut = divergence_point(history, msg.leader_end, self.state, self.end)
            if cut < self.end:
                await self._run_storage(self._truncate, cut)
            self.synced_epoch, self.leader_id, self.leader_history = msg.epoch, msg.leader_id, history.history
            await self._save(EpochState(msg.epoch, self.state.history).truncated(cut))
            return FollowerAnswer(end=self.durable_end)

    def _truncate(self, cut: int) -> None:
        if cut < self.applied:
            log.critical("partition %d: cut %d below applied %d; reloading", self.partition, cut, self.applied)
            self.transport.exit(EXIT_DEPOSED)
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

    async def replicate(self, msg: Replicate) -> FollowerAnswer:
        """Append what the leader shipped (from `from_offset`, our end), durably; the answer is our durable end."""
        async with self._io:
            refusal = await self._accept_epoch(msg.epoch)
            if refusal is not None:
                return refusal
            if self.synced_epoch != msg.epoch:
                return FollowerAnswer(handshake=True)
            if self.rlog.plog.failed:
                self._storage_failed(RuntimeError("the log failed earlier"))
            if msg.from_offset != self.end:
                return FollowerAnswer(end=self.durable_end)
            batches = msg.batches
            if batches:
                last_end = batches[-1][0] + len(batches[-1][1])
                new_epochs = tuple(h for h in self.leader_history if h[1] < last_end)
                if new_epochs != self.state.history:
                    await self._save(EpochState(self.state.promised_epoch, new_epochs))
                await self._run_storage(self._append, batches)
            self.hw = max(self.hw, min(msg.hw, self.durable_end))
            self._apply_until(self.hw)
            return FollowerAnswer(end=self.durable_end)

    def _append(self, batches: list) -> None:
        plog = self.rlog.plog
        for base, records in batches:
            plog.append_at(base, records)
            self._queue(base, records)
        plog.flush()

    # --- repair: a new replica joins as a learner --------------------------------------------------------

    async def add_learner(self, replica_id: str, handle: Any) -> bool:
        """As leader, start copying the log to a new replica (False when not leading)."""
        if handle is None:  # shipping to it would fail this leader: refuse the request, not the process
            raise ValueError(f"learner {replica_id} has no actor handle; create its actor before adding it")
        if self.runtime is None:
            return False
        await self.loop.run_in_executor(None, self.rlog.add_learner, replica_id, handle)
        return True

    async def drop_learner(self, replica_id: str) -> bool:
        """As leader, stop copying the log to a learner that repair gave up (False when not leading)."""
        if self.runtime is None:
            return False
        await self.loop.run_in_executor(None, self.rlog.drop_learner, replica_id)
        return True

    async def promote(self, replica_id: str, replaces: str) -> bool:
        """As leader, count a learner's acks in place of the lost `replaces` (False if not yet; see rlog.promote)."""
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
            "lost": self.lost,
            "leading": leading,
            "lease": self.rlog.lease_holds() if leading else False,
            "leader_epoch": self.rlog.epoch if leading else self.synced_epoch,
            "promised_epoch": self.state.promised_epoch,
            "end": self.end,
            "high_watermark": self.rlog.hw if leading else self.hw,
            "lags": self.rlog.lags() if leading else {},
            "in_sync": self.rlog.in_sync() if leading else [],
            "learners": self.rlog.learners() if leading else [],
            "lost_followers": self.rlog.lost_followers() if leading else [],
        }

    async def status(self) -> dict:
        """Facts for `groupcoord status`; a follower reports itself as not loaded (it serves nothing)."""
        if self.runtime is not None:
            status = serving_status(self.partition, self._node, self._started, self.runtime, self.requests)
            return {**status, "replica": await self.role()}
        return {"partition": self.partition, "node_id": self.node_id, "pid": os.getpid(), "loaded": False,
                "groups": 0, "replica": await self.role()}


def _compact_now(plog: Any) -> None:
    """Compact a follower's log if due, and wait for it (its failure is raised here)."""
    if plog.maybe_compact():
        plog.join_compaction()
        plog.maybe_compact()
