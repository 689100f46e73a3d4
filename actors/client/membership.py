"""The membership half of a GroupMember: join, sync, the leader's assignment, heartbeats' verdicts.

Shared between the caller's thread (which runs rebalances and listener callbacks) and the
heartbeat thread (which only reads the generation and flags a needed rejoin), under one lock.
A rebalance is a join and a sync in flight (exchange.Exchange): poll() collects their answers
until its own deadline and returns, and the next poll goes on. Each join starts a new epoch; a
heartbeat answer or a reset from an earlier epoch cannot undo a later join.
"""

from __future__ import annotations

import enum
import logging
import threading
import time
from typing import Any, Callable, Iterable, Protocol

from groupcoord.protocol import Errors, TopicPartition
from groupcoord.protocol.apis import Api
from groupcoord.protocol.assignors import Assignor, RebalanceProtocol, get_assignor
from groupcoord.protocol.assignors.consumer_protocol import (
    Subscription,
    decode_assignment,
    encode_subscription,
)
from groupcoord.protocol.messages import (
    HeartbeatRequest,
    JoinGroupRequest,
    LeaveGroupRequest,
    MemberIdentity,
    SyncGroupRequest,
)

from .coordinator_client import ACTOR_ERRORS, COORDINATOR_ERRORS, CoordinatorClient
from .errors import error_for
from .exchange import Exchange, PollDeadline
from .handle import Service
from .leader import LeaderMetadata

log = logging.getLogger(__name__)

_FATAL_JOIN_ERRORS = frozenset(
    {
        Errors.INCONSISTENT_GROUP_PROTOCOL,
        Errors.INVALID_SESSION_TIMEOUT,
        Errors.INVALID_GROUP_ID,
        Errors.GROUP_MAX_SIZE_REACHED,
        Errors.FENCED_INSTANCE_ID,
        Errors.INVALID_REQUEST,
    }
)


def topic_set(topics: Iterable[str]) -> set[str]:
    """The topics of a subscription as a set; ValueError naming the bad ones unless all are non-empty str."""
    topics = set(topics)
    if not all(isinstance(t, str) and t for t in topics):
        raise ValueError(f"topics must be non-empty strings, got {sorted(map(repr, topics))}")
    return topics


class RebalanceListener(Protocol):
    """Told about partitions leaving and joining this member; revocations always come first."""

    def on_partitions_revoked(self, revoked: set[TopicPartition]) -> None: ...

    def on_partitions_assigned(self, assigned: set[TopicPartition]) -> None: ...


class MemberState(enum.Enum):
    """Where a member is in Kafka's client-side membership cycle (AbstractCoordinator.MemberState)."""

    UNJOINED = "unjoined"
    REBALANCING = "rebalancing"  # Kafka's PREPARING_REBALANCE: a JoinGroup is in flight
    COMPLETING_REBALANCE = "completing-rebalance"  # joined: the SyncGroup is in flight
    STABLE = "stable"


# States in which the member heartbeats: from its join's answer until it leaves, as Kafka's.
_HEARTBEATING = (MemberState.COMPLETING_REBALANCE, MemberState.STABLE)
_RETRY = object()  # an exchange that ended without an answer to act on: join again


class Membership:
    """One member's view of its group: identity, generation, owned partitions, and the rebalance loop."""

    def __init__(
        self,
        service: Service,
        group_id: str,
        *,
        client_id: str,
        client_host: str,
        group_instance_id: str | None,
        session_timeout_ms: int,
        rebalance_timeout_ms: int,
        assignors: tuple[str, ...],
        listener: RebalanceListener | None,
        on_revoked: Callable[[set[TopicPartition]], None] | None,
        on_assigned: Callable[[set[TopicPartition]], None] | None,
        client: CoordinatorClient,
        metadata_max_age_ms: int,
        before_rebalance: Callable[[], None] | None = None,
        clock: Callable[[], float] = time.monotonic,
    ) -> None:
        if not assignors:
            raise ValueError("partition_assignment_strategy needs at least one assignor")
        self._assignors = [get_assignor(name) for name in assignors]
        self.service = service
        self.group_id = group_id
        self.client_id = client_id
        self.client_host = client_host
        self.group_instance_id = group_instance_id
        self.session_timeout_ms = session_timeout_ms
        self.rebalance_timeout_ms = rebalance_timeout_ms
        self.client = client
        self.clock = clock
        self.before_rebalance = before_rebalance
        self._on_revoked = on_revoked or (listener.on_partitions_revoked if listener else None)
        self._on_assigned = on_assigned or (listener.on_partitions_assigned if listener else None)
        self._on_lost = getattr(listener, "on_partitions_lost", None) or self._on_revoked
        self.cooperative = all(
            RebalanceProtocol.COOPERATIVE in a.supported_protocols for a in self._assignors
        )
        self._lock = threading.RLock()
        self.state = MemberState.UNJOINED
        self.member_id = ""
        self.generation = -1
        self.protocol_name: str | None = None
        self.is_leader = False
        self.topics: set[str] = set()
        self.owned: set[TopicPartition] = set()
        self._rejoin_needed = True
        self._lost = False
        self._epoch = 0  # bumped by every join sent and every reset of the generation
        self._heartbeat_epoch = -1  # the epoch of the last heartbeat handed out
        self._exchange: Exchange | None = None
        self._last_assignment: list[TopicPartition] = []  # for the sticky assignors' user data
        self._last_assignment_generation = -1
        self._fatal: BaseException | None = None
        self._leader = LeaderMetadata(client, group_id, metadata_max_age_ms / 1000, clock)

    # --- shared with the heartbeat thread ---------------------------------------------------------

    def set_topics(self, topics: Iterable[str]) -> None:
        """Subscribe to these topics; a change makes the next poll rejoin."""
        topics = topic_set(topics)
        with self._lock:
            if topics != self.topics:
                self.topics = topics
                self._rejoin_needed = True

    def is_stable(self) -> bool:
        with self._lock:
            return self.state == MemberState.STABLE

    @property
    def rejoin_needed(self) -> bool:
        """Whether the next poll will rejoin the group."""
        with self._lock:
            return self._rejoin_needed

    def request_rejoin(self, reset_member: bool = False, lost: bool = True) -> None:
        """Rejoin at the next poll; with `lost`, the generation is gone and owned partitions are lost."""
        with self._lock:
            self._rejoin_needed = True
            if lost:
                self._reset_generation(reset_member)

    def _reset_generation(self, reset_member: bool) -> None:
        self.generation = -1
        if reset_member:
            self.member_id = ""
        self.state = MemberState.UNJOINED
        self._lost = True
        self._epoch += 1  # an exchange in flight belongs to the generation just lost

    def heartbeat_request(self) -> HeartbeatRequest | None:
        """The heartbeat to send now: from the join's answer until leaving (CompletingRebalance and Stable)."""
        with self._lock:
            if self.state not in _HEARTBEATING or self.generation < 0:
                return None
            self._heartbeat_epoch = self._epoch
            return HeartbeatRequest(self.group_id, self.generation, self.member_id, self.group_instance_id)

    def on_heartbeat(self, request: HeartbeatRequest, error: Errors) -> None:
        """React to a heartbeat's answer, as Kafka's heartbeat thread does; one from before a later join is stale."""
        with self._lock:
            if self._heartbeat_epoch != self._epoch:
                return
            if request.generation_id != self.generation or request.member_id != self.member_id:
                return
            if error == Errors.REBALANCE_IN_PROGRESS:
                self._rejoin_needed = True
            elif error in (Errors.ILLEGAL_GENERATION, Errors.UNKNOWN_MEMBER_ID):
                log.info("member %s of %s must rejoin: %s", self.member_id, self.group_id, error.name)
                self._rejoin_needed = True
                self._reset_generation(reset_member=error == Errors.UNKNOWN_MEMBER_ID)
            elif error == Errors.FENCED_INSTANCE_ID:
                self._fatal = error_for(
                    error, f"instance {self.group_instance_id!r} was fenced by a newer member"
                )
                self.state = MemberState.UNJOINED
            elif error in (Errors.GROUP_AUTHORIZATION_FAILED, Errors.SASL_AUTHENTICATION_FAILED):
                self._fatal = error_for(error, f"heartbeat of {self.member_id!r} to {self.group_id!r} refused")
            elif error == Errors.NOT_COORDINATOR:
                self.client.rediscover()

    def raise_if_fatal(self) -> None:
        if self._fatal is not None:
            raise self._fatal

    # --- the rebalance, in the caller's thread ----------------------------------------------------

    def ensure_active(self, deadline: float | None = None) -> bool:
        """Complete a rebalance if one is needed (calling the listener), by `deadline` (time.monotonic()).

        True once the member is Stable; False when the deadline came first (the join or sync stays in
        flight and the next call goes on with it). The leader also watches the topics' metadata.
        """
        self.raise_if_fatal()
        if self.is_leader and self.is_stable() and self._leader.changed():
            with self._lock:
                self._rejoin_needed = True
        with self._lock:
            needed = self._rejoin_needed or self.state != MemberState.STABLE
            lost, self._lost = self._lost, False
        if not needed and self._exchange is None:
            return True
        if lost and self.owned:
            self._call(self._on_lost, set(self.owned))
            self.owned = set()
        if self._exchange is None and not self.cooperative and self.owned:
            if self.before_rebalance is not None:
                self.before_rebalance()
            revoked, self.owned = set(self.owned), set()
            self._call(self._on_revoked, revoked)
        try:
            self._rebalance(deadline)
        except PollDeadline:
            return False
        return True

    def _rebalance(self, deadline: float | None) -> None:
        """Send or resume the join and the sync until the member is Stable; PollDeadline if `deadline` comes first."""
        while True:
            exchange = self._exchange
            if exchange is None:
                with self._lock:
                    self.state = MemberState.REBALANCING
                    self._rejoin_needed = False
                    self._epoch += 1
                    epoch = self._epoch
                exchange = self._exchange = self._send(Api.JOIN_GROUP, self._join_request(), epoch)
            response = self._collect(exchange, deadline)
            self._exchange = None
            if response is _RETRY:
                continue
            if exchange.method == Api.JOIN_GROUP:
                join = self._on_join(response)
                if join is not None:
                    assignments = self._leader.assign(self.protocol_name or "", join.members) if self.is_leader else {}
                    request = SyncGroupRequest(
                        self.group_id,
                        join.generation_id,
                        self.member_id,
                        self.group_instance_id,
                        join.protocol_type,
                        join.protocol_name,
                        assignments,
                    )
                    self._exchange = self._send(Api.SYNC_GROUP, request, exchange.epoch)
                continue
            if self._on_sync(response):
                return

    def _send(self, method: str, request: Any, epoch: int) -> Exchange:
        return Exchange.send(self.client, method, request, epoch, self.rebalance_timeout_ms, self.clock)

    def _collect(self, exchange: Exchange, deadline: float | None) -> Any:
        """The exchange's answer, or _RETRY when it failed in a way that means joining again."""
        try:
            response = exchange.collect(deadline, self.clock)
        except PollDeadline:
            self._exchange = exchange  # still in flight: the next poll collects it
            raise
        except (*ACTOR_ERRORS, TimeoutError) as e:
            log.info("%s of %s interrupted (%r); starting the join again", exchange.method, self.group_id, e)
            self._backoff(deadline)
            self.client.rediscover()
            return _RETRY
        if response.error in COORDINATOR_ERRORS:
            self._backoff(deadline)
            if response.error == Errors.NOT_COORDINATOR:
                self.client.rediscover()
            return _RETRY
        with self._lock:
            if exchange.epoch != self._epoch:
                # The member was reset (lost, left) while this was in flight: it answers nothing now.
                log.info("%s of %s answered after a reset; joining again", exchange.method, self.group_id)
                return _RETRY
        return response

    def _backoff(self, deadline: float | None) -> None:
        """Back off before joining again: up to a second, never past the poll's deadline."""
        wait_s = 1.0 if deadline is None else min(1.0, deadline - self.clock())
        if wait_s > 0:
            self.client.sleep_backoff(1, time.monotonic() + wait_s)

    def _join_request(self) -> JoinGroupRequest:
        return JoinGroupRequest(
            self.group_id,
            self.session_timeout_ms,
            self.rebalance_timeout_ms,
            member_id=self.member_id,
            group_instance_id=self.group_instance_id,
            protocol_type="consumer",
            protocols=[(a.name, self._subscription_bytes(a)) for a in self._assignors],
            client_id=self.client_id,
            client_host=self.client_host,
        )

    def _on_join(self, response: Any) -> Any:
        """Take a JoinGroup answer: the joined response, or None to join again (raises for fatal errors)."""
        error = response.error
        if error == Errors.MEMBER_ID_REQUIRED:
            self.member_id = response.member_id
            return None
        if error == Errors.UNKNOWN_MEMBER_ID:
            self.member_id = ""
            return None
        if error in (Errors.ILLEGAL_GENERATION, Errors.REBALANCE_IN_PROGRESS):
            return None
        if error in _FATAL_JOIN_ERRORS:
            exc = error_for(error, f"JoinGroup of {self.group_id!r} failed: {error.name}")
            if error == Errors.FENCED_INSTANCE_ID:
                self._fatal = exc
            raise exc
        if error != Errors.NONE:
            raise error_for(error, f"JoinGroup of {self.group_id!r} failed: {error.name}")
        with self._lock:
            self.member_id = response.member_id
            self.generation = response.generation_id
            self.protocol_name = response.protocol_name
            self.is_leader = response.leader == response.member_id
            self.state = MemberState.COMPLETING_REBALANCE  # heartbeats go on while the sync is pending
        return response

    def _on_sync(self, response: Any) -> bool:
        """Take a SyncGroup answer: True once the assignment is installed, False to join again."""
        if response.error != Errors.NONE:
            self._on_sync_error(response.error)
            return False
        self._install(decode_assignment(response.assignment).partitions, response_generation=self.generation)
        return True

    def _on_sync_error(self, error: Errors) -> None:
        if error == Errors.FENCED_INSTANCE_ID:
            self._fatal = error_for(
                error, f"instance {self.group_instance_id!r} was fenced by a newer member"
            )
            raise self._fatal
        with self._lock:
            if error in (Errors.ILLEGAL_GENERATION, Errors.UNKNOWN_MEMBER_ID):
                self.generation = -1
                if error == Errors.UNKNOWN_MEMBER_ID:
                    self.member_id = ""
            elif error not in (Errors.REBALANCE_IN_PROGRESS, *COORDINATOR_ERRORS):
                raise error_for(error, f"SyncGroup of {self.group_id!r} failed: {error.name}")

    def _subscription_bytes(self, assignor: Assignor) -> bytes:
        """The subscription: owned partitions (empty after an eager revocation) and the assignor's user data.

        The user data is built from the last assignment received and its generation, as Kafka's
        assignors keep them from onAssignment: the eager sticky assignor reads them from there.
        """
        owned = sorted(self.owned)
        return encode_subscription(
            Subscription(
                topics=sorted(self.topics),
                user_data=assignor.subscription_user_data(self._last_assignment, self._last_assignment_generation),
                owned_partitions=owned,
                generation_id=self.generation,
            )
        )

    def _install(self, partitions: Iterable[TopicPartition], response_generation: int) -> None:
        new = {TopicPartition(*tp) for tp in partitions}
        revoked = self.owned - new
        added = new - self.owned
        self._last_assignment = sorted(new)
        self._last_assignment_generation = response_generation
        with self._lock:
            self.state = MemberState.STABLE
        if self.cooperative:
            if revoked:
                self.owned = self.owned - revoked
                self._call(self._on_revoked, revoked)
                with self._lock:
                    self._rejoin_needed = True  # hand the revoked partitions out in a follow-up rebalance
            self.owned = set(new)
            self._call(self._on_assigned, added)
        else:
            self.owned = set(new)
            self._call(self._on_assigned, set(new))

    @staticmethod
    def _call(
        callback: Callable[[set[TopicPartition]], None] | None, partitions: set[TopicPartition]
    ) -> None:
        if callback is not None:
            callback(set(partitions))

    # --- leaving --------------------------------------------------------------------------------------

    def leave(self, reason: str) -> None:
        """Leave the group now (dynamic members); owned partitions count as lost at the next poll."""
        with self._lock:
            member_id = self.member_id
            self._rejoin_needed = True
            self._reset_generation(reset_member=True)
            self._exchange = None
        if member_id and self.group_instance_id is None:
            request = LeaveGroupRequest(self.group_id, [MemberIdentity(member_id, None, reason)])
            try:
                self.client.call(Api.LEAVE_GROUP, request, timeout_s=self.client.request_timeout_s)
            except Exception as e:  # leaving is best effort; the session timeout removes us anyway
                log.info("LeaveGroup of %s failed: %r", self.group_id, e)

    def close(self) -> None:
        """Revoke owned partitions and leave (dynamic members); static members just stop."""
        if self.group_instance_id is None and self.owned:
            revoked, self.owned = set(self.owned), set()
            self._call(self._on_revoked, revoked)
        if self.group_instance_id is None:
            self.leave("the consumer is being closed")
