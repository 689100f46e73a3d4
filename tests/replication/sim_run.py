"""One simulated schedule of a replicated offsets partition under overlapping faults, checked (see sim_world).

`python tests/replication/sim_run.py --seed N` replays schedule N and prints its trace;
`run_schedule(seed)` is what the tests and `python -m benchmarks sim` call.
"""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import errno
import hashlib
import logging
import os
import shutil
import sys
import tempfile
import threading
import time
import warnings
from dataclasses import dataclass, field
from pathlib import Path
from types import SimpleNamespace
from typing import Any, Callable, Iterator

sys.path.insert(0, str(Path(__file__).resolve().parent))

from sim_checker import Checker
from sim_loop import simulated_running_loops
from sim_world import ActorDiedError, SimRef, World

from groupcoord.actors.service import overload, partition_runtime
from groupcoord.actors.service.replication.election import ReplicationManager
from groupcoord.actors.service.replication.repair import REPAIR_INTERVAL_S, repair_turn
from groupcoord.actors.service.replication.replica_actor import ReplicaActor
from groupcoord.actors.service.spec import LogSettings, Observability, ServiceSpec
from groupcoord.actors.service.supervisor import LoopSupervisor
from groupcoord.protocol import Errors, GroupConfig, OffsetAndMetadata, TopicPartition
from groupcoord.protocol.messages import OffsetCommitRequest, OffsetFetchRequest
from groupcoord.storage import partition_log

TP = TopicPartition("t", 0)
KEYS = ("g0", "g1", "g2", "g3")
NODES = 4  # n0 hosts the router (Ray's head node: never lost or wiped); one node to spare for repair
FAULT_PHASE_S = 3.0
LIVENESS_BOUND_S = 30.0
CHECK_LOGS_EVERY_S = 0.5
REPLAY = "python tests/replication/sim_run.py --seed {seed}"

partition_runtime.TIMER_TURN_S = 1e9  # fire due timers by count, not by the machine's clock: a replayable run


class _InlineThread:
    """A log's background compaction, run when started: every caller in the service joins the compaction it starts
    at once (partition_runtime, replica_actor), so running it inline is the same schedule, in the simulator's one
    thread, without the cost of starting a thread per compaction."""

    def __init__(self, target: Callable[[], None], name: str = "") -> None:
        self.target, self.name, self.daemon = target, name, True

    def start(self) -> None:
        self.target()

    def is_alive(self) -> bool:
        return False

    def join(self, timeout: float | None = None) -> None:
        pass


# The leader's loop-lag probe wakes every PROBE_INTERVAL_S (10 ms in a service: a third of a schedule's steps). In
# the simulation a loop runs late only while its process is paused, and the probe sees that lateness (the pause)
# at any interval, and `behind_ms` sees it before the probe wakes: a tenth of the wake-ups measure the same lag.
SIM_PROBE_INTERVAL_S = 0.1


@contextlib.contextmanager
def simulated_process(now: Callable[[], float]) -> Iterator[None]:
    """For one schedule: compactions run inline (see _InlineThread) and the loop-lag probe measures simulated time
    (the machine's clock would make a run depend on how busy the machine is); restored after, for the rest of the
    process."""
    previous = partition_log.threading, overload.time, overload.PROBE_INTERVAL_S
    partition_log.threading = SimpleNamespace(Lock=threading.Lock, Thread=_InlineThread)  # type: ignore[assignment]
    overload.time = SimpleNamespace(monotonic=now)  # type: ignore[assignment]
    overload.PROBE_INTERVAL_S = SIM_PROBE_INTERVAL_S
    try:
        yield
    finally:
        partition_log.threading, overload.time, overload.PROBE_INTERVAL_S = previous


def sim_spec(base: Path) -> ServiceSpec:
    """A one-partition service, replication factor 3, small segments so that compaction runs."""
    return ServiceSpec(
        namespace="sim",
        storage_path=str(base / "{node_id}"),
        num_partitions=1,
        fsync="always",
        config=GroupConfig(),
        observability=Observability(metrics=False, interval_s=1000.0, log_level="CRITICAL"),
        replication_factor=3,
        min_insync_replicas=2,
        log=LogSettings(segment_bytes=600, min_compaction_bytes=300, min_dirty_ratio=0.2),
    )


class SimRouter:
    """The router's replication part (the real ReplicationManager and repair loop) in a simulated process."""

    def __init__(self, spec: ServiceSpec, root: Path, transport: Any, files: Any) -> None:
        self.partitions: list[Any] = []
        self.replication = ReplicationManager(spec, self.partitions, str(root), transport, files)
        self.supervisor = LoopSupervisor("router", lambda e: transport.exit(70))
        replication = self.replication
        self.supervisor.start("replica repair", lambda: repair_turn(replication), REPAIR_INTERVAL_S)

    async def elect(self, partition: int, known_epoch: int) -> int:
        await self.replication.ready
        return await self.replication.elect(partition, known_epoch)

    async def leader(self, partition: int) -> Any:
        return self.partitions[partition] if self.partitions else None

    async def describe_topics(self) -> dict:
        return {}


class Clients:
    """Clients that commit and read the offsets of a few groups throughout, recording the history."""

    def __init__(self, world: World, checker: Checker, transport: Any, count: int) -> None:
        self.world, self.checker, self.transport = world, checker, transport
        self.stopped = False
        self.count = count
        loop = asyncio.get_running_loop()
        self.tasks = [loop.create_task(self._client(i)) for i in range(count)]

    async def _client(self, i: int) -> None:
        world, t = self.world, self.transport
        mine = [k for j, k in enumerate(KEYS) if j % self.count == i]  # the keys this client writes
        leader: Any = None
        while not self.stopped:
            await asyncio.sleep(world.rng.uniform(0.005, 0.04))
            if leader is None:
                try:
                    leader = await t.call_within(0.5, t.router(), "leader", 0)
                except Exception:
                    leader = None
                if leader is None:
                    await asyncio.sleep(0.05)
                    continue
            write = world.rng.random() < 0.6
            key = world.rng.choice(mine if write else KEYS)
            started = world.now
            try:
                if write:
                    world.value += 1
                    value = world.value
                    self.checker.commit_sent(value)
                    req = OffsetCommitRequest(key, {TP: OffsetAndMetadata(value)})
                    resp = await t.call_within(2.0, leader, "commit_offsets", req)
                    error = resp.errors.get(TP)
                    if error == Errors.NONE:
                        self.checker.commit_acked(key, value, world.now)
                        continue
                    self.checker.commit_failed(value)
                else:
                    resp = await t.call_within(2.0, leader, "fetch_offsets", OffsetFetchRequest(key, [TP]))
                    error = resp.error
                    if error == Errors.NONE:
                        got = resp.offsets[TP]
                        self.checker.read_returned(key, got.offset, started, world.now, leader.name)
                        continue
            except (TimeoutError, ActorDiedError, asyncio.CancelledError):
                if world.rng.random() < 0.5:
                    continue  # as a Kafka client, retry the same coordinator until it says it is not (stale metadata)
            leader = None  # NOT_COORDINATOR, COORDINATOR_LOAD_IN_PROGRESS, an error or a timeout: ask again


@dataclass
class Result:
    """What one schedule did and found."""

    seed: int
    violations: list[str]
    trace: list[str]
    acks: int = 0
    reads: int = 0
    faults: int = 0
    sim_seconds: float = 0.0
    wall_seconds: float = 0.0
    cpu_seconds: float = 0.0
    stats: dict = field(default_factory=dict)

    @property
    def ok(self) -> bool:
        return not self.violations

    def report(self) -> str:
        head = f"seed {self.seed}: {len(self.violations)} violation(s); replay: {REPLAY.format(seed=self.seed)}"
        return "\n".join([head, *self.violations, "trace (last 60 events):", *self.trace[-60:]])


class Schedule:
    """One run: the world, the service in it, the clients, the faults and the checks."""

    def __init__(self, seed: int, base: Path, verbose: bool = False, worlds: list[World] | None = None) -> None:
        self.seed = seed
        self.trace: list[str] = []
        self.verbose = verbose
        self.world = world = World(seed, base, NODES, self._note)
        if worlds is not None:
            worlds.append(world)  # before any process starts: what simulated_process's clock reads
        world.value = 0  # type: ignore[attr-defined]
        self.checker = Checker()
        self.spec = spec = sim_spec(base)
        self.destructive = 0
        self.faults = 0
        self._last_log_check = 0.0

        def replica(name: str, node: str, args: tuple, transport: Any) -> ReplicaActor:
            return ReplicaActor(*args, transport=transport, files=world.nodes[node].files, compaction_interval_s=0.3)

        world.replica_factory = replica
        world.on_reply = self._on_reply
        world.after_step = self._after_step
        world.on_duplicate = self._on_duplicate
        head = world.nodes["n0"]
        world.add_process("router", "n0", lambda t: SimRouter(spec, head.files.root, t, head.files))
        world.nodes["client"] = type(head)("client", head.files, True, False)  # the clients' machine: no disk used
        world.add_process("client", "client", lambda t: Clients(world, self.checker, t, 3), restartable=False)

    def _note(self, line: str) -> None:
        self.trace.append(line)
        if self.verbose:
            print(line)

    def _on_reply(self, ref: SimRef, proc: Any) -> None:
        if ref.method == "commit_offsets" and proc.obj is not None and proc.obj.runtime is not None:
            self.checker.leader_acked(proc.obj.rlog.epoch, proc.obj.replica_id, self.world.now)

    def _on_duplicate(self, method: str, args: tuple) -> None:
        if method == "commit_offsets":
            for committed in args[0].offsets.values():
                self.checker.commit_duplicated(committed.offset)

    def _after_step(self, proc: Any) -> None:
        obj = proc.obj
        if isinstance(obj, ReplicaActor):  # the highest watermark each replica ever knew, across its restarts
            hw = obj.rlog.hw if obj.runtime is not None else obj.hw
            if hw > self.checker.replica_hw.get(obj.replica_id, 0):
                self.checker.replica_hw[obj.replica_id] = hw

    # --- the replicas -------------------------------------------------------------------------------

    def replicas(self) -> list[Any]:
        return [p for name, p in self.world.procs.items() if "replica" in name]

    def leader(self) -> Any:
        """The one live replica process that leads (an assertion fails when there is none, or more)."""
        [leader] = [p for p in self.replicas() if p.alive and p.obj is not None and p.obj.runtime is not None]
        return leader

    def check_logs(self) -> None:
        for p in self.replicas():
            obj = p.obj
            if not p.alive or obj is None or obj.lost or getattr(obj, "rlog", None) is None or obj.rlog.plog.failed:
                continue
            hw = obj.rlog.hw if obj.runtime is not None else obj.hw
            try:
                records = [(r.offset, r.record) for r in obj.rlog.plog.read(0)]
            except Exception as e:  # its disk is gone under it: it will fail and restart
                self._note(f"{self.world.now:9.4f} cannot read {p.name}'s log: {e!r}")
                continue
            self.checker.check_log(obj.replica_id, records, hw, obj.end, self.world.now)

    # --- faults -------------------------------------------------------------------------------------

    def fault(self) -> None:
        w = self.world
        rng = w.rng
        self.faults += 1
        live_nodes = [n for n in w.nodes if n != "client" and w.nodes[n].alive]
        replicas = [p for p in self.replicas() if w.nodes[p.node].alive and not p.killed]
        kind = rng.choices(
            ["crash", "power", "ioerror", "full", "wipe", "pause", "partition", "router", "node", "leader"],
            [4, 2, 2, 1, 1, 3, 4, 1, 1, 3],
        )[0]
        endpoints = [p.name for p in replicas] + ["router", "client"]
        leaders = [p for p in replicas if p.alive and p.obj is not None and p.obj.runtime is not None]
        if kind == "leader" and leaders:
            # The leader, most of all, is what faults must hit: crashed, paused, or cut off from one follower.
            leader = leaders[0]
            how = rng.choice(["crash", "pause", "cut", "isolate"])
            if how == "crash":
                self._note(f"{w.now:9.4f} FAULT crash the leader {leader.name}")
                w.crash(leader.name, restart=True)
            elif how == "pause":
                w.pause(leader.name, rng.uniform(0.3, 2.5))
            elif how == "isolate":
                # An asymmetric partition: the leader is cut from every other replica and from the router, while
                # the clients still reach it (what a lease must cover: a deposed leader that clients still ask).
                seconds = rng.uniform(0.3, 2.5)
                others = [p.name for p in replicas if p is not leader] + ["router"]
                links = {frozenset((leader.name, other)) for other in others}
                self._note(f"{w.now:9.4f} FAULT isolate the leader {leader.name} from {', '.join(others)} "
                           f"for {seconds:.2f}s (the clients still reach it)")
                w.partitions |= links
                w.at(seconds, lambda: w.partitions.difference_update(links))
            else:
                other = rng.choice([p.name for p in replicas if p is not leader] + ["router", "client"])
                seconds = rng.uniform(0.3, 2.5)
                link = frozenset((leader.name, other))
                self._note(f"{w.now:9.4f} FAULT partition the leader {leader.name} | {other} for {seconds:.2f}s")
                w.partitions.add(link)
                w.at(seconds, lambda: w.partitions.discard(link))
            return
        if kind == "crash" and replicas:
            p = rng.choice(replicas)
            self._note(f"{w.now:9.4f} FAULT crash {p.name}")
            w.crash(p.name, restart=True)
        elif kind == "power":
            node = rng.choice(live_nodes)
            self._note(f"{w.now:9.4f} FAULT power loss on {node}")
            w.power_loss(node)
        elif kind == "ioerror":
            node = rng.choice(live_nodes)
            op = rng.choice(["write", "fsync", "create", "rename", "fsync_directory", "truncate", "unlink"])
            code = rng.choice([errno.EIO, errno.ENOSPC])
            self._note(f"{w.now:9.4f} FAULT {errno.errorcode[code]} on the next {op} on {node}")
            w.nodes[node].files.fail_next[op] = code
        elif kind == "full":
            node = rng.choice(live_nodes)
            seconds = rng.uniform(0.1, 1.0)
            self._note(f"{w.now:9.4f} FAULT disk of {node} full for {seconds:.2f}s")
            w.nodes[node].files.full = True
            w.at(seconds, lambda: setattr(w.nodes[node].files, "full", False))
        elif kind == "wipe" and self.destructive == 0:
            node = rng.choice([n for n in live_nodes if n != "n0"])
            self.destructive += 1
            self._note(f"{w.now:9.4f} FAULT storage of {node} deleted")
            w.nodes[node].files.wipe()
        elif kind == "pause" and endpoints:
            name = rng.choice([e for e in endpoints if e != "client"])
            w.pause(name, rng.uniform(0.05, 2.5))
        elif kind == "partition" and len(endpoints) > 1:
            a, b = rng.sample(endpoints, 2)
            seconds = rng.uniform(0.1, 2.5)
            link = frozenset((a, b))
            self._note(f"{w.now:9.4f} FAULT partition {a} | {b} for {seconds:.2f}s")
            w.partitions.add(link)
            w.at(seconds, lambda: w.partitions.discard(link))
        elif kind == "router":
            self._note(f"{w.now:9.4f} FAULT router restart")
            w.crash("router", restart=True)
        elif kind == "node" and self.destructive == 0 and len(live_nodes) == NODES:
            node = rng.choice([n for n in live_nodes if n != "n0"])
            self.destructive += 1
            self._note(f"{w.now:9.4f} FAULT node {node} lost with its disk")
            w.lose_node(node)

    def heal(self) -> None:
        w = self.world
        self._note(f"{w.now:9.4f} HEAL: links healed, processes resumed, disks writable")
        w.partitions.clear()
        for name, p in w.procs.items():
            if p.paused:
                w.resume(name)
        for node in w.nodes.values():
            node.files.full = False
            node.files.fail_next.clear()

    # --- the run --------------------------------------------------------------------------------------

    def run(self, fault_phase_s: float = FAULT_PHASE_S) -> Result:
        w, checker = self.world, self.checker
        started, cpu = time.perf_counter(), time.process_time()
        next_fault = w.rng.expovariate(1 / 0.25)
        t = 0.0
        while t < fault_phase_s:
            t = min(t + 0.05, fault_phase_s)
            while next_fault <= t:
                w.run_until(next_fault)
                self.fault()
                next_fault += w.rng.expovariate(1 / 0.25)
            w.run_until(t)
            if w.now - self._last_log_check >= CHECK_LOGS_EVERY_S:
                self._last_log_check = w.now
                self.check_logs()
            if checker.violations:
                break
        if not checker.violations:
            self.heal()
            healed = w.now
            deadline = healed + LIVENESS_BOUND_S
            w.run_until(deadline, stop=lambda: checker.last_ack_at > healed + 0.5 or bool(checker.violations))
            if checker.last_ack_at <= healed + 0.5 and not checker.violations:
                checker.fail(w.now, f"liveness: no commit acknowledged within {LIVENESS_BOUND_S:.0f} s after the "
                                    f"faults stopped")
            self.final_reads()
            self.check_logs()
        # What the replicas committed, timestamps included: two runs of a seed must commit the same bytes.
        committed = hashlib.sha256(repr(sorted(checker.committed.items())).encode()).hexdigest()[:16]
        return Result(self.seed, checker.violations, self.trace, checker.acks, checker.reads, self.faults, w.now,
                      time.perf_counter() - started, time.process_time() - cpu,
                      {"committed": committed, "committed_records": len(checker.committed)})

    def final_reads(self) -> None:
        """Every key is read back from the serving leader: at least its last acknowledged value."""
        w = self.world
        client = w.procs["client"]
        client.obj.stopped = True
        results: dict[str, Any] = {}

        async def read_all() -> None:
            t = client.obj.transport
            for key in KEYS:
                for _ in range(40):
                    started = w.now
                    try:
                        leader = await t.call_within(0.5, t.router(), "leader", 0)
                        if leader is not None:
                            resp = await t.call_within(2.0, leader, "fetch_offsets", OffsetFetchRequest(key, [TP]))
                            if resp.error == Errors.NONE:
                                self.checker.read_returned(key, resp.offsets[TP].offset, started, w.now, leader.name)
                                results[key] = resp.offsets[TP].offset
                                break
                    except Exception:
                        pass
                    await asyncio.sleep(0.25)

        assert client.loop is not None
        task = client.loop.create_task(read_all())
        w.run_until(w.now + 60, stop=task.done)
        missing = [k for k in KEYS if k not in results]
        if missing:
            self.checker.fail(w.now, f"liveness: no leader answered the final reads of {missing}")


@contextlib.contextmanager
def open_schedule(seed: int, base: Path, verbose: bool = False) -> Iterator[Schedule]:
    """Schedule `seed`'s world, service and clients in `base`, to run by `Schedule.run` or by a test's own script."""
    worlds: list[World] = []
    with warnings.catch_warnings(), simulated_process(lambda: worlds[0].now), simulated_running_loops():
        warnings.simplefilter("ignore", RuntimeWarning)  # coroutines of a crashed process never awaited
        schedule = Schedule(seed, base, verbose, worlds)
        try:
            yield schedule
        finally:
            for node in {id(n.files): n.files for n in schedule.world.nodes.values()}.values():
                node.close_all()


def run_schedule(seed: int, verbose: bool = False, fault_phase_s: float = FAULT_PHASE_S) -> Result:
    """Run schedule `seed` in a fresh directory (removed after) and return what it found."""
    shm = Path("/dev/shm")
    parent = shm if shm.is_dir() and os.access(shm, os.W_OK) else Path(tempfile.gettempdir())
    base = Path(tempfile.mkdtemp(prefix=f"gcsim-{seed}-", dir=parent))
    previous = logging.root.manager.disable
    if not verbose:
        logging.disable(logging.CRITICAL)
    try:
        with open_schedule(seed, base, verbose) as schedule:
            result = schedule.run(fault_phase_s)
    finally:
        logging.disable(previous)
        shutil.rmtree(base, ignore_errors=True)
    return result


def main(argv: list[str] | None = None) -> int:
    """Replay one schedule and print its trace and verdict."""
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--seed", type=int, required=True)
    parser.add_argument("--quiet", action="store_true", help="print only the verdict")
    args = parser.parse_args(argv)
    if not args.quiet:
        logging.basicConfig(level=logging.INFO, format="%(name)s %(levelname)s %(message)s")
    result = run_schedule(args.seed, verbose=not args.quiet)
    print(result.report() if not result.ok else
          f"seed {args.seed}: ok ({result.acks} acks, {result.reads} reads, {result.faults} faults, "
          f"{result.sim_seconds:.1f} simulated s, {result.wall_seconds:.2f} s, {result.cpu_seconds:.2f} s CPU)")
    return 0 if result.ok else 1


Callable  # noqa: B018 - re-exported for type hints of callers

if __name__ == "__main__":
    sys.exit(main())
