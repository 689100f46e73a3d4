"""The pure decisions of replication: the high watermark's advance, the choice of a leader, the truncation point.

No I/O and no state: the replica, the leader's log and the election call these, and their tests pin them down.
"""

from __future__ import annotations

from typing import Iterable, Sequence

from groupcoord.storage.epoch_checkpoint import EpochState

from .messages import PromiseAnswer


def advance_high_watermark(
    hw: int, leader_durable: int, voter_matches: Iterable[int], acks: int, epoch_start: int
) -> int:
    """The new high watermark: the offset `acks` replicas (the leader's durable end among them) hold.

    It never goes back, and it moves only past the leader's own epoch-start marker at `epoch_start`
    (Raft: a leader commits only entries of its own term; earlier ones with them).
    """
    held = sorted([leader_durable, *voter_matches], reverse=True)
    if len(held) < acks:
        return hw
    candidate = held[acks - 1]
    return candidate if candidate > epoch_start and candidate > hw else hw


def voters_hold_watermark(hw: int, leader_durable: int, voter_matches: Iterable[int], acks: int) -> bool:
    """Whether `acks` replicas of a set of voters (the leader's durable end among them) hold everything below `hw`:
    when a learner takes a lost voter's place, no acknowledged write may be left on fewer replicas than that."""
    held = sorted([leader_durable, *voter_matches], reverse=True)
    return len(held) >= acks and held[acks - 1] >= hw


def choose_leader(promises: Sequence[PromiseAnswer]) -> int | None:
    """The index of the promise with the most up-to-date log (last epoch, then end; a sitting leader last),
    among those that promised and did not lose their storage; None if none can lead."""
    eligible = [i for i, p in enumerate(promises) if p.ok and not p.lost]
    if not eligible:
        return None
    return max(eligible, key=lambda i: (promises[i].last_epoch, promises[i].end, not promises[i].leading))


def divergence_point(leader: EpochState, leader_end: int, follower: EpochState, follower_end: int) -> int:
    """Where a follower's log stops being a prefix of the leader's (KIP-279, its rounds repeated to a fixed point).

    Each round takes the follower's last epoch E, the leader's largest epoch at or below E and where
    that epoch ends in the leader's log, and where it ends in the follower's own: the follower's log
    is cut to the smallest of these, until a round cuts nothing.
    """
    end = follower_end
    while True:
        mine = follower.last_epoch(end)
        theirs = max((e for e, _ in leader.history if e <= mine), default=0)
        cut = min(end, leader.end_of_epoch(theirs, leader_end), follower.end_of_epoch(theirs, end))
        if cut >= end:
            return end
        end = cut
