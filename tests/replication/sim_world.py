"""The simulated world the real replication code runs in: nodes with disks, processes, a network, one clock.

Everything is driven by one seeded random generator and one simulated clock, so a seed replays a run
exactly. Each process (a replica, the router, the clients) has its own SimLoop; the world steps the
loops that have work, in a seeded order, and delivers messages after random delays. Replicas are the
real ReplicaActor (with the real ReplicatedLog, election, repair, truncation, compaction and storage),
constructed with a SimTransport; each node's storage goes through the power-loss harness.
"""

from __future__ import annotations

import errno
import functools
import heapq
import math
import os
import random
import shutil
import sys
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Callable

from sim_loop import SimLoop

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "storage"))

from powerloss import PowerLossFiles

from groupcoord.actors.service.replication.transport import Transport
from groupcoord.storage.fileops import FileOps


class SimExit(SystemExit):
    """The simulated process ends (os._exit in a real one)."""


class ActorDiedError(Exception):
    """The callee's process died, or its node did, before it answered (Ray's RayActorError)."""


@dataclass(frozen=True)
class SimHandle:
    """An actor handle: the name of a simulated process."""

    name: str


class SimClock:
    """The shard's clock on the simulated time."""

    def __init__(self, world: World) -> None:
        self.world = world

    def now_ms(self) -> int:
        return 1_700_000_000_000 + int(self.world.now * 1000)

    def monotonic_ms(self) -> int:
        return int(self.world.now * 1000)


def _checked(op: str) -> Callable:
    def method(self: NodeFiles, *args: Any, **kwargs: Any) -> Any:
        if self.fail_next or self.full:  # nothing injected: nothing to check
            self._check(op)
        return getattr(self.inner, op)(*args, **kwargs)

    method.__name__ = op
    return method


class NodeFiles(FileOps):
    """A node's disk: the power-loss harness, plus locks that die with their process, injected errors and a
    full disk. Wiping the disk starts a fresh harness over an empty directory."""

    MUTATING = ("open_append", "create", "open_existing", "write_at", "write", "fsync", "fsync_directory",
                "rename", "link", "unlink", "truncate", "mkdir")

    def __init__(self, world: World, root: Path) -> None:
        self.world = world
        self.root = root
        self.inner = PowerLossFiles(root, locks_work=False)
        self.locks: dict[str, tuple[str, int]] = {}  # lock path -> (process name, incarnation)
        self.lock_paths: dict[int, str] = {}
        self.full = False
        self.fail_next: dict[str, int] = {}
        self.retired: list[PowerLossFiles] = []  # harnesses of wiped disks, whose descriptors are still open

    def _check(self, op: str) -> None:
        code = self.fail_next.pop(op, None)
        if code is None and self.full and op in ("write", "write_at", "create", "mkdir", "open_append", "link"):
            code = errno.ENOSPC
        if code is not None:
            raise OSError(code, f"{errno.errorcode[code]} (simulated, {op} on {self.root.name})")

    def close(self, fd: int) -> None:
        self.inner.close(fd)

    def lock(self, path):
        key = str(path)
        holder = self.locks.get(key)
        me = self.world.current_key()
        if holder is not None and holder != me and self.world.is_live(holder):
            return None
        fd = self.inner.lock(path)
        if fd is not None:
            self.locks[key] = me
            self.lock_paths[fd] = key
        return fd

    def unlock(self, handle):
        key = self.lock_paths.pop(handle, None)
        if key is not None and self.locks.get(key) == self.world.current_key():
            del self.locks[key]
        try:
            self.inner.unlock(handle)
        except OSError:
            pass

    def power_loss(self, rng: random.Random) -> None:
        """Every process on the node is dead already: keep what was durable (and a random part of the rest)."""
        self.inner.pull_plug(rng)
        self.locks.clear()
        self.lock_paths.clear()
        self.full = False
        self.fail_next.clear()

    def close_all(self) -> None:
        """Close every descriptor the node's processes left open (a dead process's are closed by its OS)."""
        for inner in [*self.retired, self.inner]:
            for fd in [*inner._fds, *inner._lock_fds]:
                try:
                    os.close(fd)
                except OSError:
                    pass
            inner._fds.clear()
            inner._lock_fds.clear()
        self.retired.clear()

    def wipe(self) -> None:
        """The disk is gone (replaced by an empty one)."""
        shutil.rmtree(self.root, ignore_errors=True)
        self.retired.append(self.inner)
        self.inner = PowerLossFiles(self.root, locks_work=False)
        self.locks.clear()
        self.lock_paths.clear()


for _op in NodeFiles.MUTATING:
    setattr(NodeFiles, _op, _checked(_op))


@dataclass
class Node:
    """A simulated machine: its disk and whether it is up."""

    name: str
    files: NodeFiles
    alive: bool = True
    service: bool = True  # False: a clients' machine, where no replica is placed


@dataclass
class Process:
    """A simulated actor process: its loop and object, and its incarnation (a restart increments it)."""

    name: str
    node: str
    factory: Callable[[Transport], Any]
    restartable: bool = True
    loop: SimLoop | None = None
    obj: Any = None
    alive: bool = False
    paused: bool = False
    incarnation: int = -1
    killed: bool = False
    held: list = field(default_factory=list)  # messages that arrived while paused
    pending: list = field(default_factory=list)  # refs of calls it is serving


class SimRef:
    """A reference to a call's answer."""

    __slots__ = ("callee", "caller", "done", "error", "future", "method", "served", "value")

    def __init__(self, caller: tuple[str, int], callee: str, method: str) -> None:
        self.caller, self.callee, self.method = caller, callee, method
        self.done = False
        self.value: Any = None
        self.error: BaseException | None = None
        self.future: Any = None
        self.served: Any = None


class SimTransport(Transport):
    """The transport of one incarnation of a simulated process."""

    def __init__(self, world: World, proc: Process) -> None:
        self.world, self.proc, self.incarnation = world, proc, proc.incarnation

    def node_id(self) -> str:
        return self.proc.node

    def restarted(self) -> bool:
        return self.incarnation > 0

    def monotonic(self) -> float:
        return self.world.now

    def clock(self) -> SimClock:
        return SimClock(self.world)

    def send(self, handle: Any, method: str, *args: Any) -> SimRef:
        return self.world.send((self.proc.name, self.incarnation), handle.name, method, args)

    def wait(self, refs: list, timeout: float) -> list:
        ready = [r for r in refs if r.done]
        if not ready and timeout > 0 and self.proc.loop is not None:
            # A thread blocked in ray.wait: its job completes a while later (answers arriving meanwhile are
            # taken by its next call), instead of returning at once and spinning.
            self.proc.loop.blocked = max(self.proc.loop.blocked, min(timeout, 0.01))
        return ready

    def result(self, ref: SimRef) -> Any:
        if ref.error is not None:
            raise ref.error
        return ref.value

    async def call(self, handle: Any, method: str, *args: Any) -> Any:
        ref = self.send(handle, method, *args)
        assert self.proc.loop is not None
        ref.future = self.proc.loop.create_future()
        return await ref.future

    async def call_within(self, timeout: float, handle: Any, method: str, *args: Any) -> Any:
        """A call that raises TimeoutError after `timeout` simulated seconds without an answer: asyncio.wait_for's
        effect for the simulated clients, without a task and a waiter per call (their calls are many of the steps)."""
        ref = self.send(handle, method, *args)
        assert self.proc.loop is not None
        future = ref.future = self.proc.loop.create_future()
        timer = self.proc.loop.call_later(timeout, _time_out, future)
        try:
            return await future
        finally:
            timer.cancel()

    def router(self) -> SimHandle:
        return SimHandle("router")

    def alive_nodes(self) -> list[str]:
        return sorted(n.name for n in self.world.nodes.values() if n.alive and n.service)

    def spawn_replica(self, actor_class: type, name: str, node_id: str, args: tuple) -> SimHandle:
        return self.world.spawn_replica(name, node_id, args)

    def kill(self, handle: Any) -> None:
        self.world.kill(handle.name)

    def exit(self, code: int):
        raise SimExit(code)


def _time_out(future: Any) -> None:
    if not future.done():
        future.set_exception(TimeoutError())


class World:
    """Nodes, processes, the network and the clock of one simulated run (see the module docstring)."""

    def __init__(self, seed: int, base: Path, nodes: int, trace: Callable[[str], None]) -> None:
        self.rng = random.Random(seed)
        self._random = self.rng.random
        self._clock = functools.partial(getattr, self, "now")  # the loops' clock, read without a Python frame
        self.now = 0.0
        self.base = base
        self.trace = trace
        self.nodes = {f"n{i}": Node(f"n{i}", NodeFiles(self, base / f"n{i}")) for i in range(nodes)}
        self.procs: dict[str, Process] = {}
        self.events: list[tuple[float, int, Callable[[], None]]] = []
        self._running: list[Process] | None = None  # the processes whose loops run, in order; None: to be listed
        self._seq = 0
        self.current: Process | None = None
        self.partitions: set[frozenset[str]] = set()
        self.slow: dict[frozenset[str], float] = {}  # links with an extra delay each way (a busy machine), seconds
        self.channels: dict[tuple[str, str], list] = {}
        self.replica_factory: Callable[[str, str, tuple, SimTransport], Any] | None = None
        self.on_reply: Callable[[SimRef, Process], None] = lambda ref, proc: None
        self.after_step: Callable[[Process], None] = lambda proc: None
        self.on_duplicate: Callable[[str, tuple], None] = lambda method, args: None  # a request sent twice
        self.loss = 0.02
        self.duplication = 0.02

    # --- time and events ----------------------------------------------------------------------

    def at(self, delay: float, fn: Callable[[], None]) -> None:
        """Run `fn` (a world event: a delivery, a fault) `delay` simulated seconds from now."""
        self._seq += 1
        heapq.heappush(self.events, (self.now + delay, self._seq, fn))

    # Random.uniform(a, b) is a + (b - a) * random(): written out, the same draws and the same floats, without a
    # call of uniform for every message and every storage job.

    def net_delay(self) -> float:
        random = self._random
        if random() > 0.05:
            return 0.0005 + (0.004 - 0.0005) * random()
        return 0.01 + (0.08 - 0.01) * random()

    def io_delay(self) -> float:
        return 0.0002 + (0.002 - 0.0002) * self._random()

    def run_until(self, t_end: float, stop: Callable[[], bool] | None = None) -> None:
        """Advance the world to `t_end` (or until `stop()`), running events and loops in a seeded order."""
        events, inf = self.events, math.inf
        shuffle, step = self.rng.shuffle, self._step
        while stop is None or not stop():
            due = self._due()
            t = min(due[0], events[0][0] if events else inf)
            if t > t_end:
                self.now = max(self.now, t_end)
                return
            if t > self.now:
                self.now = t
            now = self.now
            if events and events[0][0] <= now:
                while events and events[0][0] <= now:
                    heapq.heappop(events)[2]()
                due = self._due()
            ready = [p for nt, p in due[1] if nt <= now]
            if len(ready) > 1:
                shuffle(ready)  # a list of one takes nothing from the generator: the same draws as before
            for p in ready:
                if p.alive and not p.paused and p.loop is not None:
                    step(p)

    def _due(self) -> tuple[float, list[tuple[float, Process]]]:
        """When each running loop next has work (in the processes' order), and the earliest of those times."""
        now, earliest, due = self.now, math.inf, []
        running = self._running
        if running is None:
            running = [p for p in self.procs.values() if p.alive and not p.paused and p.loop is not None]
            self._running = running
        for p in running:
            loop = p.loop
            if loop._ready:  # type: ignore[union-attr]
                t = now
            else:
                scheduled = loop._scheduled  # type: ignore[union-attr]
                t = scheduled[0]._when if scheduled and not scheduled[0]._cancelled else loop.next_time()  # type: ignore
            due.append((t, p))
            if t < earliest:
                earliest = t
        return earliest, due

    def _step(self, p: Process) -> None:
        self.current = p
        try:
            p.loop.step()  # type: ignore[union-attr]
            self.after_step(p)
        except SimExit as e:
            self.trace(f"{self.now:9.4f} {p.name} exits ({e.code})")
            self.crash(p.name, restart=True)
        finally:
            self.current = None

    def current_key(self) -> tuple[str, int]:
        p = self.current
        return (p.name, p.incarnation) if p is not None else ("world", 0)

    def is_live(self, key: tuple[str, int]) -> bool:
        p = self.procs.get(key[0])
        return p is not None and p.alive and p.incarnation == key[1]

    # --- processes ----------------------------------------------------------------------------

    def add_process(self, name: str, node: str, factory: Callable[[Transport], Any], restartable: bool = True) -> None:
        self.procs[name] = Process(name, node, factory, restartable)
        self._running = None
        self._start(self.procs[name])

    def spawn_replica(self, name: str, node: str, args: tuple) -> SimHandle:
        """Ray's get_if_exists: the running actor of that name, else a new one on `node`."""
        if name not in self.procs or self.procs[name].killed:
            assert self.replica_factory is not None
            factory = self.replica_factory
            self.procs[name] = Process(name, node, lambda t: factory(name, node, args, t))
            self._running = None
            self.trace(f"{self.now:9.4f} spawn {name} on {node}")
            if self.nodes[node].alive:
                self._start(self.procs[name])
        return SimHandle(name)

    def _start(self, p: Process) -> None:
        if not self.nodes[p.node].alive or p.killed:
            return
        p.incarnation += 1
        p.loop = SimLoop(self._clock, self.io_delay)
        p.alive, p.paused, p.held = True, False, []
        self._running = None
        transport = SimTransport(self, p)
        outer = self.current
        self.current = p
        previous = p.loop.enter()
        try:
            p.obj = p.factory(transport)
        except SimExit as e:
            self.trace(f"{self.now:9.4f} {p.name} exits in its constructor ({e.code})")
            self.crash(p.name, restart=True)
        except Exception as e:  # Ray retries a failing constructor as a restart
            self.trace(f"{self.now:9.4f} {p.name} constructor failed: {e!r}")
            self.crash(p.name, restart=True)
        finally:
            SimLoop.leave(previous)
            self.current = outer

    def crash(self, name: str, restart: bool) -> None:
        """The process dies; its callers get errors; Ray restarts it a little later (if `restart`)."""
        p = self.procs[name]
        if not p.alive:
            return
        p.alive, p.paused, p.loop, p.obj = False, False, None, None
        self._running = None
        pending, p.pending, held, p.held = p.pending, [], p.held, []
        for ref in pending:
            self._answer(ref, None, ActorDiedError(f"{name} died"), name)
        for deliver in held:  # calls queued while it was paused fail as Ray fails them: the process is gone
            deliver()
        if restart and p.restartable:
            self.at(self.rng.uniform(0.2, 1.5), lambda: self._restart(p))

    def _restart(self, p: Process) -> None:
        if not p.alive and not p.killed and self.nodes[p.node].alive:
            self.trace(f"{self.now:9.4f} restart {p.name}")
            self._start(p)

    def kill(self, name: str) -> None:
        """ray.kill(no_restart=True)."""
        p = self.procs.get(name)
        if p is not None:
            self.trace(f"{self.now:9.4f} kill {name}")
            self.crash(name, restart=False)
            p.killed = True

    def pause(self, name: str, seconds: float) -> None:
        p = self.procs[name]
        if p.alive and not p.paused:
            p.paused = True
            self._running = None
            self.trace(f"{self.now:9.4f} pause {name} for {seconds:.2f}s")
            incarnation = p.incarnation
            self.at(seconds, lambda: self.resume(name, incarnation))

    def resume(self, name: str, incarnation: int | None = None) -> None:
        p = self.procs[name]
        if p.paused and (incarnation is None or p.incarnation == incarnation):
            p.paused = False
            self._running = None
            held, p.held = p.held, []
            for deliver in held:
                deliver()

    def lose_node(self, node: str) -> None:
        """The node and its disk are gone for good."""
        self.nodes[node].alive = False
        for p in list(self.procs.values()):
            if p.node == node:
                self.crash(p.name, restart=False)
        shutil.rmtree(self.nodes[node].files.root, ignore_errors=True)

    def power_loss(self, node: str) -> None:
        """Power off and on: every process on the node dies, unsynced writes are dropped, Ray restarts them."""
        for p in list(self.procs.values()):
            if p.node == node:
                self.crash(p.name, restart=True)
        self.nodes[node].files.power_loss(self.rng)

    # --- network ------------------------------------------------------------------------------

    def cut(self, a: str, b: str) -> bool:
        return bool(self.partitions) and frozenset((a, b)) in self.partitions

    def send(self, caller: tuple[str, int], callee: str, method: str, args: tuple) -> SimRef:
        ref = SimRef(caller, callee, method)
        copies = 2 if self.rng.random() < self.duplication else 1
        if copies == 2:
            self.on_duplicate(method, args)
        for _ in range(copies):
            self._transmit(lambda: self._deliver(ref, args), caller[0], callee)
        return ref

    def _transmit(self, deliver: Callable[[], None], src: str, dst: str) -> None:
        """Deliver in order on the (src, dst) connection after a delay: as Ray's calls from one caller to one actor,
        a lost packet is sent again (delaying what follows it), a cut link holds everything until it heals."""
        key = (src, dst)
        channel = self.channels.get(key)
        if channel is None:
            channel = self.channels[key] = []
        delay = self.net_delay()
        if self.slow:
            delay += self.slow.get(frozenset(key), 0.0)
        channel.append((self.now + delay, deliver))
        if len(channel) == 1:
            self.at(channel[0][0] - self.now, lambda: self._pump(key))

    def _pump(self, key: tuple[str, str]) -> None:
        channel = self.channels[key]
        if not channel:
            return
        if self.cut(*key) or self.rng.random() < self.loss:
            self.at(self.rng.uniform(0.05, 0.3), lambda: self._pump(key))
            return
        _, deliver = channel.pop(0)
        if channel:
            self.at(max(0.0, channel[0][0] - self.now), lambda: self._pump(key))
        deliver()

    def _deliver(self, ref: SimRef, args: tuple) -> None:
        p = self.procs.get(ref.callee)
        if ref.done:
            return
        if p is None or not p.alive:
            self._answer(ref, None, ActorDiedError(f"{ref.callee} is not running"), ref.callee)
            return
        if p.paused:
            p.held.append(lambda: self._deliver(ref, args))
            return
        incarnation = p.incarnation
        method = getattr(p.obj, ref.method)
        p.pending.append(ref)

        def done(task: Any) -> None:
            if not p.alive or p.incarnation != incarnation:
                return
            if ref in p.pending:
                p.pending.remove(ref)
            if task.cancelled():
                self._answer(ref, None, ActorDiedError("cancelled"), p.name)
                return
            error = task.exception()
            if isinstance(error, SystemExit):
                return  # the process is ending: the crash answers
            ref.served = p
            self.on_reply(ref, p) if error is None else None
            self._answer(ref, task.result() if error is None else None, error, p.name)

        assert p.loop is not None
        task = p.loop.create_task(method(*args))
        task.add_done_callback(done)

    def _answer(self, ref: SimRef, value: Any, error: BaseException | None, src: str) -> None:
        def arrive() -> None:
            if ref.done:
                return
            ref.done, ref.value, ref.error = True, value, error
            caller = self.procs.get(ref.caller[0])
            if ref.future is not None and not ref.future.done() and caller is not None and caller.alive \
                    and caller.incarnation == ref.caller[1]:
                if error is not None:
                    ref.future.set_exception(error)
                else:
                    ref.future.set_result(value)

        self._transmit(arrive, src, ref.caller[0])
