"""Heartbeat: the answer in each group state, and its error paths."""

from shard_context import GROUP, ShardContext

from groupcoord.protocol.errors import Errors
from groupcoord.protocol.messages import HeartbeatRequest


def test_heartbeat_in_stable_group_is_none():
    ctx = ShardContext()
    gen = ctx.stable_group(2)
    assert ctx.heartbeat(GROUP, 1, gen.followers[0]) == Errors.NONE


def test_heartbeat_in_completing_rebalance_is_none():
    ctx = ShardContext()
    gen = ctx.join_members(2)
    assert ctx.state() == "CompletingRebalance"
    assert ctx.heartbeat(GROUP, gen.generation, gen.followers[0]) == Errors.NONE


def test_heartbeat_in_preparing_rebalance_asks_to_rejoin():
    ctx = ShardContext()
    gen = ctx.stable_group(2)
    ctx.rejoin(GROUP, gen.leader)
    assert ctx.heartbeat(GROUP, 1, gen.followers[0]) == Errors.REBALANCE_IN_PROGRESS
    assert ctx.heartbeat(GROUP, 1, gen.leader) == Errors.REBALANCE_IN_PROGRESS


def test_heartbeat_in_empty_group_is_unknown_member():
    ctx = ShardContext()
    gen = ctx.stable_group(1)
    ctx.leave(GROUP, gen.leader)
    assert ctx.state() == "Empty"
    assert ctx.heartbeat(GROUP, 2, gen.leader) == Errors.UNKNOWN_MEMBER_ID


def test_heartbeat_with_wrong_generation_is_illegal_generation():
    ctx = ShardContext()
    gen = ctx.stable_group(2)
    assert ctx.heartbeat(GROUP, 0, gen.leader) == Errors.ILLEGAL_GENERATION
    assert ctx.heartbeat(GROUP, 2, gen.leader) == Errors.ILLEGAL_GENERATION


def test_heartbeat_from_old_generation_after_rebalance_is_illegal_generation():
    ctx = ShardContext()
    gen = ctx.stable_group(2)
    joins = [ctx.rejoin(GROUP, m) for m in gen.members]
    assert all(d.done() for d in joins)
    assert ctx.heartbeat(GROUP, 1, gen.leader) == Errors.ILLEGAL_GENERATION
    assert ctx.heartbeat(GROUP, 2, gen.leader) == Errors.NONE


def test_heartbeat_from_unknown_member_is_unknown_member():
    ctx = ShardContext()
    ctx.stable_group(1)
    assert ctx.heartbeat(GROUP, 1, "client-unknown") == Errors.UNKNOWN_MEMBER_ID


def test_heartbeat_to_unknown_group_is_unknown_member():
    ctx = ShardContext()
    assert ctx.heartbeat("nowhere", 1, "client-1") == Errors.UNKNOWN_MEMBER_ID
    assert ctx.describe("nowhere").group_state == "Dead"


def test_heartbeat_from_pending_member_is_unknown_member():
    ctx = ShardContext()
    ctx.stable_group(1)
    pending = ctx.send_join().result().member_id
    assert ctx.heartbeat(GROUP, 1, pending) == Errors.UNKNOWN_MEMBER_ID


def test_heartbeat_with_unknown_instance_id_is_unknown_member():
    ctx = ShardContext()
    gen = ctx.stable_group(1)
    assert ctx.heartbeat(GROUP, 1, gen.leader, group_instance_id="not-mapped") == Errors.UNKNOWN_MEMBER_ID


def test_equal_heartbeat_answers_are_one_shared_object():
    """A batch of heartbeats pickles its NONEs once (the answers are frozen, so sharing them is safe)."""
    ctx = ShardContext()
    gen = ctx.stable_group(3)
    answers = [ctx.coord.heartbeat(HeartbeatRequest(GROUP, gen.generation, m)).result() for m in gen.followers]
    answers.append(ctx.coord.heartbeat(HeartbeatRequest("no-such-group", 1, "m")).result())
    assert answers[0] is answers[1] and answers[0].error == Errors.NONE
    assert answers[-1].error == Errors.UNKNOWN_MEMBER_ID
