"""The client keeps its promises: poll deadline, bounded join/sync, heartbeats in CompletingRebalance, no lost race."""

from __future__ import annotations

import threading
import time

import pytest
from shard_link import Shard, member, settle

from groupcoord.actors.client.consumer_membership import run_heartbeats
from groupcoord.actors.client.membership import MemberState
from groupcoord.protocol import Errors, HeartbeatRequest, TopicPartition

pytestmark = pytest.mark.timeout(60)

ALL = {TopicPartition("t", p) for p in range(4)}


def test_poll_returns_by_its_deadline_while_the_join_is_held_and_the_next_poll_goes_on():
    shard = Shard()
    m, link = member(shard)
    assert m.ensure_active(m.clock()) is False  # MEMBER_ID_REQUIRED, then the join parks (initial delay)
    assert m.state == MemberState.REBALANCING and m.owned == set()
    joins = sum(1 for method, _ in link.sent if method == "join_group")
    shard.advance(200)  # the initial rebalance delay ends: the held join is answered
    assert m.ensure_active(m.clock()) is True
    assert m.owned == ALL and m.state == MemberState.STABLE
    assert sum(1 for method, _ in link.sent if method == "join_group") == joins  # the same join, not a new one


def test_a_join_not_answered_within_the_rebalance_timeout_is_given_up_and_sent_again():
    shard = Shard()
    m, link = member(shard, rebalance_timeout_ms=1_000)
    link.unanswered = True
    assert m.ensure_active(m.clock()) is False
    assert [method for method, _ in link.sent] == ["join_group"]
    m.clock.now += 1_000 / 1000 + 5.0 - 0.1  # just inside the rebalance timeout plus Kafka's 5 s lapse
    assert m.ensure_active(m.clock()) is False
    assert len(link.sent) == 1
    m.clock.now += 0.2
    assert m.ensure_active(m.clock()) is False
    assert [method for method, _ in link.sent] == ["join_group", "join_group"]  # given up, joining again
    link.unanswered = False
    settle(shard, m)
    assert m.owned == ALL


def test_heartbeats_run_while_the_sync_is_pending_in_completing_rebalance():
    shard = Shard()
    leader, leader_link = member(shard)
    follower, _ = member(shard)
    settle(shard, leader, follower)
    leader.request_rejoin(lost=False)
    follower.request_rejoin(lost=False)
    assert leader.ensure_active(leader.clock()) is False  # its join parks until the follower rejoins
    leader_link.unanswered = True  # the leader is slow: it has not taken its join's answer yet
    assert follower.ensure_active(follower.clock()) is False  # joined; its sync parks for the leader's
    assert follower.state == MemberState.COMPLETING_REBALANCE
    assert shard.coord.groups.get_group("g").state.value == "CompletingRebalance"
    request = follower.heartbeat_request()
    assert request is not None and request.generation_id == follower.generation == 2
    answer = shard.coord.heartbeat(request).result().error
    assert answer == Errors.NONE
    follower.on_heartbeat(request, answer)
    assert follower.state == MemberState.COMPLETING_REBALANCE and not follower.rejoin_needed
    leader_link.unanswered = False
    settle(shard, leader, follower)
    assert leader.owned | follower.owned == ALL and leader.generation == follower.generation == 2


def test_a_stale_heartbeat_answer_cannot_mark_lost_a_member_whose_join_succeeded():
    shard = Shard()
    lost: list[set] = []
    m, link = member(shard)
    m._on_lost = lost.append
    settle(shard, m)
    generation = m.generation
    stale = m.heartbeat_request()  # sent by the heartbeat thread just before the rejoin
    assert isinstance(stale, HeartbeatRequest)
    m.request_rejoin(lost=False)

    def stale_answer_arrives() -> None:  # while the caller's join is answered, the old heartbeat comes back
        m.on_heartbeat(stale, Errors.ILLEGAL_GENERATION)

    link.before_answer["join_group"] = stale_answer_arrives
    settle(shard, m)
    assert "join_group" not in link.before_answer  # the interleaving happened
    assert m.generation == generation + 1 and m.state == MemberState.STABLE
    assert not m.rejoin_needed and lost == []
    assert m.ensure_active(m.clock()) is True and m.owned == ALL and lost == []


class _FlakyConsumerMembership:
    """What run_heartbeats reads of a ConsumerMembership; its first heartbeat raises, the next ones count."""

    member_id, group_id, epoch, heartbeat_interval_s, last_heartbeat = "m", "g", 1, 0.01, 0.0

    def __init__(self) -> None:
        self.calls = 0
        self.second = threading.Event()

    def heartbeat(self, timeout_s: float | None = None) -> None:
        self.calls += 1
        self.last_heartbeat = time.monotonic()
        if self.calls == 1:
            raise RuntimeError("a bug in one heartbeat round")
        self.second.set()


def test_the_consumer_protocol_heartbeat_thread_survives_a_failed_round(ray_local):
    # With Ray: a heartbeat thread stops by design once Ray is gone (run alone, the test would see that).
    membership, stop = _FlakyConsumerMembership(), threading.Event()
    thread = threading.Thread(target=run_heartbeats, args=(membership, stop, lambda: True), daemon=True)
    thread.start()
    try:
        assert membership.second.wait(30), "no heartbeat after the failed round"
        assert thread.is_alive()
    finally:
        stop.set()
        thread.join(5)
