"""The pure decisions of replication: the high watermark, the choice of a leader, the truncation point (KIP-279)."""

from __future__ import annotations

from groupcoord.actors.service.replication.decisions import (
    advance_high_watermark,
    choose_leader,
    divergence_point,
    voters_hold_watermark,
)
from groupcoord.actors.service.replication.messages import PromiseAnswer
from groupcoord.storage.epoch_checkpoint import EpochState


def test_the_watermark_is_what_enough_replicas_hold_and_never_goes_back():
    assert advance_high_watermark(0, 10, [7, 3], acks=2, epoch_start=0) == 7
    assert advance_high_watermark(0, 10, [7, 3], acks=3, epoch_start=0) == 3
    assert advance_high_watermark(8, 10, [7, 3], acks=2, epoch_start=0) == 8  # never back
    assert advance_high_watermark(0, 10, [7], acks=3, epoch_start=0) == 0  # too few replicas answered


def test_the_watermark_passes_only_the_leaders_own_epoch_marker():
    # The marker of this epoch sits at 5: offsets up to it were written by older leaders.
    assert advance_high_watermark(0, 9, [5], acks=2, epoch_start=5) == 0
    assert advance_high_watermark(0, 9, [6], acks=2, epoch_start=5) == 6


def test_the_leader_is_the_most_up_to_date_promise_and_never_a_replica_that_lost_its_storage():
    promises = [
        PromiseAnswer(True, 4, "a", last_epoch=2, end=30),
        PromiseAnswer(True, 4, "b", last_epoch=3, end=10),
        PromiseAnswer(True, 4, "c", last_epoch=3, end=12, leading=True),
        PromiseAnswer(True, 4, "d", last_epoch=3, end=12),
        PromiseAnswer(False, 4, "e", lost=True),
    ]
    assert choose_leader(promises) == 3  # epoch first, then end; a sitting leader loses the tie
    assert choose_leader([PromiseAnswer(False, 5, "x"), PromiseAnswer(True, 4, "y", lost=True)]) is None


def test_truncation_stops_at_the_true_divergence_point_over_several_rounds():
    # The follower wrote epoch 1 to offset 5 and epoch 3 from 5; the leader's epoch 1 ended at 3, then epoch 2
    # wrote 3..8 and epoch 4 from 8. One round (the leader's end of epoch 3 = 8) would keep the follower's
    # epoch-1 and epoch-3 records at 3..8, which the leader does not have: the true cut is 3.
    leader = EpochState(4, ((1, 0), (2, 3), (4, 8)))
    follower = EpochState(3, ((1, 0), (3, 5)))
    assert divergence_point(leader, 12, follower, 10) == 3


def test_truncation_keeps_a_prefix_and_cuts_what_the_leader_never_wrote():
    leader = EpochState(3, ((1, 0), (3, 6)))
    assert divergence_point(leader, 9, EpochState(3, ((1, 0),)), 6) == 6  # a prefix: nothing cut
    assert divergence_point(leader, 9, EpochState(2, ((1, 0), (2, 6))), 8) == 6  # epoch 2 never reached the leader
    assert divergence_point(leader, 9, EpochState(3, ((1, 0), (3, 6))), 12) == 9  # past the leader's end
    assert divergence_point(leader, 9, EpochState(), 0) == 0


def test_a_learner_may_vote_once_the_new_voters_hold_the_watermark_on_enough_replicas():
    # The watermark is 10: the leader holds 12, the other follower 10; the learner, a flush behind, 8.
    assert voters_hold_watermark(10, 12, [10, 8], acks=2)
    # The other follower lags too (what was acknowledged sat on the lost replica): not yet.
    assert not voters_hold_watermark(10, 12, [9, 8], acks=2)
    assert voters_hold_watermark(10, 12, [9, 10], acks=2)
    assert not voters_hold_watermark(10, 12, [10, 8], acks=3)
    assert not voters_hold_watermark(10, 12, [], acks=2)  # the leader alone
