"""group.max.size (KIP-389): who is admitted in each state."""

from shard_context import GROUP, INITIAL_DELAY_MS, REBALANCE_MS, ShardContext

from groupcoord.protocol.errors import Errors


def _full(r):
    return (r.error, r.member_id, r.generation_id) == (Errors.GROUP_MAX_SIZE_REACHED, "", -1)


def test_new_member_is_rejected_by_a_full_stable_group():
    ctx = ShardContext(max_size=2)
    gen = ctx.stable_group(2)
    assert _full(ctx.send_join().result())
    assert _full(ctx.send_join(group_instance_id="static").result())
    assert ctx.state() == "Stable"
    assert ctx.member_ids() == set(gen.members)


def test_existing_members_always_pass_in_a_full_stable_group():
    ctx = ShardContext(max_size=2)
    gen = ctx.stable_group(2)
    follower = ctx.rejoin(GROUP, gen.followers[0]).result()
    assert (follower.error, follower.generation_id) == (Errors.NONE, 1)
    leader = ctx.rejoin(GROUP, gen.leader)
    assert not leader.done()
    assert ctx.state() == "PreparingRebalance"


def test_completing_rebalance_counts_members():
    ctx = ShardContext(max_size=2)
    gen = ctx.join_members(2)
    assert ctx.state() == "CompletingRebalance"
    assert _full(ctx.send_join().result())
    again = ctx.rejoin(GROUP, gen.followers[0]).result()
    assert (again.error, again.generation_id) == (Errors.NONE, gen.generation)


def test_a_group_below_the_limit_admits_new_members():
    ctx = ShardContext(max_size=3)
    ctx.stable_group(2)
    assert ctx.send_join().result().error == Errors.MEMBER_ID_REQUIRED


def test_pending_ids_beyond_the_limit_are_rejected_at_their_second_join():
    ctx = ShardContext(max_size=2)
    pending = [ctx.send_join(client_id=f"c{i}").result().member_id for i in range(3)]
    first, second = (ctx.rejoin(GROUP, m) for m in pending[:2])
    third = ctx.rejoin(GROUP, pending[2]).result()
    assert _full(third)
    assert _full(ctx.send_join().result())
    ctx.advance(INITIAL_DELAY_MS * 2)
    assert first.result().generation_id == second.result().generation_id == 1
    assert ctx.member_ids() == set(pending[:2])


def test_preparing_rebalance_counts_members_awaiting_join_and_kicks_out_late_rejoiners():
    ctx = ShardContext(max_size=2)
    gen = ctx.stable_group(2)
    leader_join = ctx.rejoin(GROUP, gen.leader)
    newcomer, newcomer_join = ctx.join()
    assert ctx.member_ids() == {gen.leader, gen.followers[0], newcomer}
    late = ctx.rejoin(GROUP, gen.followers[0]).result()
    assert _full(late)
    assert ctx.member_ids() == {gen.leader, newcomer}
    ctx.advance(REBALANCE_MS)
    r = leader_join.result()
    assert (r.error, r.generation_id) == (Errors.NONE, 2)
    assert {m.member_id for m in r.members} == {gen.leader, newcomer}
    assert newcomer_join.result().generation_id == 2


def test_parked_member_rejoining_again_is_admitted_in_a_full_join_phase():
    ctx = ShardContext(max_size=2)
    gen = ctx.stable_group(2, session_timeout_ms=100_000)
    ctx.rejoin(GROUP, gen.leader)
    ctx.join()
    again = ctx.rejoin(GROUP, gen.leader)
    assert not again.done()
    assert gen.leader in ctx.member_ids()
