"""`groupcoord demo`: a consumer group on Ray riding through joins, a leave, a crash and a coordinator restart.

Members are Ray actors consuming a synthetic stream (a producer reports growing log-end
offsets); each one commits what it processed. The demo checks at the end that every commit
that was acknowledged can be fetched, and that the live members own every partition once.
"""

from __future__ import annotations

import logging
import os
import tempfile
import threading
import time

import ray

from groupcoord.protocol import OffsetAndMetadata, TopicPartition
from groupcoord.protocol.config import GroupConfig

from ..client import AdminClient, Service
from ..service import start, stop
from .demo_analysis import analyse_demo_run, keep_paths
from .quiet import init_ray

log = logging.getLogger(__name__)

GROUP = "demo-group"
TOPIC = "events"
PARTITIONS = 6
NAMESPACE = "groupcoord-demo"


class DemoWorker:
    """A group member in a Ray actor whose consumer loop (a thread) processes up to the log end and commits."""

    def __init__(self, service: Service, name: str, session_timeout_ms: int, heartbeat_interval_ms: int) -> None:
        from ..client import GroupMember

        self.name = name
        self.admin = AdminClient(service)
        self.member = GroupMember(
            service,
            GROUP,
            topics=[TOPIC],
            client_id=name,
            session_timeout_ms=session_timeout_ms,
            heartbeat_interval_ms=heartbeat_interval_ms,
            partition_assignment_strategy=("cooperative-sticky",),
        )
        self.acked: dict[TopicPartition, int] = {}
        self.snapshot: dict = {"owned": [], "generation": -1}
        self._lock = threading.Lock()
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._run, name=f"consumer-{name}", daemon=True)
        self._thread.start()

    def _run(self) -> None:
        from ..client import GroupCoordinatorError

        while not self._stop.is_set():
            try:
                self._step()
            except GroupCoordinatorError as e:  # e.g. a commit that lost a race with a rebalance
                log.info("%s: %s", self.name, e)
            self._stop.wait(0.1)

    def _step(self) -> None:
        owned = self.member.poll(100)
        ends = self.admin.describe_topics([TOPIC])[TOPIC]["end_offsets"]
        commit = {}
        for tp in owned:
            end = ends.get(tp.partition, 0)
            position = self.member.position(tp)
            if position is None:
                committed = self.member.committed([tp])[tp]
                position = 0 if committed is None else committed.offset
            if end > position:
                commit[tp] = OffsetAndMetadata(end, self.name)
                self.member.seek(tp, end)
        if commit:
            self.member.commit(commit)  # returns only once durable: only then is it acknowledged
        with self._lock:
            for tp, om in commit.items():
                self.acked[tp] = max(self.acked.get(tp, 0), om.offset)
            self.snapshot = {"owned": sorted(owned), "generation": self.member.generation_id}

    def status(self) -> dict:
        with self._lock:
            return dict(self.snapshot)

    def acked_offsets(self) -> dict[TopicPartition, int]:
        with self._lock:
            return dict(self.acked)

    def close(self) -> None:
        self._stop.set()
        self._thread.join(60)
        self.member.close()


class Demo:
    """The scripted scenario; `run()` returns True when every check passed."""

    def __init__(self, short: bool, storage_path: str, keep_dir: str | None = None) -> None:
        self.short = short
        self.keep_dir = keep_dir
        self.verified = 0
        self.session_ms = 2000 if short else 6000
        self.storage_path = storage_path
        self.started = time.monotonic()
        self.end_offsets = {p: 0 for p in range(PARTITIONS)}
        self.workers: dict[str, object] = {}
        self.acked: dict[TopicPartition, int] = {}
        self.problems: list[str] = []
        self.events: list[tuple[int, str]] = []  # (wall-clock ms, kind) marked on the plot

    def say(self, text: str) -> None:
        print(f"[{time.monotonic() - self.started:6.1f}s] {text}", flush=True)

    def produce(self) -> None:
        for p in self.end_offsets:
            self.end_offsets[p] += 10 + p
        self.admin.report_end_offsets(TOPIC, self.end_offsets)

    def spawn(self, name: str) -> None:
        actor = (
            ray.remote(DemoWorker)
            .options(num_cpus=0, name=f"demo-{name}", namespace=NAMESPACE)
            .remote(self.svc, name, self.session_ms, self.session_ms // 4)
        )
        self.workers[name] = actor

    def rounds(self, n: int, until=None) -> dict[str, dict]:
        """Produce and watch the workers for up to `n` rounds of 0.3 s, or until `until(states)` holds."""
        states: dict[str, dict] = {}
        for _ in range(n):
            self.produce()
            time.sleep(0.3)
            states = {name: ray.get(w.status.remote()) for name, w in self.workers.items()}
            if until is not None and until(states):
                break
        return states

    def wait_loaded(self, handle, timeout_s: float = 120.0) -> None:
        deadline = time.monotonic() + timeout_s
        while time.monotonic() < deadline:
            self.produce()
            try:
                if ray.get(handle.is_loaded.remote(), timeout=5):
                    return
            except (ray.exceptions.RayActorError, ray.exceptions.ActorUnavailableError, ray.exceptions.GetTimeoutError):
                pass
            time.sleep(0.2)
        self.problems.append(f"the coordinator did not come back within {timeout_s} s")

    def show(self, states: dict[str, dict]) -> None:
        for name, s in sorted(states.items()):
            parts = ", ".join(f"{tp.topic}-{tp.partition}" for tp in s["owned"]) or "(none)"
            self.say(f"    {name}: generation {s['generation']}, owns {parts}")

    def balanced(self, states: dict[str, dict]) -> bool:
        owned = [tp for s in states.values() for tp in s["owned"]]
        counts = [len(s["owned"]) for s in states.values()]
        return len(owned) == PARTITIONS == len(set(owned)) and max(counts) - min(counts) <= 1

    def collect_acks(self, names) -> None:
        for name in names:
            for tp, off in ray.get(self.workers[name].acked_offsets.remote()).items():
                self.acked[tp] = max(self.acked.get(tp, 0), off)

    def run(self) -> bool:
        from ..client import GroupMember  # noqa: F401  (fail early if the client is broken)

        self.say(f"starting Ray and the groupcoord service (4 partitions, storage {self.storage_path})")
        if not ray.is_initialized():
            init_ray(address="local", num_cpus=2, include_dashboard=False, namespace=NAMESPACE)
        self.svc = start(
            4,
            self.storage_path,
            NAMESPACE,
            config=GroupConfig(min_session_timeout_ms=1000, initial_rebalance_delay_ms=500),
        )
        self.admin = AdminClient(self.svc)
        self.admin.create_topic(TOPIC, PARTITIONS)
        p, _ = self.svc.find_coordinator(GROUP)
        self.say(f"topic {TOPIC!r} with {PARTITIONS} partitions; group {GROUP!r} lives on offsets partition {p}")
        try:
            self.script()
            self.drain()
        finally:
            for w in self.workers.values():
                try:
                    ray.get(w.close.remote(), timeout=30)
                except Exception:
                    pass
            stop(NAMESPACE)
        if not self.short:
            history, plot = keep_paths(self.keep_dir, self.storage_path)
            self.problems += analyse_demo_run(self.storage_path, history, plot, GROUP, self.acked, self.say,
                                              self.events)
        self.summary(len(self.acked), self.verified)
        self.next_steps()
        return not self.problems

    def drain(self) -> None:
        """Stop producing, let the members catch up with the end offsets, then close them and count their acks."""
        ends = {TopicPartition(TOPIC, p): end for p, end in self.end_offsets.items()}
        deadline = time.monotonic() + 30
        while time.monotonic() < deadline:
            self.collect_acks(list(self.workers))
            if all(self.acked.get(tp, 0) >= end for tp, end in ends.items()):
                break
            time.sleep(0.2)
        for name in list(self.workers):
            worker = self.workers.pop(name)
            ray.get(worker.close.remote(), timeout=30)
            for tp, off in ray.get(worker.acked_offsets.remote()).items():
                self.acked[tp] = max(self.acked.get(tp, 0), off)
        self.say(f"    the consumers caught up with the end offsets and closed ({len(self.acked)} partitions)")

    def script(self) -> None:
        self.say("1. worker-1 joins the group")
        self.spawn("worker-1")
        self.show(self.rounds(30, until=lambda s: len(s["worker-1"]["owned"]) == PARTITIONS))

        self.say("2. worker-2 and worker-3 join: cooperative rebalance spreads the partitions")
        self.spawn("worker-2")
        self.spawn("worker-3")
        self.show(self.rounds(60, until=self.balanced))

        self.say("3. worker-2 leaves cleanly (LeaveGroup): its partitions move")
        self.collect_acks(["worker-2"])
        ray.get(self.workers.pop("worker-2").close.remote())
        self.show(self.rounds(60, until=self.balanced))

        self.say(f"4. worker-3 crashes without leaving: the coordinator expires it after {self.session_ms} ms")
        self.collect_acks(["worker-3"])
        crashed_at = time.monotonic()
        ray.kill(self.workers.pop("worker-3"))
        states = self.rounds(200, until=self.balanced)
        self.say(f"    session expired and the group rebalanced {time.monotonic() - crashed_at:.1f}s after the crash")
        self.show(states)

        self.say("5. the group's coordinator actor is killed; Ray restarts it and it replays its log")
        _, handle = self.svc.find_coordinator(GROUP)
        generation = states["worker-1"]["generation"]
        ray.kill(handle, no_restart=False)
        killed_at = time.monotonic()
        self.events.append((time.time_ns() // 1_000_000, "coordinator restart"))
        self.wait_loaded(handle)
        self.say(f"    the restarted actor replayed its log and serves again after {time.monotonic() - killed_at:.1f}s")
        states = self.rounds(10)
        self.show(states)
        if states["worker-1"]["generation"] != generation:
            self.problems.append("the coordinator restart forced a rebalance of a Stable group")
        else:
            self.say("    the member kept its generation: no rebalance was needed")

        self.collect_acks(list(self.workers))
        committed = self.admin.list_group_offsets(GROUP)
        lost = {
            tp: (off, committed.get(tp))
            for tp, off in self.acked.items()
            if committed.get(tp) is None or committed[tp].offset < off
        }
        if lost:
            self.problems.append(f"acknowledged commits missing after the restart: {lost}")
        self.print_describe()
        self.verified = len(self.acked) - len(lost)

    def print_describe(self) -> None:
        from .cli_groups import print_offsets_table
        from .demo_analysis import DEMO_WIDTH

        described = self.admin.describe_groups([GROUP])[GROUP]
        self.say(f"group {GROUP!r} is {described.group_state}:")
        print_offsets_table(self.admin, described, width=DEMO_WIDTH)

    def summary(self, acked: int, verified: int) -> None:
        print()
        print("Summary")
        print("  shown: a member joining, two joining with a cooperative rebalance, a clean leave,")
        print("         a crash detected by session timeout, and a coordinator actor killed and restarted")
        if not self.short:
            print("         then Spark on Ray (RayDP) analysing the exported offsets history")
        print(
            f"  verified: {verified} of {acked} partitions' last acknowledged commits are fetchable after the restart"
        )
        if not self.short:
            print("            and the reports show those offsets, every partition and the group OK (Burrow rules)")
        if self.problems:
            for p in self.problems:
                print(f"  PROBLEM: {p}")
        else:
            print("  result: OK — no acknowledged commit was lost and the group is Stable")

    def next_steps(self) -> None:
        if self.keep_dir is None:
            return
        history, _ = keep_paths(self.keep_dir, self.storage_path)
        print()
        print(f"The run is kept in {self.keep_dir}. To look further:")
        print(f"  groupcoord analyze --storage {self.storage_path} --history {history}")
        print(f"  groupcoord start --storage {self.storage_path} --partitions 4   # the service again, on this storage")
        print("  groupcoord status")


def run_demo(short: bool = False, storage_path: str | None = None, keep_dir: str | None = None) -> bool:
    """Run the demo on an embedded local Ray; True when every check passed.

    `keep_dir` keeps the storage, the exported history and the plot there; otherwise the storage
    lives in a temporary directory (or `storage_path`) and only the plot is left behind.
    """
    os.environ.setdefault("RAY_USAGE_STATS_ENABLED", "0")
    if keep_dir is not None:
        storage = os.path.join(os.path.abspath(keep_dir), "storage")
        os.makedirs(storage, exist_ok=True)
        return Demo(short, storage, os.path.abspath(keep_dir)).run()
    if storage_path is not None:
        return Demo(short, storage_path).run()
    with tempfile.TemporaryDirectory(prefix="groupcoord-demo-") as tmp:
        return Demo(short, os.path.join(tmp, "storage")).run()
