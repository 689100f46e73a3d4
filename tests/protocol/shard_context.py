"""A small test context around one GroupCoordinator shard driven by a ManualClock.

The defaults follow Kafka's GroupMetadataManagerTestContext where it matters: min session 10 ms,
max session 600000 ms, initial rebalance delay 3000 ms. Members join with a 10 s session and a
30 s rebalance timeout unless a test says otherwise.
"""

from __future__ import annotations

from dataclasses import dataclass, field

from groupcoord.protocol.config import GroupConfig
from groupcoord.protocol.errors import Errors
from groupcoord.protocol.messages import (
    DescribedGroup,
    DescribeGroupsRequest,
    HeartbeatRequest,
    JoinGroupRequest,
    JoinGroupResponse,
    LeaveGroupRequest,
    LeaveGroupResponse,
    MemberIdentity,
    SyncGroupRequest,
    SyncGroupResponse,
)
from groupcoord.protocol.shard.clock import ManualClock
from groupcoord.protocol.shard.coordinator import GroupCoordinator
from groupcoord.protocol.shard.deferred import Deferred
from groupcoord.protocol.shard.log import MemoryLog

GROUP = "group"
SESSION_MS = 10_000
REBALANCE_MS = 30_000
INITIAL_DELAY_MS = 3_000
START_MS = 1_000_000
PROTOCOLS = (("range", b"range-meta"),)


def advance(coord: GroupCoordinator, clock: ManualClock, ms: int) -> None:
    """Move `clock` forward by `ms`, stopping at every timer's deadline on the way to tick `coord` there.

    Deadlines are monotonic times, so the walk is on `clock.monotonic_ms()`.
    """
    target = clock.monotonic_ms() + ms
    while (deadline := coord.next_deadline()) is not None and deadline <= target:
        clock.advance(max(deadline - clock.monotonic_ms(), 0))
        coord.tick()
    clock.advance(target - clock.monotonic_ms())
    coord.tick()


class HeldLog(MemoryLog):
    """A RecordLog that is durable at once, except between hold() and release()."""

    def __init__(self) -> None:
        super().__init__()
        self._durable = 0
        self.held = False

    def append(self, records) -> int:
        end = super().append(records)
        if not self.held:
            self._durable = end
        return end

    @property
    def durable_offset(self) -> int:
        return self._durable

    def hold(self) -> None:
        """Stop making appends durable."""
        self.held = True

    def release(self) -> int:
        """Make everything appended so far durable; returns the new durable offset."""
        self.held = False
        self._durable = len(self.records)
        return self._durable


@dataclass
class Generation:
    """A group after a completed join phase: its generation, leader and members (leader first)."""

    generation: int
    leader: str
    members: list[str]
    responses: dict[str, JoinGroupResponse] = field(default_factory=dict)

    @property
    def followers(self) -> list[str]:
        return [m for m in self.members if m != self.leader]


class ShardContext:
    """One shard with a ManualClock and an in-memory log, plus request helpers."""

    def __init__(self, log: MemoryLog | None = None, clock: ManualClock | None = None, **config) -> None:
        settings = {
            "min_session_timeout_ms": 10,
            "max_session_timeout_ms": 600_000,
            "initial_rebalance_delay_ms": INITIAL_DELAY_MS,
        }
        settings.update(config)
        self.config = GroupConfig(**settings)
        self.clock = clock if clock is not None else ManualClock(START_MS)
        self.log = log if log is not None else MemoryLog()
        self.coord = GroupCoordinator(self.config, self.clock, self.log)

    # --- time and durability -----------------------------------------------------------

    def advance(self, ms: int) -> None:
        """Move the clock forward by `ms`, firing each timer at its own deadline.

        Like the actor that hosts a shard, the clock stops at every deadline on the way and ticks
        there, so timers re-armed by a timer (the initial rebalance delay) keep exact times.
        """
        advance(self.coord, self.clock, ms)

    def release(self) -> None:
        """Make a HeldLog durable and tell the shard."""
        self.coord.on_durable(self.log.release())

    # --- JoinGroup -----------------------------------------------------------------------

    @staticmethod
    def join_request(group_id: str = GROUP, **kw) -> JoinGroupRequest:
        kw.setdefault("session_timeout_ms", SESSION_MS)
        kw.setdefault("rebalance_timeout_ms", REBALANCE_MS)
        kw.setdefault("protocols", PROTOCOLS)
        kw.setdefault("client_id", "client")
        kw.setdefault("client_host", "/127.0.0.1")
        return JoinGroupRequest(group_id, **kw)

    def send_join(self, group_id: str = GROUP, **kw) -> Deferred[JoinGroupResponse]:
        """One JoinGroup request, as is."""
        return self.coord.join_group(self.join_request(group_id, **kw))

    def join(self, group_id: str = GROUP, **kw) -> tuple[str, Deferred[JoinGroupResponse]]:
        """Join as a new member: two phases for a dynamic member, one for a static one.

        Returns the member id and the (usually parked) second JoinGroup.
        """
        instance_id = kw.get("group_instance_id")
        if instance_id is None and kw.get("require_known_member_id", True):
            first = self.send_join(group_id, **kw).result()
            assert first.error == Errors.MEMBER_ID_REQUIRED, first
            kw["member_id"] = first.member_id
            return first.member_id, self.send_join(group_id, **kw)
        pending = self.send_join(group_id, **kw)
        if pending.done() and pending.result().member_id:
            return pending.result().member_id, pending
        members = self.describe(group_id).members
        if instance_id is not None:
            return next(m.member_id for m in members if m.group_instance_id == instance_id), pending
        return members[-1].member_id, pending

    def rejoin(self, group_id: str, member_id: str, **kw) -> Deferred[JoinGroupResponse]:
        """JoinGroup of a known member id."""
        return self.send_join(group_id, member_id=member_id, **kw)

    def join_members(self, n: int, group_id: str = GROUP, **kw) -> Generation:
        """n new dynamic members join an Empty group; the initial delay completes the join phase.

        Members after the first extend the initial delay once (KIP-134), so it may take two delays.
        """
        pending = [self.join(group_id, client_id=f"client-{i}", **kw) for i in range(n)]
        for _ in range(2):
            if not all(d.done() for _, d in pending):
                self.advance(self.config.initial_rebalance_delay_ms)
        return self.generation_of({mid: d.result() for mid, d in pending})

    @staticmethod
    def generation_of(responses: dict[str, JoinGroupResponse]) -> Generation:
        """The generation that a set of successful join responses describe."""
        first = next(iter(responses.values()))
        for mid, r in responses.items():
            assert r.error == Errors.NONE, (mid, r)
            assert r.generation_id == first.generation_id
        leader = first.leader
        members = [leader] + [m for m in responses if m != leader]
        return Generation(first.generation_id, leader, members, dict(responses))

    # --- SyncGroup -----------------------------------------------------------------------

    def send_sync(
        self, group_id: str, generation: int, member_id: str, assignments=None, **kw
    ) -> Deferred[SyncGroupResponse]:
        return self.coord.sync_group(
            SyncGroupRequest(group_id, generation, member_id, assignments=assignments or {}, **kw)
        )

    def sync_all(self, gen: Generation, group_id: str = GROUP, assignments=None) -> dict[str, SyncGroupResponse]:
        """Followers sync first, then the leader with `assignments` (default: b"assignment-<i>")."""
        if assignments is None:
            assignments = {m: f"assignment-{i}".encode() for i, m in enumerate(gen.members)}
        parked = {m: self.send_sync(group_id, gen.generation, m) for m in gen.followers}
        parked[gen.leader] = self.send_sync(group_id, gen.generation, gen.leader, assignments)
        return {m: d.result() for m, d in parked.items()}

    def stable_group(self, n: int, group_id: str = GROUP, **kw) -> Generation:
        """A Stable group of n dynamic members with assignments b"assignment-<i>"."""
        gen = self.join_members(n, group_id, **kw)
        for r in self.sync_all(gen, group_id).values():
            assert r.error == Errors.NONE, r
        return gen

    # --- Heartbeat / LeaveGroup ------------------------------------------------------------

    def heartbeat(self, group_id: str, generation: int, member_id: str, group_instance_id: str | None = None) -> Errors:
        return self.coord.heartbeat(HeartbeatRequest(group_id, generation, member_id, group_instance_id)).result().error

    def leave(self, group_id: str, *members: str | MemberIdentity) -> LeaveGroupResponse:
        """LeaveGroup for member ids (str) or full identities."""
        identities = [m if isinstance(m, MemberIdentity) else MemberIdentity(m) for m in members]
        return self.coord.leave_group(LeaveGroupRequest(group_id, identities)).result()

    # --- DescribeGroups / state ------------------------------------------------------------

    def describe(self, group_id: str = GROUP) -> DescribedGroup:
        return self.coord.describe_groups(DescribeGroupsRequest([group_id])).result().groups[0]

    def group(self, group_id: str = GROUP):
        """The in-memory group itself (answers at once, without waiting for durability)."""
        return self.coord.groups.get_group(group_id)

    def state(self, group_id: str = GROUP) -> str:
        return self.describe(group_id).group_state

    def member_ids(self, group_id: str = GROUP) -> set[str]:
        return {m.member_id for m in self.describe(group_id).members}

    # --- restart ---------------------------------------------------------------------------

    def restart(self, **config) -> ShardContext:
        """A fresh shard (same clock) that has loaded this shard's records."""
        settings = {
            "min_session_timeout_ms": self.config.min_session_timeout_ms,
            "max_session_timeout_ms": self.config.max_session_timeout_ms,
            "initial_rebalance_delay_ms": self.config.initial_rebalance_delay_ms,
            "max_size": self.config.max_size,
        }
        settings.update(config)
        log = MemoryLog()
        log.records.extend(self.log.records)
        fresh = ShardContext(log=log, clock=self.clock, **settings)
        fresh.coord.load(list(self.log.records))
        return fresh
