"""The leader's log with replication: appends are staged locally and shipped to the followers.

It is the RecordLog the leader's shard writes to. `durable_offset` is the high watermark: the
offset below which `min_insync_replicas` replicas (the leader included) hold the leader's log
durably, counting only followers that confirmed, in this leader epoch, that their log is a prefix
of ours. The watermark never passes the leader's own epoch-start marker (Raft's rule that a leader
commits only entries of its own term, which stops a later election from undoing them).

All shipping happens in worker threads (`flush`, called by the runtime's group commit, and
`tick`, the leader's heartbeat); one lock serialises them, and a follower has at most one call in
flight, so that it receives the log in order. Every call goes through the transport (transport.py).

The leader holds a lease while a majority answers it: a leader that has heard from too few voters
for LEASE_S (well under a session timeout) stops serving, so members look for the new one.
"""

from __future__ import annotations

import logging
import threading
from dataclasses import dataclass
from typing import Any, Sequence

from groupcoord.protocol.commit_run import OffsetCommitRun
from groupcoord.protocol.records import OffsetCommitKey, Record
from groupcoord.storage.epoch_checkpoint import EpochState

from .decisions import advance_high_watermark, voters_hold_watermark
from .messages import Follow, FollowerAnswer, Replicate
from .transport import Transport

log = logging.getLogger(__name__)

# Records sent to a lagging follower in one call.
CATCH_UP_BATCH_RECORDS = 20_000
# How long one flush waits for enough acknowledgements before the runtime calls it again.
FLUSH_WAIT_S = 0.5
# How long a leader serves without hearing from enough voters (well under Kafka's 6 s minimum session timeout).
# A follower that answered a leader promises a new epoch only LEASE_S after that answer (replica_actor), so a
# deposed leader has stopped serving before a new one starts: no read returns an old value.
LEASE_S = 1.0
# The topic of the epoch-start marker: a tombstone no group owns (':' is not allowed in Kafka topic names).
EPOCH_MARKER_TOPIC = "groupcoord:leader-epoch"


def epoch_marker(epoch: int) -> Record:
    """The record a new leader writes first in its epoch: an offset tombstone that changes no state."""
    return (OffsetCommitKey("", EPOCH_MARKER_TOPIC, epoch), None)


class LeaderFencedError(RuntimeError):
    """A replica promised a newer leader epoch: this leader is deposed and must stop acknowledging."""


@dataclass
class FollowerLink:
    """The leader's view of one follower: how far its log is known to match ours, and its call in flight."""

    replica_id: str
    handle: Any
    match: int | None = None  # None until the follower has truncated to our log in this epoch
    inflight: Any = None
    last_ack: float = 0.0  # when the last request it answered was sent (the lease runs from there)
    sent_at: float = 0.0
    voter: bool = True  # False for a learner: a new replica catching up, whose acks do not count yet
    lost: bool = False  # it answered that it lost its storage: repair must replace it


class ReplicatedLog:
    """A PartitionLog plus its followers; the shard sees the high watermark as the durable offset."""

    def __init__(self, plog: Any, min_insync: int, transport: Transport) -> None:
        self.plog = plog
        self.transport = transport
        self.min_insync = min_insync
        self.epoch = 0
        self.replica_id = ""
        self.epoch_start = 0
        self.state = EpochState()
        self.hw = 0
        self.followers: list[FollowerLink] = []
        self.fenced_by: int | None = None
        self._pending: list[tuple[int, Sequence[Record]]] = []
        self._lock = threading.Lock()  # _pending and the local appends
        self._ship_lock = threading.Lock()  # the followers' links

    def lead(self, epoch: int, replica_id: str, state: EpochState, hw: int, followers: list[tuple[str, Any]]) -> None:
        """Start leading `epoch` from the current end of the log (state: its epoch history, this epoch included)."""
        self.epoch, self.replica_id, self.state = epoch, replica_id, state
        self.epoch_start = self.plog.end_offset
        self.hw = hw
        now = self.transport.monotonic()
        self.followers = [FollowerLink(rid, h, last_ack=now) for rid, h in followers]
        self.plog.compaction_limit = hw

    # --- RecordLog -------------------------------------------------------------------------

    def append(self, records: Any) -> int:
        """Stage `records` in the local log; they are shipped with the next flush."""
        with self._lock:
            base = self.plog.end_offset
            end = self.plog.append(records)
            if end > base:
                # A commit's run is immutable and ships by column; anything else is copied.
                self._pending.append((base, records if type(records) is OffsetCommitRun else list(records)))
            return end

    @property
    def durable_offset(self) -> int:
        """The high watermark: what enough replicas hold durably."""
        return self.hw

    @property
    def end_offset(self) -> int:
        """The end of the local log, staged records included."""
        return self.plog.end_offset

    def __getattr__(self, name: str) -> Any:
        return getattr(self.plog, name)  # sync, maybe_compact (capped at the watermark), close, ...

    def lease_holds(self) -> bool:
        """Whether enough voters answered within LEASE_S for this leader to go on serving."""
        now = self.transport.monotonic()
        fresh = sum(1 for f in self.followers if f.voter and now - f.last_ack < LEASE_S)
        return 1 + fresh >= self.min_insync

    # --- shipping ------------------------------------------------------------------------------

    def flush(self) -> int:
        """Write locally and ship to the followers, then wait (a while) for enough acknowledgements."""
        with self._ship_lock:
            with self._lock:
                batches, self._pending = self._pending, []
            for f in self.followers:
                self._send_batches(f, batches)
            self.plog.flush()
            self._advance_hw()
            target = self.plog.durable_offset
            deadline = self.transport.monotonic() + FLUSH_WAIT_S
            while self.hw < target and self.transport.monotonic() < deadline:
                if not self._collect(deadline - self.transport.monotonic()):
                    break
                self._feed_lagging()
            return self.hw

    def tick(self) -> None:
        """The leader's heartbeat: take answers, catch lagging followers up, tell the rest the watermark."""
        with self._ship_lock:
            self._collect(0)
            self._feed_lagging(heartbeat=True)

    def _send_batches(self, f: FollowerLink, batches: list[tuple[int, Sequence[Record]]]) -> None:
        if f.inflight is not None or f.match is None:
            return
        batches = [b for b in batches if b[0] >= f.match]
        if batches and batches[0][0] == f.match:
            self._replicate(f, batches)

    def _feed_lagging(self, heartbeat: bool = False) -> None:
        written = self.plog.written_offset
        for f in self.followers:
            if f.inflight is not None:
                continue
            if f.match is None:
                follow = Follow(self.epoch, self.replica_id, self.state.history, written)
                f.sent_at = self.transport.monotonic()
                f.inflight = self.transport.send(f.handle, "follow", follow)
            elif f.match < written:
                self._replicate(f, self._read(f.match, written))
            elif heartbeat:
                self._replicate(f, [])

    def _read(self, start: int, end: int) -> list[tuple[int, list[Record]]]:
        """Batches of our written log from `start`, contiguous runs of records, up to a size limit."""
        batches: list[tuple[int, list[Record]]] = []
        count = 0
        for rec in self.plog.read(start):
            if rec.offset >= end or count >= CATCH_UP_BATCH_RECORDS:
                break
            if batches and batches[-1][0] + len(batches[-1][1]) == rec.offset:
                batches[-1][1].append(rec.record)
            else:
                batches.append((rec.offset, [rec.record]))
            count += 1
        return batches

    def _replicate(self, f: FollowerLink, batches: Sequence[tuple[int, Sequence[Record]]]) -> None:
        assert f.match is not None
        msg = Replicate(self.epoch, self.replica_id, f.match, batches, self.hw)
        f.sent_at = self.transport.monotonic()
        f.inflight = self.transport.send(f.handle, "replicate", msg)

    def _collect(self, timeout: float) -> bool:
        """Take the answers that arrive within `timeout`; False when none did (or nothing is in flight)."""
        refs = [f.inflight for f in self.followers if f.inflight is not None]
        if not refs:
            return False
        ready = self.transport.wait(refs, timeout)
        if not ready:
            return False
        for f in self.followers:
            if f.inflight is not None and f.inflight in ready:
                ref, f.inflight = f.inflight, None
                self._on_answer(f, ref)
        self._advance_hw()
        return True

    def _on_answer(self, f: FollowerLink, ref: Any) -> None:
        try:
            answer: FollowerAnswer = self.transport.result(ref)
        except Exception as e:  # the follower's actor or node is gone: it lags until it answers again
            log.debug("follower %s of epoch %d unreachable: %r", f.replica_id, self.epoch, e)
            return
        if answer.fenced is not None and answer.fenced > self.epoch:
            self.fenced_by = answer.fenced
            raise LeaderFencedError(
                f"leader {self.replica_id} of epoch {self.epoch} fenced by a promise of epoch {self.fenced_by}"
            )
        f.lost = answer.lost
        if answer.lost:
            f.match = None  # what it acknowledged is gone: it counts for no watermark, lease or promotion
        elif answer.end is not None:
            f.match = answer.end
            f.last_ack = max(f.last_ack, f.sent_at)
        elif answer.handshake:
            f.match = None

    def fence(self, epoch: int) -> int:
        """This leader promised `epoch` to an election: it acknowledges nothing more (the watermark freezes);
        the durable end of its log, which its promise reports."""
        with self._ship_lock:
            self.fenced_by = epoch
            return self.plog.durable_offset

    def _advance_hw(self) -> None:
        if self.fenced_by is not None:
            return  # promised a newer epoch: whatever it holds now was reported by that promise, or is not counted
        matches = [f.match for f in self.followers if f.match is not None and f.voter]
        self.hw = advance_high_watermark(self.hw, self.plog.durable_offset, matches, self.min_insync, self.epoch_start)
        self.plog.compaction_limit = self.hw

    def add_learner(self, replica_id: str, handle: Any) -> None:
        """Start copying the log to a new replica; its acks count once `promote` makes it a voter."""
        with self._ship_lock:
            if all(f.replica_id != replica_id for f in self.followers):
                self.followers.append(FollowerLink(replica_id, handle, voter=False))

    def promote(self, replica_id: str, replaces: str) -> bool:
        """Make a learner a voter in place of the lost replica `replaces`; False while the new set of voters would
        hold the acknowledged records on too few replicas. Under steady commits a learner is always a flush
        behind the watermark; it may stay so while the other voters hold what was acknowledged (Raft's learner)."""
        with self._ship_lock:
            link = next((f for f in self.followers if f.replica_id == replica_id), None)
            if link is None or link.match is None:
                return False
            others = [f.match for f in self.followers
                      if f.voter and f.replica_id != replaces and f.match is not None]
            if not voters_hold_watermark(self.hw, self.plog.durable_offset, [*others, link.match], self.min_insync):
                return False
            link.voter = True
            self.followers = [f for f in self.followers if f.replica_id != replaces]
            return True

    def drop_learner(self, replica_id: str) -> None:
        """Stop copying the log to a learner that repair gave up (it lost its storage); voters are kept."""
        with self._ship_lock:
            self.followers = [f for f in self.followers if f.voter or f.replica_id != replica_id]

    def lost_followers(self) -> list[str]:
        """The followers (learners among them) that last answered that they lost their storage."""
        return [f.replica_id for f in self.followers if f.lost]

    def learners(self) -> list[str]:
        """The replicas catching up that are not voters yet."""
        return [f.replica_id for f in self.followers if not f.voter]

    def in_sync(self) -> list[str]:
        """The voting followers that hold everything acknowledged (their log reaches the high watermark)."""
        return [f.replica_id for f in self.followers if f.voter and f.match is not None and f.match >= self.hw]

    def lags(self) -> dict[str, int | None]:
        """Each follower's lag behind our log end, in records (None until it has synced in this epoch)."""
        end = self.plog.end_offset
        return {f.replica_id: (end - f.match if f.match is not None else None) for f in self.followers}
