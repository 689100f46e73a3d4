"""Calls to a group's coordinator actor, with rediscovery and backoff on retriable failures."""

from __future__ import annotations

import logging
import random
import time
from collections.abc import Mapping
from typing import Any, Callable

import ray

from groupcoord.protocol import Errors, OffsetAndMetadata, TopicPartition

from .coalescer import COALESCED_APIS, CoalescerClosedError, RequestCoalescer, actor_id, coalescer_for, wait_answer
from .handle import Service

log = logging.getLogger(__name__)

# Errors after which the client finds the coordinator again and retries.
COORDINATOR_ERRORS = frozenset(
    {Errors.NOT_COORDINATOR, Errors.COORDINATOR_NOT_AVAILABLE, Errors.COORDINATOR_LOAD_IN_PROGRESS}
)

ACTOR_ERRORS: tuple[type[BaseException], ...] = (
    ray.exceptions.RayActorError,
    ray.exceptions.ActorUnavailableError,
    ray.exceptions.ActorUnschedulableError,  # a replica whose node is gone
)


_HINT_TIMEOUT_S = 2.0  # how long a timed-out call waits for the router to say why
# How long a call waits for an answer before asking the router whether another replica leads now.
LEADER_CHECK_S = 0.5
_MIN_WAIT_S = 0.01  # the shortest wait for the router when a call's deadline has (nearly) passed


def ray_session_ended(group_id: str, member_id: str) -> bool:
    """Whether this process's Ray session has ended (said once, as a warning): a member's heartbeat thread then
    stops, where a call would start a new local Ray instead of reaching the service."""
    if ray.is_initialized():
        return False
    log.warning("Ray is no longer connected: member %s of %s stops heartbeating (close members before "
                "ray.shutdown())", member_id, group_id)
    return True


def honour_throttle(response: Any) -> None:
    """Wait the throttle time a response asks for (Kafka's throttle_time_ms), as Kafka's clients do."""
    throttle = getattr(response, "throttle_time_ms", 0)
    if throttle > 0:
        time.sleep(throttle / 1000)


class CoordinatorUnavailableError(TimeoutError):
    """The coordinator could not be reached within the client's request timeout."""


def error_of(response: Any) -> Errors:
    """The error a response carries at its top level (commit responses: the first partition error)."""
    error = getattr(response, "error", None)
    if error is not None:
        return error
    errors = getattr(response, "errors", None)
    if errors:
        return next((e for e in errors.values() if e != Errors.NONE), Errors.NONE)
    return Errors.NONE


def normalize_offsets(offsets: Any) -> dict[TopicPartition, OffsetAndMetadata]:
    """Offsets to commit as {TopicPartition: OffsetAndMetadata}; a plain int stands for OffsetAndMetadata(int)."""
    if not isinstance(offsets, Mapping):
        kind = type(offsets).__name__
        raise TypeError(f"offsets must be a mapping of TopicPartition to OffsetAndMetadata, not {kind}")
    return {
        TopicPartition(*tp): om if isinstance(om, OffsetAndMetadata) else OffsetAndMetadata(int(om))
        for tp, om in offsets.items()
    }


class PendingCall:
    """A request sent to the coordinator actor whose answer has not been collected yet."""

    def __init__(self, ref: Any) -> None:
        self.ref = ref

    def result(self, timeout_s: float) -> Any:
        """The answer, waiting up to `timeout_s`; TimeoutError if it has not come by then."""
        try:
            return ray.get(self.ref, timeout=timeout_s)
        except ray.exceptions.GetTimeoutError:
            raise TimeoutError(f"no answer within {timeout_s:.3f} s") from None


class CoordinatorClient:
    """Sends a group's requests to its partition actor, finding it again after failures."""

    def __init__(
        self,
        service: Service,
        group_id: str,
        request_timeout_ms: int = 30000,
        retry_backoff_ms: int = 100,
        retry_backoff_max_ms: int = 1000,
        credentials: Any = None,
    ) -> None:
        if not isinstance(group_id, str):
            raise TypeError(f"group id must be a str, got {type(group_id).__name__}")
        self.service = service
        self.group_id = group_id
        self.request_timeout_s = request_timeout_ms / 1000
        self.backoff_s = retry_backoff_ms / 1000
        self.backoff_max_s = retry_backoff_max_ms / 1000
        self.partition, self.handle = service.find_coordinator(group_id)
        self.credentials = credentials  # a Credentials sent with every request (None: none)

    def rediscover(self, timeout_s: float | None = None) -> None:
        """Ask the router for the group's coordinator again (waiting at most `timeout_s`, or the request timeout)."""
        try:
            partition, handle = ray.get(
                self.service.router.find_coordinator.remote(self.group_id),
                timeout=timeout_s if timeout_s is not None else self.request_timeout_s,
            )
        except (*ACTOR_ERRORS, ray.exceptions.GetTimeoutError) as e:
            log.debug("router unreachable while finding the coordinator of %s: %r", self.group_id, e)
            return
        if handle is None:  # no leader right now (an election without a majority yet): keep asking the old one
            log.debug("no coordinator of %s known to the router yet", self.group_id)
            return
        self.partition, self.handle = partition, handle

    def call_once(self, method: str, request: Any, timeout_s: float | None = None) -> Any:
        """One call to the coordinator; actor failures and timeouts raise.

        Heartbeats, commits and fetches share `batch` calls with the rest of this process's
        requests to the same partition actor (see coalescer); joins and syncs go alone.
        """
        timeout_s = timeout_s if timeout_s is not None else self.request_timeout_s
        if self.handle is None:
            self.rediscover(timeout_s)
            if self.handle is None:
                raise CoordinatorUnavailableError(f"no coordinator of group {self.group_id!r} is known yet")
        response = wait_answer(self._send(method, request), timeout_s)
        if method not in COALESCED_APIS:  # the coalescer waits out its own throttle times
            honour_throttle(response)
        return response

    def describe_topics(self, topics: list[str]) -> dict[str, dict]:
        """The router's facts about these topics (their partition counts), for the group's leader."""
        call = self.service.router.describe_topics
        if self.credentials is None:
            ref = call.remote(topics)
        else:
            ref = call.remote(topics, credentials=self.credentials.wire)
        return ray.get(ref, timeout=self.request_timeout_s)

    def submit(self, method: str, request: Any) -> "PendingCall":
        """Send one request to the coordinator without waiting; its answer is collected later."""
        return PendingCall(self._remote(method, request))

    def coalescer(self) -> RequestCoalescer:
        """This process's coalescer for the group's current partition actor."""
        return coalescer_for(self.service.namespace, self.partition, self.handle, self.credentials)

    def call(
        self,
        method: str,
        request: Any,
        timeout_s: float | None = None,
        retry_on: Callable[[Errors], bool] = COORDINATOR_ERRORS.__contains__,
    ) -> Any:
        """Call until the answer is not a coordinator error or the time is up; for idempotent requests."""
        deadline = time.monotonic() + (timeout_s if timeout_s is not None else self.request_timeout_s)
        attempt = 0
        pending, sent_to = None, None
        while True:
            remaining = deadline - time.monotonic()
            if remaining <= 0:
                raise CoordinatorUnavailableError(
                    f"{method} for group {self.group_id!r} did not succeed within the request timeout"
                    + self._failure_hint()
                )
            try:
                if self.handle is None:  # none was known when this client started: ask until one is
                    self.rediscover(max(_MIN_WAIT_S, deadline - time.monotonic()))
                    if self.handle is None:
                        attempt += 1
                        self.sleep_backoff(attempt, deadline)
                        continue
                if pending is None:
                    pending, sent_to = self._send(method, request), self.handle
                response = wait_answer(pending, min(remaining, LEADER_CHECK_S))
                pending = None
                if not retry_on(error_of(response)):
                    if method not in COALESCED_APIS:
                        honour_throttle(response)
                    return response
                log.debug("%s for %s answered %s; retrying", method, self.group_id, error_of(response).name)
                if error_of(response) == Errors.NOT_COORDINATOR:
                    self.rediscover(max(_MIN_WAIT_S, deadline - time.monotonic()))
            except ACTOR_ERRORS as e:
                pending = None
                log.debug("%s for %s: coordinator actor unavailable (%r); retrying", method, self.group_id, e)
                # With replication another replica may lead now; never waiting past the call's deadline.
                self.rediscover(max(_MIN_WAIT_S, deadline - time.monotonic()))
            except ray.exceptions.GetTimeoutError:
                # No answer yet: a leader whose node died never answers, so ask who leads now and send
                # there if another replica does; otherwise keep waiting for this answer (no duplicate).
                self.rediscover(max(_MIN_WAIT_S, min(LEADER_CHECK_S, deadline - time.monotonic())))
                if actor_id(self.handle) != actor_id(sent_to):
                    log.debug("%s for %s: the coordinator moved; sending again", method, self.group_id)
                    pending = None
                continue
            attempt += 1
            self.sleep_backoff(attempt, deadline)

    def _send(self, method: str, request: Any) -> Any:
        """Send one request (through the coalescer where it batches); what `wait_answer` waits on."""
        if method in COALESCED_APIS:
            try:
                return self.coalescer().submit(method, request)
            except CoalescerClosedError:  # retired by another thread that saw a new leader just now
                return self.coalescer().submit(method, request)
        return self._remote(method, request)

    def _remote(self, method: str, request: Any) -> Any:
        call = getattr(self.handle, method)
        if self.credentials is None:
            return call.remote(request)
        return call.remote(request, credentials=self.credentials.wire)

    def _failure_hint(self) -> str:
        """Why the group's partition is failing, as its last report to the router says (best effort)."""
        try:
            reason = ray.get(self.service.router.partition_failure.remote(self.partition), timeout=_HINT_TIMEOUT_S)
        except Exception as e:
            log.debug("router unreachable for the failure of partition %d: %r", self.partition, e)
            return ""
        return f"; partition {self.partition} last failed: {reason}" if reason else ""

    def sleep_backoff(self, attempt: int, deadline: float) -> None:
        """Exponential backoff with jitter, never past `deadline`."""
        delay = min(self.backoff_max_s, self.backoff_s * 2 ** min(attempt, 10)) * random.uniform(0.8, 1.2)
        time.sleep(max(0.0, min(delay, deadline - time.monotonic())))
