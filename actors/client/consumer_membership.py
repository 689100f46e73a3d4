"""The membership half of a GroupMember on the consumer group protocol (KIP-848): one heartbeat does it all.

The coordinator assigns; the member only reconciles. A heartbeat (from the background thread at
the interval the coordinator gives, or at once from poll() when there is news to report) says
which partitions the member owns; its answer may carry a new assignment. poll() then runs the
listener in the caller's thread — revoked partitions first — and reports the new ownership in
the next heartbeat, which is what acknowledges a revocation to the coordinator.
"""

from __future__ import annotations

import logging
import threading
import time
from typing import Any, Callable, Iterable

import ray

from groupcoord.protocol import Errors, TopicPartition
from groupcoord.protocol.apis import Api
from groupcoord.protocol.consumer.messages import (
    LEAVE_GROUP_MEMBER_EPOCH,
    LEAVE_GROUP_STATIC_MEMBER_EPOCH,
    ConsumerGroupHeartbeatRequest,
    ConsumerGroupHeartbeatResponse,
)

from .coordinator_client import ACTOR_ERRORS, COORDINATOR_ERRORS, CoordinatorClient, ray_session_ended
from .errors import error_for
from .membership import RebalanceListener, topic_set

log = logging.getLogger(__name__)

# Errors after which the member cannot go on (Kafka's consumer raises them from poll()).
_FATAL = frozenset(Errors[name] for name in (
    "GROUP_MAX_SIZE_REACHED", "UNSUPPORTED_ASSIGNOR", "UNRELEASED_INSTANCE_ID", "FENCED_INSTANCE_ID",
    "INVALID_REQUEST", "GROUP_ID_NOT_FOUND", "GROUP_AUTHORIZATION_FAILED", "TOPIC_AUTHORIZATION_FAILED",
    "SASL_AUTHENTICATION_FAILED",
))  # fmt: skip


class ConsumerMembership:
    """One member's view of a consumer group: member id and epoch, owned partitions, the assignment to reach."""

    def __init__(
        self,
        group_id: str,
        *,
        client: CoordinatorClient,
        client_id: str,
        client_host: str,
        group_instance_id: str | None,
        rebalance_timeout_ms: int,
        server_assignor: str | None,
        rack_id: str | None,
        listener: RebalanceListener | None,
        on_revoked: Callable[[set[TopicPartition]], None] | None,
        on_assigned: Callable[[set[TopicPartition]], None] | None,
        before_rebalance: Callable[[], None] | None = None,
    ) -> None:
        self.group_id = group_id
        self.client = client
        self.client_id = client_id
        self.client_host = client_host
        self.group_instance_id = group_instance_id
        self.rebalance_timeout_ms = rebalance_timeout_ms
        self.server_assignor = server_assignor
        self.rack_id = rack_id
        self.before_rebalance = before_rebalance
        self._on_revoked = on_revoked or (listener.on_partitions_revoked if listener else None)
        self._on_assigned = on_assigned or (listener.on_partitions_assigned if listener else None)
        self._on_lost = getattr(listener, "on_partitions_lost", None) or self._on_revoked
        self._lock = threading.RLock()
        self._send_lock = threading.Lock()  # one heartbeat in flight, answers applied in order
        self.member_id = ""
        self.epoch = 0
        self.topics: set[str] = set()
        self.owned: set[TopicPartition] = set()
        self.heartbeat_interval_s = 5.0
        self._target: set[TopicPartition] | None = None  # the last assignment the coordinator sent
        self._lost = False
        self._subscription_sent = False
        self._fatal: BaseException | None = None
        self._left = False
        self.last_heartbeat = 0.0  # time.monotonic() of the last heartbeat sent

    # --- what GroupMember reads ------------------------------------------------------------------

    @property
    def generation(self) -> int:
        """The member epoch (what an OffsetCommit carries as its generation)."""
        return self.epoch

    def set_topics(self, topics: Iterable[str]) -> None:
        """Subscribe to these topics; the next heartbeat tells the coordinator."""
        topics = topic_set(topics)
        with self._lock:
            if topics != self.topics:
                self.topics = topics
                self._subscription_sent = False

    def is_stable(self) -> bool:
        """Whether the member is in the group and owns what it was last assigned."""
        with self._lock:
            return self.epoch > 0 and (self._target is None or self._target == self.owned)

    @property
    def rejoin_needed(self) -> bool:
        """Whether the next poll joins the group (again)."""
        with self._lock:
            return self.epoch == 0

    def request_rejoin(self, reset_member: bool = False, lost: bool = True) -> None:
        """Start again from epoch 0 (owned partitions are lost) after the coordinator fenced this member."""
        with self._lock:
            self._fence(reset_member)

    def _fence(self, reset_member: bool) -> None:
        self.epoch = 0
        if reset_member:
            self.member_id = ""
        self._target = None
        self._lost = True
        self._subscription_sent = False

    def raise_if_fatal(self) -> None:
        """Raise the error that ended this member, if any."""
        if self._fatal is not None:
            raise self._fatal

    # --- heartbeats --------------------------------------------------------------------------------

    def _request(self) -> ConsumerGroupHeartbeatRequest:
        with self._lock:
            joining = self.epoch == 0
            full = joining or not self._subscription_sent
            return ConsumerGroupHeartbeatRequest(
                self.group_id,
                member_id=self.member_id,
                member_epoch=self.epoch,
                instance_id=self.group_instance_id,
                rack_id=self.rack_id,
                rebalance_timeout_ms=self.rebalance_timeout_ms if full else -1,
                subscribed_topic_names=sorted(self.topics) if full else None,
                server_assignor=self.server_assignor if full else None,
                topic_partitions=[] if joining else sorted(self.owned),
                client_id=self.client_id,
                client_host=self.client_host,
            )

    def heartbeat(self, timeout_s: float | None = None) -> None:
        """Send one heartbeat now and apply its answer; unreachable coordinators are retried at the next one."""
        if self._fatal is not None or self._left or not self.topics:
            return
        with self._send_lock:
            self.last_heartbeat = time.monotonic()
            request = self._request()
            try:
                response = self.client.call_once(Api.CONSUMER_GROUP_HEARTBEAT, request, timeout_s=timeout_s)
            except (*ACTOR_ERRORS, ray.exceptions.GetTimeoutError) as e:
                log.debug("heartbeat of %s to %s failed (%r)", self.member_id, self.group_id, e)
                return
            self._on_response(request, response)

    def _on_response(self, request: ConsumerGroupHeartbeatRequest, response: ConsumerGroupHeartbeatResponse) -> None:
        error = response.error
        with self._lock:
            if error == Errors.NONE:
                self.member_id = response.member_id or self.member_id
                self.epoch = response.member_epoch
                if response.heartbeat_interval_ms > 0:
                    self.heartbeat_interval_s = response.heartbeat_interval_ms / 1000
                if request.subscribed_topic_names is not None and set(request.subscribed_topic_names) == self.topics:
                    self._subscription_sent = True
                if response.assignment is not None:
                    self._target = set(response.assignment)
            elif error in (Errors.FENCED_MEMBER_EPOCH, Errors.UNKNOWN_MEMBER_ID):
                log.info("member %s of %s must rejoin: %s", self.member_id, self.group_id, error.name)
                self._fence(reset_member=error == Errors.UNKNOWN_MEMBER_ID)
            elif error in COORDINATOR_ERRORS:
                if error == Errors.NOT_COORDINATOR:
                    self.client.rediscover()
            elif error in _FATAL:
                self._fatal = error_for(error, f"ConsumerGroupHeartbeat of {self.group_id!r}: {response.error_message}")
            else:
                log.warning(
                    "heartbeat of %s to %s: %s %s", self.member_id, self.group_id, error.name, response.error_message
                )

    # --- reconciliation, in the caller's thread ------------------------------------------------------

    def ensure_active(self, deadline: float | None = None) -> bool:
        """Join if needed, and move owned partitions to the assignment: revoke, then assign, then acknowledge.

        Each step is one bounded heartbeat, so this returns about by `deadline` (time.monotonic(), as the
        classic Membership takes it; the join is never parked here); True once owned == assignment.
        """
        self.raise_if_fatal()
        with self._lock:
            joining, lost = self.epoch == 0, self._lost
            self._lost = False
        if lost and self.owned:
            lost_partitions, self.owned = set(self.owned), set()
            _call(self._on_lost, lost_partitions)
        if joining or not self._subscription_sent:
            self.heartbeat()
            self.raise_if_fatal()
        with self._lock:
            target = self._target
        if target is None or target == self.owned:
            return target is not None
        revoked, added = self.owned - target, target - self.owned
        if revoked:
            if self.before_rebalance is not None:
                self.before_rebalance()
            self.owned = self.owned - revoked
            _call(self._on_revoked, revoked)
        if added:
            self.owned = self.owned | added
            _call(self._on_assigned, added)
        self.heartbeat()  # report the new ownership at once: this acknowledges the revocation
        return True

    # --- leaving -----------------------------------------------------------------------------------

    def leave(self, reason: str) -> None:
        """Leave the group now (epoch -1; a static member -2, keeping its assignment for its next incarnation)."""
        with self._lock:
            member_id, epoch = self.member_id, self.epoch
        if not member_id or epoch <= 0:
            return
        leave_epoch = LEAVE_GROUP_MEMBER_EPOCH if self.group_instance_id is None else LEAVE_GROUP_STATIC_MEMBER_EPOCH
        request = ConsumerGroupHeartbeatRequest(
            self.group_id, member_id=member_id, member_epoch=leave_epoch, instance_id=self.group_instance_id
        )
        log.info("member %s leaves %s: %s", member_id, self.group_id, reason)
        try:
            self.client.call(Api.CONSUMER_GROUP_HEARTBEAT, request, timeout_s=self.client.request_timeout_s)
        except Exception as e:  # best effort: the session timeout removes us anyway
            log.info("leaving %s failed: %r", self.group_id, e)
        with self._lock:
            self._fence(reset_member=False)

    def close(self) -> None:
        """Revoke owned partitions (calling the listener) and leave the group."""
        if self.owned:
            revoked, self.owned = set(self.owned), set()
            _call(self._on_revoked, revoked)
        self.leave("the consumer is being closed")
        self._left = True


def _call(callback: Callable[[set[TopicPartition]], None] | None, partitions: set[TopicPartition]) -> None:
    if callback is not None:
        callback(set(partitions))


def run_heartbeats(membership: ConsumerMembership, stop: threading.Event, before_each: Callable[[], Any]) -> None:
    """The background thread: heartbeat at the coordinator's interval until `stop` is set."""
    while True:
        # The interval runs from the last heartbeat, whoever sent it (poll() sends some itself).
        # Short waits: a heartbeat in flight may bring a shorter interval than the one known now.
        due = membership.last_heartbeat + membership.heartbeat_interval_s
        if stop.wait(min(max(due - time.monotonic(), 0.01), 0.1)):
            return
        if time.monotonic() < membership.last_heartbeat + membership.heartbeat_interval_s:
            continue
        if ray_session_ended(membership.group_id, membership.member_id):
            return
        # Joining (epoch 0) is poll()'s business, as in Kafka: a member that left does not rejoin by itself.
        try:
            if membership.epoch > 0 and before_each():
                membership.heartbeat(timeout_s=max(membership.heartbeat_interval_s * 2, 1.0))
        except Exception:  # never a dead heartbeat thread in a live member
            log.exception("heartbeat round of %s in %s failed; the next one goes on", membership.member_id,
                          membership.group_id)
