"""The membership half of a GroupMember: join, sync, the leader's assignment, heartbeats' verdicts.

Shared between the caller's thread (which runs rebalances and listener callbacks) and the
heartbeat thread (which only reads the generation and flags a needed rejoin), under one lock.
"""

from __future__ import annotations

import enum
import logging
import threading
import time
from typing import Any, Callable, Iterable, Protocol

import ray

from groupcoord.protocol import Errors, TopicPartition
from groupcoord.protocol.assignors import Assignor, RebalanceProtocol, assign_metadata, get_assignor
from groupcoord.protocol.consumer_protocol import (
    Subscription,
    decode_assignment,
    decode_subscription,
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
from .handle import Service

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


class RebalanceListener(Protocol):
    """Told about partitions leaving and joining this member; revocations always come first."""

    def on_partitions_revoked(self, revoked: set[TopicPartition]) -> None: ...

    def on_partitions_assigned(self, assigned: set[TopicPartition]) -> None: ...


class MemberState(enum.Enum):
    """Where a member is in Kafka's client-side membership cycle."""

    UNJOINED = "unjoined"
    REBALANCING = "rebalancing"
    STABLE = "stable"


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
        self.metadata_max_age_s = metadata_max_age_ms / 1000
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
        self._fatal: BaseException | None = None
        self._group_topics: set[str] = set()
        self._metadata_snapshot: dict[str, int] = {}
        self._metadata_checked = 0.0

    # --- shared with the heartbeat thread ---------------------------------------------------------

    def set_topics(self, topics: Iterable[str]) -> None:
        topics = {t for t in topics}
        if not all(isinstance(t, str) and t for t in topics):
            raise ValueError(f"topics must be non-empty strings, got {sorted(map(repr, topics))}")
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

    def heartbeat_request(self) -> HeartbeatRequest | None:
        """The heartbeat to send now, or None while not Stable."""
        with self._lock:
            if self.state != MemberState.STABLE:
                return None
            return HeartbeatRequest(self.group_id, self.generation, self.member_id, self.group_instance_id)

    def on_heartbeat(self, request: HeartbeatRequest, error: Errors) -> None:
        """React to a heartbeat's answer, as Kafka's heartbeat thread does."""
        with self._lock:
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
            elif error == Errors.NOT_COORDINATOR:
                self.client.rediscover()

    def raise_if_fatal(self) -> None:
        if self._fatal is not None:
            raise self._fatal

    # --- the rebalance, in the caller's thread ----------------------------------------------------

    def ensure_active(self) -> None:
        """Complete a rebalance if one is needed (calling the listener); the leader also watches metadata."""
        self.raise_if_fatal()
        if self.is_leader and self.is_stable():
            self._maybe_check_metadata()
        with self._lock:
            needed = self._rejoin_needed or self.state != MemberState.STABLE
            lost = self._lost
        if not needed:
            return
        if lost and self.owned:
            self._call(self._on_lost, set(self.owned))
            self.owned = set()
        self._lost = False
        if not self.cooperative and self.owned:
            if self.before_rebalance is not None:
                self.before_rebalance()
            revoked, self.owned = set(self.owned), set()
            self._call(self._on_revoked, revoked)
        self._rebalance()

    def _rebalance(self) -> None:
        while True:
            with self._lock:
                self.state = MemberState.REBALANCING
                self._rejoin_needed = False
            join = self._join()
            if join is None:
                continue
            assignments = self._assign(join.members) if self.is_leader else {}
            request = SyncGroupRequest(
                self.group_id,
                join.generation_id,
                self.member_id,
                self.group_instance_id,
                join.protocol_type,
                join.protocol_name,
                assignments,
            )
            sync = self._call_coordinator("sync_group", request)
            if sync is None:
                continue
            if sync.error != Errors.NONE:
                self._on_sync_error(sync.error)
                continue
            self._install(decode_assignment(sync.assignment).partitions)
            return

    def _join(self) -> Any:
        request = JoinGroupRequest(
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
        response = self._call_coordinator("join_group", request)
        if response is None:
            return None
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
        return response

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

    def _call_coordinator(self, method: str, request: Any) -> Any:
        """One join/sync; None when the coordinator was unreachable (the caller starts the join again)."""
        timeout_s = self.rebalance_timeout_ms / 1000 + self.client.request_timeout_s
        try:
            response = self.client.call_once(method, request, timeout_s=timeout_s)
        except (*ACTOR_ERRORS, ray.exceptions.GetTimeoutError) as e:
            log.info("%s of %s interrupted (%r); starting the join again", method, self.group_id, e)
            self.client.sleep_backoff(1, time.monotonic() + 1)
            self.client.rediscover()
            return None
        if response.error in COORDINATOR_ERRORS:
            self.client.sleep_backoff(1, time.monotonic() + 1)
            if response.error == Errors.NOT_COORDINATOR:
                self.client.rediscover()
            return None
        return response

    def _subscription_bytes(self, assignor: Assignor) -> bytes:
        owned = sorted(self.owned)
        return encode_subscription(
            Subscription(
                topics=sorted(self.topics),
                user_data=assignor.subscription_user_data(owned, self.generation),
                owned_partitions=owned,
                generation_id=self.generation,
            )
        )

    def _assign(self, members: list) -> dict[str, bytes]:
        """The leader's job: run the selected assignor over the members' subscriptions."""
        metadata = {m.member_id: m.metadata for m in members}
        topics = {t for meta in metadata.values() for t in decode_subscription(meta).topics}
        described = ray.get(
            self.service.router.describe_topics.remote(sorted(topics)), timeout=self.client.request_timeout_s
        )
        counts = {t: info["partitions"] for t, info in described.items()}
        missing = topics - set(counts)
        if missing:
            log.warning(
                "group %s subscribes to unknown topics %s; they get no partitions", self.group_id, missing
            )
        self._group_topics = topics
        self._metadata_snapshot = {t: counts.get(t, 0) for t in topics}
        self._metadata_checked = time.monotonic()
        instance_ids = {m.member_id: m.group_instance_id for m in members}
        return assign_metadata(self.protocol_name or "", counts, metadata, instance_ids)

    def _maybe_check_metadata(self) -> None:
        if time.monotonic() - self._metadata_checked < self.metadata_max_age_s:
            return
        self._metadata_checked = time.monotonic()
        try:
            described = ray.get(
                self.service.router.describe_topics.remote(sorted(self._group_topics)),
                timeout=self.client.request_timeout_s,
            )
        except (*ACTOR_ERRORS, ray.exceptions.GetTimeoutError):
            return
        counts = {t: described.get(t, {}).get("partitions", 0) for t in self._group_topics}
        if counts != self._metadata_snapshot:
            log.info(
                "leader of %s saw partition counts change %s -> %s; rebalancing",
                self.group_id,
                self._metadata_snapshot,
                counts,
            )
            with self._lock:
                self._rejoin_needed = True

    def _install(self, partitions: Iterable[TopicPartition]) -> None:
        new = {TopicPartition(*tp) for tp in partitions}
        revoked = self.owned - new
        added = new - self.owned
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
        if member_id and self.group_instance_id is None:
            request = LeaveGroupRequest(self.group_id, [MemberIdentity(member_id, None, reason)])
            try:
                self.client.call("leave_group", request, timeout_s=self.client.request_timeout_s)
            except Exception as e:  # leaving is best effort; the session timeout removes us anyway
                log.info("LeaveGroup of %s failed: %r", self.group_id, e)

    def close(self) -> None:
        """Revoke owned partitions and leave (dynamic members); static members just stop."""
        if self.group_instance_id is None and self.owned:
            revoked, self.owned = set(self.owned), set()
            self._call(self._on_revoked, revoked)
        if self.group_instance_id is None:
            self.leave("the consumer is being closed")
