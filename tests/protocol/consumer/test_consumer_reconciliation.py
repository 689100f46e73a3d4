"""Reconciliation: revoke before assign, member states, and the session and rebalance timeouts that fence."""

from __future__ import annotations

from consumer_context import REBALANCE_MS, ConsumerContext, owners, tps

from groupcoord.protocol import Errors
from groupcoord.protocol.consumer.group import MemberState


def test_a_partition_goes_to_its_new_owner_only_after_the_old_one_released_it():
    ctx = ConsumerContext()
    a = ctx.join("a")
    b = ctx.join("b")
    # b is at the new epoch but its partitions are still a's: UNRELEASED_PARTITIONS, nothing assigned yet.
    assert b.epoch == 3 and b.owned == set()
    assert ctx.group().members["b"].state is MemberState.UNRELEASED_PARTITIONS
    # a is asked to revoke half: it stays at epoch 2 in UNREVOKED_PARTITIONS until it reports them gone.
    ctx.heartbeat(a)
    assert a.epoch == 2 and len(a.owned) == 3
    assert ctx.group().members["a"].state is MemberState.UNREVOKED_PARTITIONS
    ctx.heartbeat(b)
    assert b.owned == set()  # a has not acknowledged yet
    ctx.heartbeat(a)  # reports only the 3 it kept: the revocation is acknowledged
    assert a.epoch == 3
    ctx.heartbeat(b)
    assert len(b.owned) == 3 and owners([a, b]).keys() == tps("t", *range(6))
    assert ctx.describe().group_state == "Stable"


def test_the_group_is_reconciling_until_every_member_reached_the_target_epoch():
    ctx = ConsumerContext()
    a = ctx.join("a")
    ctx.join("b")
    assert ctx.describe().group_state == "Reconciling"
    ctx.heartbeat(a)
    assert ctx.describe().group_state == "Reconciling"


def test_the_uniform_assignor_moves_only_what_balance_needs_when_a_member_joins_and_leaves():
    ctx = ConsumerContext(topics={"t": 12})
    clients = [ctx.join(m) for m in "abc"]
    ctx.settle(clients)
    before = {c.member_id: set(c.owned) for c in clients}
    d = ctx.join("d")
    ctx.settle([*clients, d])
    assert all(len(c.owned) == 3 for c in [*clients, d])
    assert all(c.owned <= before[c.member_id] for c in clients)  # nobody got another's partition
    assert ctx.send(member_id="a", member_epoch=-1).error == Errors.NONE
    rest = [clients[1], clients[2], d]
    kept = {c.member_id: set(c.owned) for c in rest}
    ctx.settle(rest)
    assert all(kept[c.member_id] <= c.owned for c in rest)  # leaving only adds partitions to the others
    assert owners(rest).keys() == tps("t", *range(12))


def test_a_member_that_does_not_revoke_within_its_rebalance_timeout_is_fenced():
    ctx = ConsumerContext()
    a = ctx.join("a", rebalance_timeout_ms=5_000)
    b = ctx.join("b")
    ctx.heartbeat(a)  # asked to revoke, and never acknowledges
    ctx.advance(4_000)
    ctx.heartbeat(a, topic_partitions=sorted(tps("t", *range(6))))
    assert "a" in ctx.group().members
    ctx.advance(1_500)
    assert "a" not in ctx.group().members
    assert ctx.heartbeat(a).error == Errors.UNKNOWN_MEMBER_ID
    ctx.heartbeat(b)
    assert b.owned == tps("t", *range(6))


def test_a_member_whose_session_expires_is_fenced_and_its_partitions_move():
    ctx = ConsumerContext(consumer_session_timeout_ms=45_000)
    a, b = ctx.join("a"), ctx.join("b")
    ctx.settle([a, b])
    for _ in range(10):
        ctx.advance(10_000)
        ctx.heartbeat(b)
    assert "a" not in ctx.group().members and b.owned == tps("t", *range(6))
    assert ctx.heartbeat(a).error == Errors.UNKNOWN_MEMBER_ID


def test_a_static_member_that_left_temporarily_is_fenced_when_its_session_expires():
    ctx = ConsumerContext(consumer_session_timeout_ms=45_000)
    a = ctx.join("a1", instance_id="i-a")
    assert ctx.send(member_id="a1", member_epoch=-2, instance_id="i-a").error == Errors.NONE
    ctx.advance(44_000)
    assert "a1" in ctx.group().members
    ctx.advance(2_000)
    assert ctx.group().members == {} and ctx.describe().group_state == "Empty"
    assert a.epoch == 2


def test_range_assignor_is_used_when_members_ask_for_it():
    ctx = ConsumerContext(topics={"t": 4, "u": 4})
    a = ctx.join("a", topics=("t", "u"), server_assignor="range")
    b = ctx.join("b", topics=("t", "u"), server_assignor="range")
    ctx.settle([a, b])
    assert a.owned == tps("t", 0, 1) | tps("u", 0, 1) and b.owned == tps("t", 2, 3) | tps("u", 2, 3)
    assert ctx.describe().assignor_name == "range"


def test_state_survives_a_restart_mid_reconciliation_and_timers_are_rearmed():
    ctx = ConsumerContext(consumer_session_timeout_ms=45_000)
    a = ctx.join("a", rebalance_timeout_ms=REBALANCE_MS)
    b = ctx.join("b")
    ctx.heartbeat(a)  # a is revoking
    fresh = ctx.restart()
    assert fresh.describe() == ctx.describe()
    g, h = fresh.group(), ctx.group()
    assert (g.members, g.target_assignment, g.partition_owners) == (h.members, h.target_assignment, h.partition_owners)
    fresh.heartbeat(a)
    fresh.heartbeat(b)
    assert owners([a, b]).keys() == tps("t", *range(6)) and fresh.describe().group_state == "Stable"
    # After the restart every member must heartbeat again within its session.
    fresh.advance(46_000)
    assert fresh.group().members == {}


def test_a_restarted_shard_that_has_not_heard_of_the_topics_yet_keeps_the_assignment():
    ctx = ConsumerContext()
    a, b = ctx.join("a"), ctx.join("b")
    ctx.settle([a, b])
    fresh = ctx.restart()
    fresh.coord.consumer.topics.clear()  # the service has not told the restarted shard the topics yet
    epoch = fresh.describe().group_epoch
    for c in (a, b):
        fresh.heartbeat(c)
    assert fresh.describe().group_epoch == epoch and owners([a, b]).keys() == tps("t", *range(6))


def test_acknowledging_the_revocation_in_time_cancels_the_rebalance_timeout():
    ctx = ConsumerContext(consumer_session_timeout_ms=45_000)
    a = ctx.join("a", rebalance_timeout_ms=5_000)
    b = ctx.join("b")
    ctx.heartbeat(a)  # asked to revoke
    assert ("consumer-rebalance", "cg", "a") in ctx.coord.runtime.timers
    ctx.heartbeat(a)  # revoked: acknowledged
    assert ("consumer-rebalance", "cg", "a") not in ctx.coord.runtime.timers
    ctx.advance(6_000)
    ctx.heartbeat(b)
    assert set(ctx.group().members) == {"a", "b"} and owners([a, b]).keys() == tps("t", *range(6))
