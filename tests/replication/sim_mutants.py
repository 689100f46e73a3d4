"""Deliberate breaks of replication for the simulator's mutation table: each one monkeypatches the product code
in this process only (never the code itself) and must be caught by some seed (benchmarks/sim_mutations.py hunts
for it; test_sim_regressions.py keeps the seed that caught it).
"""

from __future__ import annotations

import contextlib
from typing import Any, Callable, Iterator

from groupcoord.actors.service.replication import decisions, election, replica_actor, replicated_log
from groupcoord.actors.service.replication.replica_actor import ReplicaActor
from groupcoord.storage import epoch_checkpoint, partition_log


@contextlib.contextmanager
def patched(obj: Any, name: str, value: Any) -> Iterator[None]:
    """Replace obj.name with value for the duration."""
    old = obj.__dict__[name] if isinstance(obj, type) else getattr(obj, name)
    setattr(obj, name, value)
    try:
        yield
    finally:
        setattr(obj, name, old)


class _NoSync:
    """A file seam whose fsyncs do nothing: what is written stays in the page cache until the power fails."""

    def __init__(self, files: Any) -> None:
        self.files = files

    def fsync(self, fd: int) -> None:
        pass

    def fsync_directory(self, directory: Any) -> None:
        pass

    def __getattr__(self, name: str) -> Any:
        return getattr(self.files, name)


def _checkpoint_without_fsync(self: Any, state: Any) -> None:
    from groupcoord.storage.epoch_checkpoint import write_json_atomically

    body = {"promised_epoch": state.promised_epoch, "history": [list(h) for h in state.history]}
    if self.fence is not None:
        self.fence()
    write_json_atomically(self.path, body, _NoSync(self.files))  # answered while only the page cache has it


def _append_unsynced(self: ReplicaActor, batches: list) -> None:
    plog = self.rlog.plog
    for base, records in batches:
        plog.append_at(base, records)
        self._queue(base, records)
    self.loop.call_later(0.2, lambda: self._storage_call(plog.flush))  # written and synced later


def _unsynced_follower() -> Any:
    stack = contextlib.ExitStack()
    stack.enter_context(patched(ReplicaActor, "_append", _append_unsynced))
    stack.enter_context(patched(ReplicaActor, "durable_end", property(lambda self: self.end)))
    return stack


def _compactable_unlimited(self: Any) -> list:
    from groupcoord.storage.columnar import exported_prefix, read_export_floor

    return exported_prefix(self._segments[:-1], self._segments[-1], read_export_floor(self.directory))


def _hw_without_marker_rule(hw: int, leader_durable: int, matches: Any, acks: int, epoch_start: int) -> int:
    return decisions.advance_high_watermark(hw, leader_durable, matches, acks, -1)


def _no_truncation(leader: Any, leader_end: int, follower: Any, follower_end: int) -> int:
    return follower_end


def _one_round_truncation(leader: Any, leader_end: int, follower: Any, follower_end: int) -> int:
    return min(follower_end, leader.end_of_epoch(follower.last_epoch(follower_end), leader_end))


def _hw_counts_leader_end(self: Any) -> None:
    # An equivalent mutant (docs/replication.md): the answers are taken only after the leader's own fsync, under
    # the shipping lock, so no follower's match passes the leader's durable end and two acks never count an
    # unsynced record; no schedule can tell this apart from the real rule.
    matches = [f.match for f in self.followers if f.match is not None and f.voter]
    self.hw = decisions.advance_high_watermark(self.hw, self.plog.end_offset, matches, self.min_insync,
                                               self.epoch_start)
    self.plog.compaction_limit = self.hw


def _majority_of_one(self: Any) -> None:
    matches = [f.match for f in self.followers if f.match is not None and f.voter]
    self.hw = decisions.advance_high_watermark(self.hw, self.plog.durable_offset, matches, 1, self.epoch_start)
    self.plog.compaction_limit = self.hw


_REAL_INIT = ReplicaActor.__init__


def _init_forgetting_its_loss(self: ReplicaActor, *args: Any, **kwargs: Any) -> None:
    # The earlier break (CHECKPOINT_FILE patched to "writer.lock") changed nothing: a wiped directory has no
    # writer.lock either when the constructor looks, so the replica still knew it was lost. This one forgets.
    _REAL_INIT(self, *args, **kwargs)
    self.lost = False  # back empty, promised epoch 0, and it votes and follows


# name -> (what it breaks, a function returning the context manager that applies it)
MUTATIONS: dict[str, tuple[str, Callable[[], Any]]] = {
    "promise-before-fsync": (
        "a replica answers a promise (and an epoch it accepts) before its checkpoint is durable",
        lambda: patched(epoch_checkpoint.LeaderEpochCheckpoint, "write", _checkpoint_without_fsync)),
    "follower-unsynced-end": (
        "a follower acknowledges records it has not fsynced",
        lambda: _unsynced_follower()),
    "compaction-past-hw": (
        "compaction ignores the high watermark (keeps an uncommitted record, drops the committed one)",
        lambda: patched(partition_log.PartitionLog, "_compactable", _compactable_unlimited)),
    "truncation-skipped": (
        "a follower keeps its divergent suffix",
        lambda: patched(replica_actor, "divergence_point", _no_truncation)),
    "truncation-one-round": (
        "truncation in one round (the follower's last epoch only, as before KIP-279)",
        lambda: patched(replica_actor, "divergence_point", _one_round_truncation)),
    "own-epoch-marker-rule-removed": (
        "the high watermark may advance over older epochs' records before the leader's own marker",
        lambda: patched(replicated_log, "advance_high_watermark", _hw_without_marker_rule)),
    "wiped-replica-votes": (
        "a replica restarted without its storage votes and follows (issue 27 class 3 as found)",
        lambda: patched(ReplicaActor, "__init__", _init_forgetting_its_loss)),
    "leader-unsynced-end-counted": (
        "the leader counts its own unsynced records toward the high watermark",
        lambda: patched(replicated_log.ReplicatedLog, "_advance_hw", _hw_counts_leader_end)),
    "acks-one": (
        "a write is acknowledged once the leader alone holds it",
        lambda: patched(replicated_log.ReplicatedLog, "_advance_hw", _majority_of_one)),
    "no-lease": (
        "a deposed leader serves on without a lease, and followers promise at once",
        lambda: contextlib.ExitStack()),
}


def _no_lease() -> Any:
    stack = contextlib.ExitStack()
    stack.enter_context(patched(replicated_log.ReplicatedLog, "lease_holds", lambda self: True))
    stack.enter_context(patched(replica_actor, "LEASE_S", 0.0))
    return stack


MUTATIONS["no-lease"] = (MUTATIONS["no-lease"][0], _no_lease)


def _least_up_to_date(promises: Any) -> int | None:
    eligible = [i for i, p in enumerate(promises) if p.ok and not p.lost]
    return min(eligible, key=lambda i: (promises[i].last_epoch, promises[i].end)) if eligible else None


async def _accept_any_epoch(self: ReplicaActor, epoch: int) -> Any:
    if self.runtime is not None or self.lost:
        return await _REAL_ACCEPT(self, epoch)
    self._last_contact = self._granted_at = self.transport.monotonic()
    return None  # a leader of an older epoch may ship to us too: no fencing


_REAL_ACCEPT = ReplicaActor._accept_epoch


def _failed_log_acknowledges() -> Any:
    stack = contextlib.ExitStack()
    stack.enter_context(patched(ReplicaActor, "_storage_failed", lambda self, error: None))
    stack.enter_context(patched(ReplicaActor, "durable_end", property(lambda self: self.end)))
    return stack


MUTATIONS.update({
    "least-up-to-date-leader": (
        "the election picks the least up-to-date log among the promises",
        lambda: patched(election, "choose_leader", _least_up_to_date)),
    "stale-epoch-accepted": (
        "a follower accepts records from a leader of an epoch older than it promised (no fencing)",
        lambda: patched(ReplicaActor, "_accept_epoch", _accept_any_epoch)),
    "failed-log-acknowledges": (
        "a follower whose write failed keeps answering with its end (issue 27 class 1 as found)",
        _failed_log_acknowledges),
    "learner-votes-early": (
        "a learner becomes a voter while the new voters hold acknowledged records on too few replicas",
        lambda: patched(replicated_log, "voters_hold_watermark", lambda *args: True)),
})
