"""The client's one request coalescer: a process's concurrent calls to one partition actor share `batch` calls.

A Ray actor call costs about a millisecond of CPU across caller, raylet and actor, far more than
the shard's work on a heartbeat or a commit. A process that hosts many group members (threads of
GroupMember, a Ray actor serving many consumers) would pay it once per request; like Kafka's
clients, which pipeline their requests over one connection per broker, the members of a process
share one link per partition actor instead: while one `batch` call is in flight, the requests
that arrive wait, and go together in the next one (group commit, on the client side).
Heartbeats, commits (synchronous and asynchronous) and offset fetches all go through it.
"""

from __future__ import annotations

import concurrent.futures
import logging
import threading
import time
from typing import Any

import ray

from groupcoord.protocol.apis import Api

from .wire import OnePickle

log = logging.getLogger(__name__)

# Requests that a partition actor answers without parking them, so a batch never waits on a rebalance.
COALESCED_APIS = frozenset({Api.HEARTBEAT, Api.OFFSET_COMMIT, Api.OFFSET_FETCH, Api.CONSUMER_GROUP_HEARTBEAT})
# A batch unanswered for this long is given up (its callers get GetTimeoutError) so that later ones can go.
_ABANDON_AFTER_S = 60.0


class CoalescerClosedError(RuntimeError):
    """The coalescer takes no more requests (closed, or retired because another actor leads now)."""


def actor_id(handle: Any) -> Any:
    """The id of the actor a handle calls (handles to one actor compare equal by it), None for no handle."""
    return getattr(handle, "_actor_id", None)


class RequestCoalescer:
    """One process's link to one partition actor: requests submitted concurrently share `batch` calls."""

    def __init__(self, handle: Any, name: str = "groupcoord-coalescer", credentials: Any = None) -> None:
        self.handle = handle
        self.credentials = credentials  # sent with every batch (a service with authorization needs them)
        self.calls = 0
        self.requests = 0
        self.throttled_ms = 0  # how long this link waited because the service said so (throttle_time_ms)
        self._cond = threading.Condition()
        self._pending: list[tuple[str, Any, concurrent.futures.Future]] = []
        self._closed = False
        self._thread = threading.Thread(target=self._run, name=name, daemon=True)
        self._thread.start()

    def submit(self, api: str, request: Any) -> concurrent.futures.Future:
        """Queue one request (an API of COALESCED_APIS); the future completes with its response or the call's error."""
        if api not in COALESCED_APIS:
            raise ValueError(f"{api!r} cannot be batched; batched APIs: {sorted(COALESCED_APIS)}")
        future: concurrent.futures.Future = concurrent.futures.Future()
        with self._cond:
            if self._closed:
                raise CoalescerClosedError("this RequestCoalescer is closed")
            self._pending.append((api, request, future))
            self._cond.notify()
        return future

    def call(self, api: str, request: Any, timeout_s: float) -> Any:
        """Submit and wait: the response, or the actor's error, or GetTimeoutError after `timeout_s`."""
        return wait_answer(self.submit(api, request), timeout_s)

    def close(self) -> None:
        """Send what is queued, then end the sending thread."""
        with self._cond:
            self._closed = True
            self._cond.notify()
        self._thread.join()

    def retire(self) -> None:
        """Take no more requests; what is queued is still sent, and the thread ends without being waited for
        (it may be waiting on an actor that never answers)."""
        with self._cond:
            self._closed = True
            self._cond.notify()

    def _run(self) -> None:
        while True:
            with self._cond:
                while not self._pending and not self._closed:
                    self._cond.wait()
                if not self._pending:
                    return
                batch, self._pending = self._pending, []
            self._send(batch)

    def _send(self, batch: list[tuple[str, Any, concurrent.futures.Future]]) -> None:
        live = [item for item in batch if item[2].set_running_or_notify_cancel()]
        if not live:
            return
        if not ray.is_initialized():  # a call would start a new local Ray instead of reaching the service
            error = RuntimeError(f"Ray is not connected (was ray.shutdown() called?): {len(live)} request(s) not sent")
            for _, _, future in live:
                future.set_exception(error)
            return
        self.calls += 1
        self.requests += len(live)
        try:
            calls = OnePickle([(api, request) for api, request, _ in live])
            if self.credentials is None:
                ref = self.handle.batch.remote(calls)
            else:
                ref = self.handle.batch.remote(calls, credentials=self.credentials.wire)
            results = ray.get(ref, timeout=_ABANDON_AFTER_S)
        except (Exception, SystemExit) as e:  # the actor died or restarted, the batch was given up, or Ray is
            # shutting down (it ends a call blocked on an actor that never answers with SystemExit): callers decide
            log.debug("batch of %d requests failed: %r", len(live), e)
            error = e if isinstance(e, Exception) else RuntimeError("Ray is shutting down: no answer came")
            for _, _, future in live:
                future.set_exception(error)
            return
        for (_, _, future), result in zip(live, results, strict=True):
            future.set_result(result)
        throttle = max((getattr(r, "throttle_time_ms", 0) for r in results), default=0)
        if throttle > 0:  # as Kafka's clients: nothing more goes to this actor until the throttle time is over
            self.throttled_ms += throttle
            time.sleep(throttle / 1000)


def wait_answer(pending: Any, timeout_s: float) -> Any:
    """The answer of a request: a future from `submit` or a Ray ObjectRef; GetTimeoutError after `timeout_s`."""
    if isinstance(pending, concurrent.futures.Future):
        try:
            return pending.result(timeout=timeout_s)
        except concurrent.futures.TimeoutError:
            raise ray.exceptions.GetTimeoutError(f"not answered within {timeout_s:.1f} s") from None
    return ray.get(pending, timeout=timeout_s)


_coalescers: dict[tuple[str, int, Any], RequestCoalescer] = {}
_coalescers_lock = threading.Lock()


def coalescer_for(namespace: str, partition: int, handle: Any, credentials: Any = None) -> RequestCoalescer:
    """This process's coalescer for a service's partition actor and a principal's credentials (created on
    first use; follows a new handle)."""
    key = (namespace, partition, credentials)
    with _coalescers_lock:
        coalescer = _coalescers.get(key)
        if coalescer is not None and actor_id(coalescer.handle) != actor_id(handle):
            # Another actor leads now: a new link, so that no request waits behind a batch sent to the old
            # one, which may never be answered (its node is gone) until Ray declares it dead.
            coalescer.retire()
            coalescer = None
        if coalescer is None:
            name = f"groupcoord-coalescer-{namespace}-{partition}"
            coalescer = _coalescers[key] = RequestCoalescer(handle, name=name, credentials=credentials)
        return coalescer
