"""GroupMember: a consumer-group member for Python programs on Ray, in the manner of Kafka's consumer.

poll() drives joins, syncs and rebalance callbacks in the caller's thread; a background thread
heartbeats; commits are synchronous (commit) or coalesced (commit_async). Without a
subscription, assign() gives manual assignment with offsets in a simple group, as Kafka's
assign().
"""

from __future__ import annotations

import concurrent.futures
import logging
import threading
import time
from collections import deque
from typing import Any, Callable, Iterable

import ray

from groupcoord.protocol import Errors, OffsetAndMetadata, TopicPartition
from groupcoord.protocol.apis import Api
from groupcoord.protocol.messages import OffsetCommitRequest, OffsetFetchRequest
from groupcoord.protocol.security.credentials import Credentials

from .consumer_membership import ConsumerMembership, run_heartbeats
from .coordinator_client import ACTOR_ERRORS, CoordinatorClient, normalize_offsets, ray_session_ended
from .errors import CommitFailedError, GroupCoordinatorError, error_for
from .handle import Service
from .membership import Membership, RebalanceListener

log = logging.getLogger(__name__)

Offsets = dict[TopicPartition, OffsetAndMetadata]
CommitCallback = Callable[[Offsets, BaseException | None], None]

DEFAULT_ASSIGNORS = ("range", "cooperative-sticky")


def max_throttled_wait_s(heartbeat_interval_s: float, session_timeout_s: float) -> float:
    """The longest a throttled member waits between heartbeats: its interval, or half its session if longer.

    The coordinator judges sessions on its own time, which runs behind by as long as requests wait
    in its queues (see docs/overload.md), so a heartbeat that waits there is not late; the other half
    of the session is for delays in the member's own process, which the coordinator cannot see. With
    Kafka's usual interval of a third of the session, a cap of a quarter would never let a member back off.
    """
    return max(heartbeat_interval_s, session_timeout_s / 2)


class GroupMember:
    """A member of a consumer group (or, after assign(), a manually assigned consumer).

    `group_protocol` is Kafka's group.protocol: "classic" (JoinGroup/SyncGroup, a leader assigns) or
    "consumer" (KIP-848: the coordinator assigns with `group_remote_assignor`, and the member heartbeats
    at the interval the coordinator gives; session_timeout_ms and heartbeat_interval_ms then come
    from the coordinator, as in Kafka).
    """

    def __init__(
        self,
        service: Service,
        group_id: str,
        topics: Iterable[str] | None = None,
        group_instance_id: str | None = None,
        session_timeout_ms: int = 45000,
        heartbeat_interval_ms: int = 3000,
        rebalance_timeout_ms: int | None = None,
        max_poll_interval_ms: int = 300000,
        partition_assignment_strategy: Iterable[str] = DEFAULT_ASSIGNORS,
        listener: RebalanceListener | None = None,
        on_partitions_revoked: Callable[[set[TopicPartition]], None] | None = None,
        on_partitions_assigned: Callable[[set[TopicPartition]], None] | None = None,
        enable_auto_commit: bool = False,
        auto_commit_interval_ms: int = 5000,
        client_id: str = "groupcoord-client",
        client_host: str = "",
        request_timeout_ms: int = 30000,
        retry_backoff_ms: int = 100,
        metadata_max_age_ms: int = 300000,
        group_protocol: str = "classic",
        group_remote_assignor: str | None = None,
        client_rack: str | None = None,
        credentials: Credentials | None = None,
    ) -> None:
        if heartbeat_interval_ms >= session_timeout_ms:
            raise ValueError("heartbeat_interval_ms must be lower than session_timeout_ms")
        if group_protocol not in ("classic", "consumer"):
            raise ValueError(f"group_protocol must be 'classic' or 'consumer', not {group_protocol!r}")
        self.group_id = group_id
        self.group_protocol = group_protocol
        credentials = credentials if credentials is not None else Credentials.from_env()
        self.client = CoordinatorClient(service, group_id, request_timeout_ms, retry_backoff_ms,
                                        credentials=credentials)
        self.membership: Membership | ConsumerMembership
        if group_protocol == "consumer":
            self.membership = ConsumerMembership(
                group_id,
                client=self.client,
                client_id=client_id,
                client_host=client_host or _host(),
                group_instance_id=group_instance_id,
                rebalance_timeout_ms=rebalance_timeout_ms if rebalance_timeout_ms is not None else max_poll_interval_ms,
                server_assignor=group_remote_assignor,
                rack_id=client_rack,
                listener=listener,
                on_revoked=on_partitions_revoked,
                on_assigned=on_partitions_assigned,
                before_rebalance=self._commit_before_revocation,
            )
        else:
            self.membership = Membership(
                service,
                group_id,
                client_id=client_id,
                client_host=client_host or _host(),
                group_instance_id=group_instance_id,
                session_timeout_ms=session_timeout_ms,
                rebalance_timeout_ms=rebalance_timeout_ms
                if rebalance_timeout_ms is not None
                else max_poll_interval_ms,
                assignors=tuple(partition_assignment_strategy),
                listener=listener,
                on_revoked=on_partitions_revoked,
                on_assigned=on_partitions_assigned,
                client=self.client,
                metadata_max_age_ms=metadata_max_age_ms,
                before_rebalance=self._commit_before_revocation,
            )
        self.heartbeat_interval_s = heartbeat_interval_ms / 1000
        self._max_heartbeat_wait_s = max_throttled_wait_s(self.heartbeat_interval_s, session_timeout_ms / 1000)
        self.max_poll_interval_s = max_poll_interval_ms / 1000
        self.enable_auto_commit = enable_auto_commit
        self.auto_commit_interval_s = auto_commit_interval_ms / 1000
        self._positions: Offsets = {}
        self._manual: set[TopicPartition] | None = None
        self._last_poll = time.monotonic()
        self._last_auto_commit = time.monotonic()
        self._closed = False
        self._stop = threading.Event()
        # Async commits in the order they were sent: (offsets, callback, the coalescer's future).
        self._async_commits: deque[tuple[Offsets, CommitCallback | None, concurrent.futures.Future]] = deque()
        self._heartbeat_thread: threading.Thread | None = None
        if topics is not None:
            self.subscribe(topics)

    # --- subscription and assignment ---------------------------------------------------------

    def subscribe(self, topics: Iterable[str]) -> None:
        """Join the group for these topics (takes effect at the next poll)."""
        if self._manual is not None:
            raise ValueError("this member uses manual assignment; subscribe() and assign() do not mix")
        self.membership.set_topics(topics)
        if self._heartbeat_thread is None:
            loop = self._consumer_heartbeat_loop if self.group_protocol == "consumer" else self._heartbeat_loop
            self._heartbeat_thread = threading.Thread(
                target=loop, name=f"groupcoord-heartbeat-{self.group_id}", daemon=True
            )
            self._heartbeat_thread.start()

    def assign(self, partitions: Iterable[TopicPartition]) -> None:
        """Manual assignment (no group management): commits go to a simple group with generation -1."""
        if self.membership.topics:
            raise ValueError("this member subscribed to topics; subscribe() and assign() do not mix")
        self._manual = {TopicPartition(*tp) for tp in partitions}

    def assignment(self) -> set[TopicPartition]:
        """The partitions this member currently owns."""
        return set(self._manual) if self._manual is not None else set(self.membership.owned)

    @property
    def member_id(self) -> str:
        return self.membership.member_id

    @property
    def generation_id(self) -> int:
        return self.membership.generation

    # --- poll ----------------------------------------------------------------------------------------

    def poll(self, timeout_ms: int = 0) -> set[TopicPartition]:
        """Drive the group: rejoin if needed (calling the listener), auto-commit, run commit callbacks.

        Returns by `timeout_ms` even during a rebalance, as Kafka's poll: a join or sync still in
        flight is collected by the next poll.
        """
        self._check_open()
        self._last_poll = time.monotonic()
        deadline = self._last_poll + max(0, timeout_ms) / 1000
        self._run_commit_callbacks()
        if self._manual is None and self.membership.topics:
            self.membership.ensure_active(deadline)
        if (
            self.enable_auto_commit
            and time.monotonic() - self._last_auto_commit >= self.auto_commit_interval_s
        ):
            self._last_auto_commit = time.monotonic()
            positions = self._owned_positions()
            if positions:
                self.commit_async(positions)
        return self.assignment()

    # --- positions and commits ------------------------------------------------------------------------

    def seek(self, partition: TopicPartition, offset: int, metadata: str = "") -> None:
        """Set the position to commit for a partition (the next offset to process)."""
        self._positions[TopicPartition(*partition)] = OffsetAndMetadata(offset, metadata)

    def position(self, partition: TopicPartition) -> int | None:
        """The position set with seek(), if any."""
        pos = self._positions.get(TopicPartition(*partition))
        return None if pos is None else pos.offset

    def _owned_positions(self) -> Offsets:
        owned = self.assignment()
        return {tp: om for tp, om in self._positions.items() if tp in owned}

    def _commit_request(self, offsets: Offsets) -> OffsetCommitRequest:
        if self._manual is not None:
            return OffsetCommitRequest(self.group_id, offsets)
        m = self.membership
        return OffsetCommitRequest(
            self.group_id,
            offsets,
            generation_id=m.generation,
            member_id=m.member_id,
            group_instance_id=m.group_instance_id,
        )

    def _check_commit(self, response: Any) -> None:
        """Raise for a commit response with a failed partition; a lost generation flags a rejoin."""
        failed = {tp: e for tp, e in response.errors.items() if e != Errors.NONE}
        if not failed:
            return
        error = next(iter(failed.values()))
        if error == Errors.STALE_MEMBER_EPOCH:
            # The member epoch moved on since the commit was built (consumer protocol): the member stays.
            raise CommitFailedError(error)
        if error in (Errors.ILLEGAL_GENERATION, Errors.UNKNOWN_MEMBER_ID):
            self.membership.request_rejoin(reset_member=error == Errors.UNKNOWN_MEMBER_ID)
            raise CommitFailedError(error)
        if error == Errors.REBALANCE_IN_PROGRESS:
            self.membership.request_rejoin()
        raise error_for(error, f"commit of {sorted(failed)} to group {self.group_id!r} failed: {error.name}")

    def commit(self, offsets: Offsets | None = None) -> None:
        """Commit offsets (default: the positions of owned partitions) and wait until they are durable.

        Earlier async commits complete first (their callbacks run here), as in Kafka's commitSync.
        """
        self._check_open()
        self._wait_async_commits(None)
        self._run_commit_callbacks()
        offsets = self._owned_positions() if offsets is None else normalize_offsets(offsets)
        if offsets:
            self._check_commit(self.client.call(Api.OFFSET_COMMIT, self._commit_request(offsets)))

    def commit_async(self, offsets: Offsets | None = None, callback: CommitCallback | None = None) -> None:
        """Send a commit without waiting; `callback(offsets, error)` runs in a later poll(), in commit order.

        Concurrent commits of a process share actor calls with its other requests (the coalescer).
        """
        self._check_open()
        offsets = self._owned_positions() if offsets is None else normalize_offsets(offsets)
        if offsets:
            future = self.client.coalescer().submit(Api.OFFSET_COMMIT, self._commit_request(offsets))
            self._async_commits.append((offsets, callback, future))

    def _wait_async_commits(self, timeout_s: float | None) -> bool:
        """Wait until every async commit sent so far is answered; False on timeout."""
        futures = [f for _, _, f in list(self._async_commits)]
        return not concurrent.futures.wait(futures, timeout_s).not_done

    def _run_commit_callbacks(self) -> None:
        """Report the answered async commits, oldest first, in the calling thread."""
        while self._async_commits and self._async_commits[0][2].done():
            offsets, callback, future = self._async_commits.popleft()
            error: BaseException | None = None
            try:
                self._check_commit(future.result())
            except Exception as e:  # handed to the callback, never lost
                error = e
            if callback is not None:
                callback(offsets, error)
            elif error is not None:
                log.warning("async commit of %d partitions of %s failed: %s", len(offsets), self.group_id, error)

    def committed(
        self, partitions: Iterable[TopicPartition]
    ) -> dict[TopicPartition, OffsetAndMetadata | None]:
        """The committed offsets of these partitions (None where nothing is committed)."""
        tps = [TopicPartition(*tp) for tp in partitions]
        response = self.client.call(Api.OFFSET_FETCH, OffsetFetchRequest(self.group_id, tps))
        if response.error != Errors.NONE:
            raise error_for(response.error, f"fetching offsets of group {self.group_id!r}")
        out: dict[TopicPartition, OffsetAndMetadata | None] = {}
        for tp in tps:
            p = response.offsets.get(tp)
            if p is not None and p.error != Errors.NONE:
                raise error_for(p.error, f"fetching the offset of {tp}")
            out[tp] = (
                None if p is None or p.offset < 0 else OffsetAndMetadata(p.offset, p.metadata, p.leader_epoch)
            )
        return out

    def _commit_before_revocation(self) -> None:
        """With auto-commit, commit owned positions before giving partitions up, as Kafka does."""
        if not self.enable_auto_commit:
            return
        try:
            self.commit()
        except GroupCoordinatorError as e:
            log.warning("commit before rebalance of %s failed: %s", self.group_id, e)

    # --- heartbeats ------------------------------------------------------------------------------------

    def _heartbeat_loop(self) -> None:
        """Heartbeat every interval until closed; one failed round is logged and the next one goes on."""
        wait_s = self.heartbeat_interval_s
        while not self._stop.wait(wait_s):
            if ray_session_ended(self.group_id, self.member_id):
                return
            wait_s = self.heartbeat_interval_s
            try:
                throttle_s = self._heartbeat_once()
            except Exception:  # never a dead heartbeat thread in a live member
                log.exception("heartbeat round of %s in %s failed; the next one goes on", self.member_id, self.group_id)
                continue
            if throttle_s > wait_s:  # the coordinator runs behind: back off as it asks (Kafka's throttle_time_ms)
                wait_s = min(throttle_s, self._max_heartbeat_wait_s)

    def _heartbeat_once(self) -> float:
        """One heartbeat round; how long the coordinator asked us to wait before the next one (seconds)."""
        m = self.membership
        if time.monotonic() - self._last_poll > self.max_poll_interval_s and m.is_stable():
            log.warning(
                "member %s of %s did not poll within max_poll_interval_ms; leaving the group",
                m.member_id,
                self.group_id,
            )
            m.leave(reason="consumer poll timeout has expired")
            return 0.0
        request = m.heartbeat_request()
        if request is None:
            return 0.0
        try:
            response = self.client.call_once(Api.HEARTBEAT, request, timeout_s=self.heartbeat_interval_s * 2)
        except (*ACTOR_ERRORS, ray.exceptions.GetTimeoutError) as e:
            log.debug("heartbeat of %s failed (%r); coordinator may be restarting", m.member_id, e)
            return 0.0
        m.on_heartbeat(request, response.error)
        return getattr(response, "throttle_time_ms", 0) / 1000

    def _consumer_heartbeat_loop(self) -> None:
        membership = self.membership
        assert isinstance(membership, ConsumerMembership), "runs only for group_protocol='consumer'"
        run_heartbeats(membership, self._stop, self._poll_is_recent)

    def _poll_is_recent(self) -> bool:
        """Whether poll() ran within max_poll_interval_ms; if not, the member leaves the group (Kafka's rule)."""
        if time.monotonic() - self._last_poll <= self.max_poll_interval_s:
            return True
        log.warning("member %s of %s did not poll within max_poll_interval_ms; leaving", self.member_id, self.group_id)
        self.membership.leave(reason="consumer poll timeout has expired")
        return False

    # --- closing -----------------------------------------------------------------------------------------

    def close(self, autocommit: bool = True, timeout_ms: int = 30000) -> None:
        """Commit (if auto-commit), leave the group (dynamic members) and stop the background threads."""
        if self._closed:
            return
        try:
            if autocommit and self.enable_auto_commit:
                try:
                    self.commit()
                except GroupCoordinatorError as e:
                    log.warning("final auto-commit of %s failed: %s", self.group_id, e)
            self._wait_async_commits(timeout_ms / 1000)
            self._run_commit_callbacks()
        finally:
            self._closed = True
            self._stop.set()
            if self._heartbeat_thread is not None:
                self._heartbeat_thread.join(timeout_ms / 1000)
            if self._manual is None and self.membership.topics:
                self.membership.close()

    def __enter__(self) -> "GroupMember":
        return self

    def __exit__(self, *exc: Any) -> None:
        self.close()

    def _check_open(self) -> None:
        if self._closed:
            raise RuntimeError("this GroupMember is closed")
        self.membership.raise_if_fatal()


def _host() -> str:
    try:
        return ray.util.get_node_ip_address()
    except Exception:
        return ""
