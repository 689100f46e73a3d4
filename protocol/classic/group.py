"""Classic group and member metadata, and the group state machine."""

from __future__ import annotations

import sys
import uuid
from collections import Counter
from dataclasses import dataclass, field
from operator import attrgetter
from typing import TYPE_CHECKING, Any, Callable, Iterable

from ..assignors.consumer_protocol import subscribed_topics
from ..values import GroupState, GroupType

if TYPE_CHECKING:
    from ..messages import JoinGroupResponse, SyncGroupResponse
    from ..shard.deferred import Deferred


VALID_PREVIOUS_STATES: dict[GroupState, frozenset[GroupState]] = {
    GroupState.EMPTY: frozenset({GroupState.PREPARING_REBALANCE}),
    GroupState.PREPARING_REBALANCE: frozenset(
        {GroupState.STABLE, GroupState.COMPLETING_REBALANCE, GroupState.EMPTY}
    ),
    GroupState.COMPLETING_REBALANCE: frozenset({GroupState.PREPARING_REBALANCE}),
    GroupState.STABLE: frozenset({GroupState.COMPLETING_REBALANCE}),
    GroupState.DEAD: frozenset(GroupState),
}


class IllegalStateTransition(RuntimeError):
    """A transition that Kafka's state table forbids: a bug in the coordinator."""


CONSUMER_PROTOCOL_TYPE = "consumer"

# A member's protocols in its order of preference: (name, metadata) pairs, a tuple since it never grows.
Protocols = tuple[tuple[str, bytes], ...]

# A member's session deadline while it has none: parked in a rebalance, or not yet scheduled.
NO_SESSION_DEADLINE = 2**62
# A member's session deadline, read in C: a sort key, or a min or max over a group's members.
session_deadline: Callable[[Member], int] = attrgetter("session_deadline_ms")


# The "-" and UUID that generate_member_id puts after a member id's prefix.
_UUID_SUFFIX = 37


@dataclass(slots=True, eq=False)
class Member:
    """A group member: identity, timeouts, protocols, assignment and its parked requests."""

    member_id: str
    group_instance_id: str | None
    _client_id: str | None  # None where the member id is the client id + "-" + a UUID, as generated ids are
    client_host: str
    rebalance_timeout_ms: int
    session_timeout_ms: int
    protocol_type: str
    protocols: Protocols
    assignment: bytes = b""
    awaiting_join: Deferred[JoinGroupResponse] | None = field(default=None, init=False)
    awaiting_sync: Deferred[SyncGroupResponse] | None = field(default=None, init=False)
    is_new: bool = field(default=False, init=False)
    # When the member's session ends, on the coordinator's clock: its group's session timer looks here.
    session_deadline_ms: int = field(default=NO_SESSION_DEADLINE, init=False)

    def __post_init__(self) -> None:
        # Hosts and protocol types repeat across a shard's members: one string each, not one per member.
        self.client_host = sys.intern(self.client_host)
        self.protocol_type = sys.intern(self.protocol_type)
        client_id, member_id = self._client_id, self.member_id
        if (client_id is not None and len(member_id) == len(client_id) + _UUID_SUFFIX
                and member_id.startswith(client_id) and member_id[len(client_id)] == "-"):
            self._client_id = None

    @property
    def client_id(self) -> str:
        """The client id the member joined with."""
        return self.member_id[:-_UUID_SUFFIX] if self._client_id is None else self._client_id

    @property
    def is_static(self) -> bool:
        """Whether the member has a group instance id (KIP-345 static membership)."""
        return self.group_instance_id is not None

    @property
    def is_awaiting_join(self) -> bool:
        """Whether a JoinGroup of this member is parked."""
        return self.awaiting_join is not None

    @property
    def is_awaiting_sync(self) -> bool:
        """Whether a SyncGroup of this member is parked."""
        return self.awaiting_sync is not None

    def protocol_names(self) -> list[str]:
        """The names of the protocols the member supports, in its order of preference."""
        return [name for name, _ in self.protocols]

    def metadata(self, protocol: str) -> bytes:
        """This member's metadata for `protocol` (empty if it does not support it)."""
        for name, meta in self.protocols:
            if name == protocol:
                return meta
        return b""

    def matches(self, protocols: Iterable[tuple[str, bytes]]) -> bool:
        """Same protocols, in the same order, with byte-equal metadata."""
        return self.protocols == tuple((n, bytes(m)) for n, m in protocols)

    def vote(self, candidates: set[str]) -> str:
        """The first protocol of this member's preference list that every member supports."""
        for name, _ in self.protocols:
            if name in candidates:
                return name
        raise IllegalStateTransition(f"member {self.member_id} supports none of {sorted(candidates)}")

    def has_satisfied_heartbeat(self) -> bool:
        """Whether a session expiry should spare this member (it is parked in a rebalance)."""
        if self.is_new:
            return False
        return self.is_awaiting_join or self.is_awaiting_sync


class ClassicGroup:
    """A classic consumer group: its state, generation, protocol, leader and members."""

    group_type = GroupType.CLASSIC

    def __init__(self, group_id: str, now_ms: int, state: GroupState = GroupState.EMPTY) -> None:
        self.group_id = group_id
        self.state = state
        self.previous_state: GroupState | None = None
        self.state_timestamp_ms: int | None = now_ms
        self.generation_id = 0
        self.protocol_type: str | None = None
        self.protocol_name: str | None = None
        self.leader_id: str | None = None
        self.members: dict[str, Member] = {}
        self.static_members: dict[str, str] = {}
        self.pending_members: set[str] = set()
        self.pending_sync_members: set[str] = set()
        self.num_awaiting_join = 0
        self.new_member_added = False
        self.rebalance_started_ms: int | None = None  # when the current rebalance began (in memory only)
        self._protocol_counts: Counter[str] = Counter()
        # The topics of the members of the current generation, taken when it started (or was loaded), as
        # Kafka's ClassicGroup keeps them: a member joining mid-rebalance does not count until the next one.
        self._subscribed: set[str] | None = None
        self._last_protocols: Protocols = ()

    # --- state ---------------------------------------------------------------------------

    def in_state(self, *states: GroupState) -> bool:
        """Whether the group is in any of `states`."""
        return self.state in states

    def transition_to(self, target: GroupState, now_ms: int) -> None:
        """Move to `target`; a transition Kafka's table forbids raises IllegalStateTransition."""
        if self.state not in VALID_PREVIOUS_STATES[target]:
            raise IllegalStateTransition(
                f"group {self.group_id!r} cannot go from {self.state.value} to {target.value}"
            )
        self.previous_state = self.state
        self.state = target
        self.state_timestamp_ms = now_ms

    def can_rebalance(self) -> bool:
        """Whether the group may move to PreparingRebalance from its current state."""
        return self.state in (GroupState.STABLE, GroupState.COMPLETING_REBALANCE, GroupState.EMPTY)

    # --- members -------------------------------------------------------------------------

    def is_leader(self, member_id: str) -> bool:
        """Whether `member_id` is the group's leader."""
        return self.leader_id == member_id

    def has_member(self, member_id: str) -> bool:
        """Whether `member_id` is a member (pending member ids are not)."""
        return member_id in self.members

    def is_pending_member(self, member_id: str) -> bool:
        """Whether `member_id` was handed out by a JoinGroup and has not joined with it yet (KIP-394)."""
        return member_id in self.pending_members

    def static_member_id(self, instance_id: str | None) -> str | None:
        """The member id of the static member with this group instance id, or None."""
        return None if instance_id is None else self.static_members.get(instance_id)

    def is_empty(self) -> bool:
        """Whether the group has no members."""
        return not self.members

    def shared_protocols(self, protocols: Iterable[tuple[str, Any]]) -> Protocols:
        """`protocols` as a member keeps them: the very tuple the group's last member got where equal, since a
        group's members mostly send the same subscription (a copy each took 170 B per member)."""
        built = tuple((sys.intern(name), bytes(metadata)) for name, metadata in protocols)
        if built == self._last_protocols:
            return self._last_protocols
        self._last_protocols = built
        return built

    def add(self, member: Member, join: "Deferred[JoinGroupResponse] | None" = None) -> None:
        """Add a member (the first one fixes the protocol type and becomes leader)."""
        if not self.members:
            self.protocol_type = member.protocol_type
        if self.leader_id is None:
            self.leader_id = member.member_id
        if member.group_instance_id is not None:
            self.static_members[member.group_instance_id] = member.member_id
        self.members[member.member_id] = member
        self._protocol_counts.update(member.protocol_names())
        if join is not None:
            member.awaiting_join = join
            self.num_awaiting_join += 1
        self.pending_members.discard(member.member_id)

    def remove(self, member_id: str) -> Member | None:
        """Remove a member or pending member; a removed leader is replaced by any remaining member."""
        if member_id in self.pending_members:
            self.pending_members.discard(member_id)
            return None
        member = self.members.pop(member_id, None)
        if member is None:
            return None
        self._protocol_counts.subtract(member.protocol_names())
        if member.is_awaiting_join:
            self.num_awaiting_join -= 1
        if member.group_instance_id is not None:
            self.static_members.pop(member.group_instance_id, None)
        if self.leader_id == member_id:
            self.leader_id = next(iter(self.members), None)
        self.drop_pending_sync(member_id)
        return member

    def update_member(
        self,
        member: Member,
        protocols: Protocols,
        rebalance_timeout_ms: int,
        session_timeout_ms: int,
        join: "Deferred[JoinGroupResponse] | None",
    ) -> "Deferred[JoinGroupResponse] | None":
        """Replace a member's protocols, timeouts and parked join; returns the join it replaced."""
        self._protocol_counts.subtract(member.protocol_names())
        member.protocols = protocols
        self._protocol_counts.update(member.protocol_names())
        member.rebalance_timeout_ms = rebalance_timeout_ms
        member.session_timeout_ms = session_timeout_ms
        replaced = member.awaiting_join
        if join is not None and replaced is None:
            self.num_awaiting_join += 1
        elif join is None and replaced is not None:
            self.num_awaiting_join -= 1
        member.awaiting_join = join
        return replaced

    def take_join(self, member: Member) -> "Deferred[JoinGroupResponse] | None":
        """Unpark a member's JoinGroup, returning it to be answered."""
        join = member.awaiting_join
        if join is not None:
            member.awaiting_join = None
            self.num_awaiting_join -= 1
        return join

    def take_sync(self, member: Member) -> "Deferred[SyncGroupResponse] | None":
        """Unpark a member's SyncGroup, returning it to be answered."""
        sync, member.awaiting_sync = member.awaiting_sync, None
        return sync

    def replace_static_member(self, instance_id: str, old_id: str, new_id: str) -> tuple[Member, Member]:
        """Move a static member to a new member id; returns (old record, new member)."""
        old = self.members.pop(old_id)
        new = Member(
            new_id,
            old.group_instance_id,
            old.client_id,
            old.client_host,
            old.rebalance_timeout_ms,
            old.session_timeout_ms,
            old.protocol_type,
            old.protocols,
            old.assignment,
        )
        self.members[new_id] = new
        if self.leader_id == old_id:
            self.leader_id = new_id
        self.static_members[instance_id] = new_id
        if old_id in self.pending_sync_members:
            self.pending_sync_members.discard(old_id)
            self.pending_sync_members.add(new_id)
        return old, new

    def all_sessions_ended(self, now_ms: int) -> bool:
        """Whether every member's session has ended by `now_ms` (its session timer may then empty the group)."""
        return max(map(session_deadline, self.members.values()), default=now_ms) <= now_ms

    def drop_pending_sync(self, member_id: str) -> None:
        """The member no longer holds the generation's sync phase open: it asked for its assignment, or left."""
        pending = self.pending_sync_members
        pending.discard(member_id)
        if not pending:
            pending.clear()  # a set keeps its largest table until cleared: ~80 B per member of a big group

    def has_all_members_joined(self) -> bool:
        """Whether every member has a parked JoinGroup and no pending member id is outstanding."""
        return len(self.members) == self.num_awaiting_join and not self.pending_members

    def not_yet_rejoined(self) -> list[Member]:
        """The members without a parked JoinGroup in this rebalance."""
        return [m for m in self.members.values() if not m.is_awaiting_join]

    def rebalance_timeout_ms(self) -> int:
        """The group's rebalance timeout: the largest of its members'."""
        return max((m.rebalance_timeout_ms for m in self.members.values()), default=0)

    def maybe_elect_new_joined_leader(self) -> bool:
        """Keep a leader that rejoined, or pick any member that did; False if nobody rejoined."""
        if self.leader_id is None:
            return False
        leader = self.members.get(self.leader_id)
        if leader is not None and leader.is_awaiting_join:
            return True
        for m in self.members.values():
            if m.is_awaiting_join:
                self.leader_id = m.member_id
                return True
        return False

    # --- protocols -----------------------------------------------------------------------

    def candidate_protocols(self) -> set[str]:
        """The protocols every member supports."""
        n = len(self.members)
        return {name for name, count in self._protocol_counts.items() if count == n and n > 0}

    def supports_protocols(self, protocol_type: str, names: Iterable[str]) -> bool:
        """Whether a member with this protocol type and protocol list may join."""
        names = list(names)
        if self.state == GroupState.EMPTY:
            return bool(protocol_type) and bool(names)
        n = len(self.members)
        return self.protocol_type == protocol_type and any(self._protocol_counts[p] == n for p in names)

    def select_protocol(self) -> str:
        """The protocol most members vote for among those every member supports."""
        candidates = self.candidate_protocols()
        votes: Counter[str] = Counter(m.vote(candidates) for m in self.members.values())
        return max(votes, key=lambda p: votes[p])

    # --- assignment and generations ------------------------------------------------------

    def init_next_generation(self, now_ms: int) -> None:
        """Start the next generation: CompletingRebalance with members, Empty without."""
        self.generation_id += 1
        if self.members:
            self.protocol_name = self.select_protocol()
            self.transition_to(GroupState.COMPLETING_REBALANCE, now_ms)
        else:
            self.protocol_name = None
            self.transition_to(GroupState.EMPTY, now_ms)
        self.remember_subscribed_topics()
        self.pending_sync_members.clear()

    def subscribed_topics(self) -> set[str] | None:
        """Topics the current generation's members subscribe to (consumer protocol), or None when they cannot be
        known (no generation yet, or metadata that does not parse)."""
        return self._subscribed

    def remember_subscribed_topics(self) -> None:
        """Take the members' topics as the generation's (at its start, or when the group is loaded)."""
        self._subscribed = self._compute_subscribed_topics()

    def _compute_subscribed_topics(self) -> set[str] | None:
        if self.protocol_type != CONSUMER_PROTOCOL_TYPE or self.protocol_name is None:
            return None if self.members else set()
        topics: set[str] = set()
        for m in self.members.values():
            found = subscribed_topics(m.metadata(self.protocol_name))
            if found is None:
                return None
            topics |= found
        return topics


def generate_member_id(client_id: str, group_instance_id: str | None) -> str:
    """Kafka's member id: `<group_instance_id or client_id>-<uuid4>`."""
    prefix = group_instance_id if group_instance_id is not None else client_id
    return f"{prefix}-{uuid.uuid4()}"
