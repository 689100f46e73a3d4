"""Chaos under load: GroupMembers heartbeat and commit while partition actors are killed at random.

Used by test_rel_chaos.py (a short run) and benchmarks/chaos.py (long runs). Every commit attempt
is recorded in a ledger, in the order it could take effect: commits of one partition are
serialized by a lock held across the call, offsets only grow, and an attempt whose answer was
not NONE is "ambiguous" (it may have been written before its actor died). At the end the
committed offset of every partition must be the last acknowledged one, or one of the ambiguous
attempts that came after it; never anything older (a lost acknowledged commit).
"""

from __future__ import annotations

import logging
import random
import threading
import time
from collections import Counter
from dataclasses import dataclass, field
from typing import Any

import ray
from waiting import wait_for

from groupcoord.actors.client.admin import AdminClient
from groupcoord.actors.client.errors import GroupCoordinatorError
from groupcoord.actors.client.member import GroupMember
from groupcoord.protocol import Errors, OffsetAndMetadata, TopicPartition, partition_for

log = logging.getLogger(__name__)

TOPIC = "chaos"


@dataclass
class Attempt:
    """One commit of one partition: its offset and whether it was acknowledged (answered NONE)."""

    offset: int
    acked: bool
    outcome: str


class Ledger:
    """Every commit attempt per (group, partition), in the order they could have been applied."""

    def __init__(self) -> None:
        self._locks: dict[tuple[str, TopicPartition], threading.Lock] = {}
        self._guard = threading.Lock()
        self.attempts: dict[tuple[str, TopicPartition], list[Attempt]] = {}

    def lock(self, key: tuple[str, TopicPartition]) -> threading.Lock:
        """The lock that serializes commits of `key`."""
        with self._guard:
            return self._locks.setdefault(key, threading.Lock())

    def next_offset(self, key: tuple[str, TopicPartition], rng: random.Random) -> int:
        """A new offset above every earlier attempt of `key` (call with its lock held)."""
        attempts = self.attempts.get(key)
        return (attempts[-1].offset if attempts else 0) + rng.randint(1, 5)

    def record(self, key: tuple[str, TopicPartition], attempt: Attempt) -> None:
        """Add an attempt (call with the key's lock held)."""
        self.attempts.setdefault(key, []).append(attempt)

    def allowed(self, key: tuple[str, TopicPartition]) -> tuple[int, set[int]]:
        """The last acknowledged offset (-1 if none) and the offsets the committed one may be."""
        attempts = self.attempts.get(key, [])
        last = max((i for i, a in enumerate(attempts) if a.acked), default=-1)
        acked = attempts[last].offset if last >= 0 else -1
        return acked, {acked} | {a.offset for a in attempts[last + 1 :]}

    def last_acked(self, key: tuple[str, TopicPartition]) -> int:
        """The offset of the last acknowledged attempt of `key` so far (-1 if none); no lock needed."""
        attempts = list(self.attempts.get(key, ()))
        return next((a.offset for a in reversed(attempts) if a.acked), -1)

    def counts(self) -> Counter:
        """Attempts by outcome."""
        return Counter(a.outcome for attempts in list(self.attempts.values()) for a in list(attempts))


class ChaosMember:
    """A GroupMember polled in its own thread that commits its partitions continuously."""

    def __init__(self, svc: Any, group: str, name: str, ledger: Ledger, seed: int, **options: Any) -> None:
        self.group = group
        self.name = name
        self.ledger = ledger
        self.rng = random.Random(seed)
        self.member = GroupMember(svc, group, topics=[TOPIC], client_id=name, **options)
        self.heartbeats: Counter = Counter()
        self.identity_changes: list[tuple[str, str]] = []
        self.generations: list[int] = []
        self.poll_errors: Counter = Counter()
        self.fatal: list[BaseException] = []
        self.committing = threading.Event()
        self.idle = threading.Event()
        self._member_id = ""
        self._stop = threading.Event()
        membership = self.member.membership
        original = membership.on_heartbeat

        def spy(request: Any, error: Errors) -> None:
            self.heartbeats[error.name] += 1
            original(request, error)

        membership.on_heartbeat = spy  # type: ignore[method-assign]
        self._thread = threading.Thread(target=self._loop, name=f"chaos-{name}", daemon=True)
        self._thread.start()

    def _loop(self) -> None:
        while not self._stop.is_set():
            self.idle.clear()
            try:
                owned = self.member.poll(100)
                self._watch_identity()
                if owned and self.committing.is_set():
                    self._commit(sorted(owned))
            except (GroupCoordinatorError, TimeoutError) as e:  # the coordinator restarted, or a rebalance
                self.poll_errors[type(e).__name__] += 1
                log.debug("%s: %r", self.name, e)
            except Exception as e:  # anything else reaching a consumer loop is a bug
                self.poll_errors[type(e).__name__] += 1
                self.fatal.append(e)
            except BaseException as e:
                self.fatal.append(e)
                return
            finally:
                self.idle.set()
            time.sleep(0.01)

    def _watch_identity(self) -> None:
        member_id, generation = self.member.member_id, self.member.generation_id
        if member_id and member_id != self._member_id:
            if self._member_id:
                self.identity_changes.append((self._member_id, member_id))
            self._member_id = member_id
        if generation >= 0 and (not self.generations or self.generations[-1] != generation):
            self.generations.append(generation)

    def _commit(self, owned: list[TopicPartition]) -> None:
        keys = [(self.group, tp) for tp in owned]
        locks = [self.ledger.lock(k) for k in keys]
        for lock in locks:
            lock.acquire()
        try:
            offsets = {tp: self.ledger.next_offset((self.group, tp), self.rng) for tp in owned}
            try:
                self.member.commit({tp: OffsetAndMetadata(o, self.name) for tp, o in offsets.items()})
                acked, outcome = True, "NONE"
            except Exception as e:
                acked, outcome = False, type(e).__name__
            for tp, o in offsets.items():
                self.ledger.record((self.group, tp), Attempt(o, acked, outcome))
        finally:
            for lock in locks:
                lock.release()

    def settled(self) -> bool:
        """Stable, no rejoin pending, polled without trouble."""
        m = self.member.membership
        return m.is_stable() and not m.rejoin_needed

    def stop(self) -> None:
        """Stop the poll loop (the member stays in its group)."""
        self._stop.set()
        self._thread.join(60)

    def close(self) -> None:
        """Stop polling and leave the group (a member fenced or expired meanwhile may fail to leave: logged)."""
        self.stop()
        try:
            self.member.close()
        except Exception as e:
            log.info("closing %s: %r", self.name, e)


def spread_group_ids(num_partitions: int, per_partition: int, prefix: str = "chaos") -> list[str]:
    """Group ids that fall on every offsets partition, `per_partition` on each."""
    ids: list[str] = []
    counts: Counter = Counter()
    i = 0
    while len(ids) < num_partitions * per_partition:
        gid = f"{prefix}-{i}"
        p = partition_for(gid, num_partitions)
        if counts[p] < per_partition:
            counts[p] += 1
            ids.append(gid)
        i += 1
    return ids


def actor_status(handle: Any) -> dict:
    """The partition actor's status, waiting through a restart."""
    return wait_for(lambda: ray.get(handle.status.remote(), timeout=10), 120, "a partition status")


@dataclass
class ChaosReport:
    """The figures of one chaos run."""

    seconds: float = 0.0
    rounds: int = 0  # kill rounds (one or two partitions each)
    kills: Counter = field(default_factory=Counter)
    restart_s: list[float] = field(default_factory=list)
    attempts: Counter = field(default_factory=Counter)
    partitions_checked: int = 0
    heartbeats: Counter = field(default_factory=Counter)
    identity_changes: int = 0
    generation_changes: int = 0
    poll_errors: Counter = field(default_factory=Counter)
    lost: list[str] = field(default_factory=list)
    ambiguous_applied: int = 0
    final_restart_checked: bool = False
    restart_checks: int = 0
    restart_partitions_checked: int = 0

    def summary(self) -> str:
        """One paragraph of figures."""
        restarts = sorted(self.restart_s)
        median = restarts[len(restarts) // 2] if restarts else 0.0
        return (
            f"chaos {self.seconds:.0f} s: kills {dict(self.kills)} (restart median {median:.1f} s, "
            f"max {max(restarts, default=0):.1f} s); commit attempts {dict(self.attempts)}; "
            f"right after the restarts {self.restart_partitions_checked} committed offsets checked against "
            f"the last acknowledged ones; at the end "
            f"{self.partitions_checked} partitions verified, lost acked commits {len(self.lost)}, "
            f"partitions ending on an unacknowledged later commit {self.ambiguous_applied}; "
            f"heartbeats {dict(self.heartbeats)}; member id changes {self.identity_changes}; "
            f"generation changes after settling {self.generation_changes}; poll errors {dict(self.poll_errors)}"
        )


class Chaos:
    """One chaos run over a started service: members, kills, and the final verification."""

    def __init__(
        self,
        svc: Any,
        groups: int,
        members_per_group: int,
        topic_partitions: int = 6,
        seed: int = 0,
        session_timeout_ms: int = 10_000,
        heartbeat_interval_ms: int = 500,
        request_timeouts_ms: tuple[int, int] = (30_000, 1_500),
    ) -> None:
        self.svc = svc
        self.rng = random.Random(seed)
        self.ledger = Ledger()
        self.admin = AdminClient(svc)
        self.topic_partitions = topic_partitions
        if TOPIC not in self.admin.describe_topics([TOPIC]):
            self.admin.create_topic(TOPIC, topic_partitions)
        per_partition = max(1, -(-groups // svc.num_partitions))
        self.group_ids = spread_group_ids(svc.num_partitions, per_partition)[:groups]
        self.members = [
            ChaosMember(
                svc,
                g,
                f"{g}-m{j}",
                self.ledger,
                seed * 1000 + i * 10 + j,
                session_timeout_ms=session_timeout_ms,
                heartbeat_interval_ms=heartbeat_interval_ms,
                # Half the members give up on a commit sooner than a restart takes: ambiguous commits.
                request_timeout_ms=request_timeouts_ms[j % 2],
            )
            for i, g in enumerate(self.group_ids)
            for j in range(members_per_group)
        ]
        self.report = ChaosReport()

    # --- phases --------------------------------------------------------------------------

    def settled(self) -> bool:
        """Every group Stable with all its members owning all partitions once, in one generation."""
        all_tps = {TopicPartition(TOPIC, p) for p in range(self.topic_partitions)}
        for g in self.group_ids:
            ms = [m for m in self.members if m.group == g]
            owned = [tp for m in ms for tp in m.member.assignment()]
            if not all(m.settled() for m in ms) or len(owned) != len(set(owned)) or set(owned) != all_tps:
                return False
            if len({m.member.generation_id for m in ms}) != 1:
                return False
        described = self.admin.describe_groups(self.group_ids)
        return all(
            d.group_state == "Stable" and len(d.members) == sum(m.group == g for m in self.members)
            for g, d in described.items()
        )

    def settle(self, timeout_s: float = 120) -> None:
        """Wait until every group is Stable and settled."""
        wait_for(self.settled, timeout_s, "every group to be Stable with its members settled", 0.2)

    def kill_some(self) -> None:
        """Kill one random partition actor, sometimes two at once (by ray.kill or by a hard exit
        inside the actor), and wait until they have restarted and reloaded their logs."""
        count = 2 if self.svc.num_partitions > 1 and self.rng.random() < 0.3 else 1
        chosen = self.rng.sample(range(self.svc.num_partitions), count)
        handles = [self.svc.partition(i) for i in chosen]
        old_pids = [actor_status(h)["pid"] for h in handles]
        kinds = [self.rng.choice(("ray.kill", "crash")) for _ in handles]
        start = time.monotonic()
        for handle, kind in zip(handles, kinds, strict=True):
            if kind == "ray.kill":
                ray.kill(handle, no_restart=False)
            else:
                handle.crash.remote()

        def restarted() -> bool:
            states = ray.get([h.status.remote() for h in handles], timeout=10)
            return all(s["pid"] != o and s["loaded"] for s, o in zip(states, old_pids, strict=True))

        wait_for(restarted, 120, f"partitions {chosen} to restart after {kinds}")
        self.report.kills.update(kinds)
        self.report.restart_s.append(time.monotonic() - start)
        self.check_after_restart(chosen)

    def check_after_restart(self, partitions: list[int]) -> None:
        """Right after a restart every commit acknowledged so far is visible (at the end, later commits
        would hide a loss)."""
        for g in self.group_ids:
            if partition_for(g, self.svc.num_partitions) not in partitions:
                continue
            tps = [TopicPartition(TOPIC, p) for p in range(self.topic_partitions)]
            acked = {tp: self.ledger.last_acked((g, tp)) for tp in tps}
            committed = self.admin.list_group_offsets(g)
            self.report.restart_checks += 1
            for tp in tps:
                got = committed[tp].offset if tp in committed else -1
                self.report.restart_partitions_checked += 1
                if got < acked[tp]:
                    self.report.lost.append(f"after a restart: {g} {tp}: committed {got} < acknowledged {acked[tp]}")

    def run(self, seconds: float | None = None, pause_s: tuple[float, float] = (0.1, 0.8), rounds: int | None = None,
            acks_between: int = 0) -> ChaosReport:
        """Settle, then commit while killing partitions (for `seconds`, or `rounds` times), then verify everything.

        With `acks_between`, each kill waits until that many more commits were acknowledged since the last
        one, so that every kill lands on a service under load whatever the machine's speed.
        """
        self.settle()
        baseline = {m.name: len(m.generations) for m in self.members}
        for m in self.members:
            m.committing.set()
        start = time.monotonic()
        while (time.monotonic() - start < seconds) if rounds is None else (self.report.rounds < rounds):
            if acks_between:
                target = self.ledger.counts()["NONE"] + acks_between
                wait_for(lambda target=target: self.ledger.counts()["NONE"] >= target, 120,
                         f"{acks_between} more acknowledged commits")
            self.kill_some()
            self.report.rounds += 1
            time.sleep(self.rng.uniform(*pause_s))
        self.report.seconds = time.monotonic() - start
        self.finish()
        r = self.report
        r.attempts = self.ledger.counts()
        for m in self.members:
            r.heartbeats.update(m.heartbeats)
            r.identity_changes += len(m.identity_changes)
            r.generation_changes += len(m.generations) - baseline[m.name]
            r.poll_errors.update(m.poll_errors)
        return r

    def finish(self) -> None:
        """Stop committing, settle, verify every offset, restart every partition, verify and settle again."""
        for m in self.members:
            m.committing.clear()
        wait_for(lambda: all(m.idle.is_set() for m in self.members), 120, "the members to finish committing")
        self.settle()
        self.verify_offsets()
        self.restart_all()
        self.verify_offsets()
        self.report.final_restart_checked = True
        self.settle()

    def restart_all(self) -> None:
        """Kill every partition actor at once and wait until all have restarted and reloaded."""
        handles = [self.svc.partition(p) for p in range(self.svc.num_partitions)]
        old = [actor_status(h)["pid"] for h in handles]
        for h in handles:
            ray.kill(h, no_restart=False)

        def all_back() -> bool:
            states = ray.get([h.status.remote() for h in handles], timeout=10)
            return all(s["pid"] != o and s["loaded"] for s, o in zip(states, old, strict=True))

        wait_for(all_back, 120, "every partition to restart and reload")

    def verify_offsets(self) -> None:
        """Every partition's committed offset is its last acked one, or an ambiguous later attempt."""
        self.report.partitions_checked = self.report.ambiguous_applied = 0
        for g in self.group_ids:
            committed = self.admin.list_group_offsets(g)
            for p in range(self.topic_partitions):
                tp = TopicPartition(TOPIC, p)
                acked, allowed = self.ledger.allowed((g, tp))
                got = committed[tp].offset if tp in committed else -1
                self.report.partitions_checked += 1
                self.report.ambiguous_applied += got != acked and got in allowed
                if got not in allowed:
                    self.report.lost.append(
                        f"at the end: {g} {tp}: committed {got}, last acked {acked}, allowed {sorted(allowed)}"
                    )

    def close(self) -> None:
        """Stop and close every member."""
        for m in self.members:
            m.stop()
        for m in self.members:
            m.close()

    def fatal_errors(self) -> list[BaseException]:
        """Exceptions other than typed coordinator errors and timeouts that reached a member's poll loop."""
        return [e for m in self.members for e in m.fatal]
