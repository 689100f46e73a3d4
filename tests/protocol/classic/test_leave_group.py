"""LeaveGroup (KIP-345 batch leave): per-member errors, admin removal, and what a leave triggers."""

from shard_context import GROUP, INITIAL_DELAY_MS, ShardContext

from groupcoord.protocol.errors import Errors
from groupcoord.protocol.messages import LeaveMemberResponse, MemberIdentity
from groupcoord.protocol.records import GroupMetadataKey, GroupMetadataValue


def _static_and_dynamic(ctx):
    """A Stable group: static "s1" (leader), static "s2", one dynamic member."""
    joined = [
        ctx.join(group_instance_id="s1"),
        ctx.join(group_instance_id="s2"),
        ctx.join(),
    ]
    ctx.advance(INITIAL_DELAY_MS * 2)
    gen = ctx.generation_of({mid: d.result() for mid, d in joined})
    ctx.sync_all(gen)
    return gen, [mid for mid, _ in joined]


def test_leave_on_unknown_group_answers_unknown_member_for_each():
    ctx = ShardContext()
    r = ctx.leave("nowhere", MemberIdentity("m-1"), MemberIdentity("", "i-2"))
    assert r.error == Errors.NONE
    assert r.members == [
        LeaveMemberResponse("m-1", None, Errors.UNKNOWN_MEMBER_ID),
        LeaveMemberResponse("", "i-2", Errors.UNKNOWN_MEMBER_ID),
    ]
    assert ctx.describe("nowhere").group_state == "Dead"


def test_batch_leave_reports_an_error_per_member():
    ctx = ShardContext()
    _gen, (s1, s2, dyn) = _static_and_dynamic(ctx)
    r = ctx.leave(
        GROUP,
        MemberIdentity(dyn),
        MemberIdentity("", "s2"),
        MemberIdentity("client-ghost"),
        MemberIdentity(s2, "s1"),
        MemberIdentity("", "no-such-instance"),
    )
    assert r.error == Errors.NONE
    assert r.members == [
        LeaveMemberResponse(dyn, None, Errors.NONE),
        LeaveMemberResponse("", "s2", Errors.NONE),
        LeaveMemberResponse("client-ghost", None, Errors.UNKNOWN_MEMBER_ID),
        LeaveMemberResponse(s2, "s1", Errors.FENCED_INSTANCE_ID),
        LeaveMemberResponse("", "no-such-instance", Errors.UNKNOWN_MEMBER_ID),
    ]
    assert ctx.member_ids() == {s1}
    assert ctx.state() == "PreparingRebalance"


def test_admin_removal_by_instance_id():
    ctx = ShardContext()
    gen, (s1, _s2, _) = _static_and_dynamic(ctx)
    r = ctx.leave(GROUP, MemberIdentity("", "s1"))
    assert r.members == [LeaveMemberResponse("", "s1", Errors.NONE)]
    assert s1 not in ctx.member_ids()
    assert ctx.heartbeat(GROUP, gen.generation, s1, "s1") == Errors.UNKNOWN_MEMBER_ID


def test_leave_with_member_and_instance_id():
    ctx = ShardContext()
    _, (_s1, s2, _) = _static_and_dynamic(ctx)
    r = ctx.leave(GROUP, MemberIdentity(s2, "s2"))
    assert r.members == [LeaveMemberResponse(s2, "s2", Errors.NONE)]
    assert s2 not in ctx.member_ids()


def test_leave_in_stable_rebalances_and_a_leaving_leader_is_replaced():
    ctx = ShardContext()
    gen = ctx.stable_group(3)
    ctx.leave(GROUP, gen.leader)
    assert ctx.state() == "PreparingRebalance"
    assert ctx.heartbeat(GROUP, 1, gen.followers[0]) == Errors.REBALANCE_IN_PROGRESS
    joins = [ctx.rejoin(GROUP, m) for m in gen.followers]
    leaders = {d.result().leader for d in joins}
    assert len(leaders) == 1 and leaders <= set(gen.followers)


def test_leave_in_completing_rebalance_answers_parked_syncs_rebalance_in_progress():
    ctx = ShardContext()
    gen = ctx.join_members(3)
    parked = ctx.send_sync(GROUP, gen.generation, gen.followers[0])
    ctx.leave(GROUP, gen.followers[1])
    assert parked.result().error == Errors.REBALANCE_IN_PROGRESS
    assert ctx.state() == "PreparingRebalance"


def test_leave_of_a_parked_member_answers_its_join_unknown_member():
    ctx = ShardContext()
    gen = ctx.stable_group(3)
    parked = ctx.rejoin(GROUP, gen.leader)
    ctx.leave(GROUP, gen.leader)
    r = parked.result()
    assert (r.error, r.member_id) == (Errors.UNKNOWN_MEMBER_ID, "")


def test_leave_completes_a_join_phase_in_which_the_rest_has_rejoined():
    ctx = ShardContext()
    gen = ctx.stable_group(3)
    joins = [ctx.rejoin(GROUP, m) for m in gen.members[:2]]
    assert not any(d.done() for d in joins)
    ctx.leave(GROUP, gen.members[2])
    assert {d.result().generation_id for d in joins} == {2}


def test_leave_during_the_initial_delay_does_not_complete_the_join_early():
    """Java: a leave in PreparingRebalance calls maybeCompleteJoinPhase, which never completes an
    initial rebalance (previousState == Empty); only the initial-delay timer does."""
    ctx = ShardContext()
    _, first = ctx.join()
    second_id, _ = ctx.join()
    ctx.advance(1_000)
    ctx.leave(GROUP, second_id)
    assert not first.done()
    assert ctx.state() == "PreparingRebalance"
    ctx.advance(INITIAL_DELAY_MS * 2)
    assert first.result().generation_id == 1


def test_leave_of_a_pending_member_during_the_initial_delay_does_not_complete_the_join_early():
    ctx = ShardContext()
    _, first = ctx.join()
    pending_id = ctx.send_join().result().member_id
    ctx.advance(1_000)
    ctx.leave(GROUP, pending_id)
    assert not first.done()
    ctx.advance(INITIAL_DELAY_MS - 1_000)
    assert first.result().generation_id == 1


def test_leave_of_the_last_member_empties_the_group_with_a_new_generation_and_record():
    ctx = ShardContext()
    gen = ctx.stable_group(1)
    ctx.advance(500)
    ctx.leave(GROUP, gen.leader)
    described = ctx.describe()
    assert (described.group_state, described.members) == ("Empty", [])
    assert ctx.log.records[-1] == (
        GroupMetadataKey(GROUP),
        GroupMetadataValue("consumer", 2, None, None, ctx.clock.now_ms(), ()),
    )
    fresh_id, fresh = ctx.join()
    ctx.advance(INITIAL_DELAY_MS)
    assert (fresh.result().generation_id, fresh.result().leader) == (3, fresh_id)


def test_leave_from_an_empty_group_is_unknown_member():
    ctx = ShardContext()
    gen = ctx.stable_group(1)
    ctx.leave(GROUP, gen.leader)
    r = ctx.leave(GROUP, gen.leader)
    assert (r.error, [m.error for m in r.members]) == (Errors.NONE, [Errors.UNKNOWN_MEMBER_ID])
