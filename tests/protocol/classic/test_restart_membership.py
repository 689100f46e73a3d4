"""A shard that loads another shard's records: what comes back and what does not."""

from shard_context import GROUP, INITIAL_DELAY_MS, SESSION_MS, ShardContext

from groupcoord.protocol.errors import Errors


def _static_stable(ctx):
    joined = [ctx.join(group_instance_id="s1", client_id="c1", client_host="/h1"), ctx.join(client_id="c2")]
    ctx.advance(INITIAL_DELAY_MS * 2)
    gen = ctx.generation_of({mid: d.result() for mid, d in joined})
    ctx.sync_all(gen)
    return gen


def test_stable_group_comes_back_stable_with_everything():
    ctx = ShardContext()
    gen = _static_stable(ctx)
    before = ctx.describe()
    restarted = ctx.restart()
    assert restarted.describe() == before
    assert before.group_state == "Stable"
    for i, m in enumerate(gen.members):
        r = restarted.send_sync(GROUP, gen.generation, m).result()
        assert (r.error, r.protocol_type, r.protocol_name, r.assignment) == (
            Errors.NONE,
            "consumer",
            "range",
            f"assignment-{i}".encode(),
        )


def test_restored_leader_and_generation_drive_the_next_rebalance():
    ctx = ShardContext()
    gen = ctx.stable_group(2)
    restarted = ctx.restart()
    assert restarted.heartbeat(GROUP, gen.generation, gen.followers[0]) == Errors.NONE
    follower = restarted.rejoin(GROUP, gen.followers[0]).result()
    assert (follower.generation_id, follower.leader) == (gen.generation, gen.leader)
    assert restarted.state() == "Stable"
    joins = [restarted.rejoin(GROUP, gen.leader), restarted.rejoin(GROUP, gen.followers[0])]
    leader = joins[0].result()
    assert (leader.generation_id, leader.leader) == (gen.generation + 1, gen.leader)


def test_static_mapping_is_restored():
    ctx = ShardContext()
    gen = _static_stable(ctx)
    restarted = ctx.restart()
    s1 = gen.leader
    assert restarted.heartbeat(GROUP, gen.generation, s1, "s1") == Errors.NONE
    assert restarted.heartbeat(GROUP, gen.generation, gen.followers[0], "s1") == Errors.FENCED_INSTANCE_ID
    replaced = restarted.send_join(group_instance_id="s1").result()
    assert (replaced.error, replaced.generation_id) == (Errors.NONE, gen.generation)
    assert replaced.member_id != s1


def test_empty_group_comes_back_empty_at_its_generation():
    ctx = ShardContext()
    gen = ctx.stable_group(1)
    ctx.leave(GROUP, gen.leader)
    restarted = ctx.restart()
    assert restarted.describe() == ctx.describe()
    assert restarted.state() == "Empty"
    member_id, pending = restarted.join()
    restarted.advance(INITIAL_DELAY_MS)
    assert (pending.result().generation_id, pending.result().leader) == (3, member_id)


def test_group_that_never_formed_a_generation_comes_back_empty():
    ctx = ShardContext()
    ctx.join()
    ctx.join()
    assert ctx.state() == "PreparingRebalance"
    restarted = ctx.restart()
    described = restarted.describe()
    assert (described.group_state, described.members) == ("Empty", [])


def test_member_that_does_not_heartbeat_after_a_restart_expires():
    ctx = ShardContext()
    gen = ctx.stable_group(2)
    ctx.advance(SESSION_MS // 2)
    for m in gen.members:
        ctx.heartbeat(GROUP, gen.generation, m)
    restarted = ctx.restart()
    restarted.advance(SESSION_MS - 1)
    assert restarted.heartbeat(GROUP, gen.generation, gen.followers[0]) == Errors.NONE
    assert restarted.member_ids() == set(gen.members)
    restarted.advance(1)
    assert restarted.member_ids() == {gen.followers[0]}
    assert restarted.state() == "PreparingRebalance"


def test_member_that_heartbeats_after_a_restart_stays_in_its_generation():
    ctx = ShardContext()
    gen = ctx.stable_group(1)
    restarted = ctx.restart()
    for _ in range(5):
        restarted.advance(SESSION_MS - 1)
        assert restarted.heartbeat(GROUP, gen.generation, gen.leader) == Errors.NONE
    assert restarted.state() == "Stable"
    assert restarted.member_ids() == {gen.leader}


def test_in_flight_rebalance_is_not_restored():
    ctx = ShardContext()
    gen = ctx.stable_group(2)
    ctx.rejoin(GROUP, gen.leader, protocols=(("range", b"changed"),))
    assert ctx.state() == "PreparingRebalance"
    restarted = ctx.restart()
    described = restarted.describe()
    assert described.group_state == "Stable"
    assert {m.member_id: m.member_metadata for m in described.members} == {m: b"range-meta" for m in gen.members}
    assert restarted.heartbeat(GROUP, gen.generation, gen.leader) == Errors.NONE


def test_completing_rebalance_is_lost_and_the_last_stored_generation_returns():
    ctx = ShardContext()
    gen = ctx.stable_group(2)
    joins = [ctx.rejoin(GROUP, m) for m in gen.members]
    assert {d.result().generation_id for d in joins} == {gen.generation + 1}
    assert ctx.state() == "CompletingRebalance"
    restarted = ctx.restart()
    assert restarted.state() == "Stable"
    assert restarted.heartbeat(GROUP, gen.generation + 1, gen.leader) == Errors.ILLEGAL_GENERATION
    r = restarted.send_sync(GROUP, gen.generation, gen.followers[0]).result()
    assert (r.error, r.assignment) == (Errors.NONE, b"assignment-1")


def test_group_over_the_max_size_rebalances_after_loading():
    ctx = ShardContext()
    gen = ctx.stable_group(3)
    restarted = ctx.restart(max_size=2)
    assert restarted.state() == "PreparingRebalance"
    assert restarted.heartbeat(GROUP, gen.generation, gen.leader) == Errors.REBALANCE_IN_PROGRESS


def test_a_second_restart_sees_generations_formed_after_the_first():
    ctx = ShardContext()
    gen = ctx.stable_group(2)
    once = ctx.restart()
    joins = {m: once.rejoin(GROUP, m) for m in gen.members}
    gen2 = once.generation_of({m: d.result() for m, d in joins.items()})
    once.sync_all(gen2, assignments={m: b"second" for m in gen2.members})
    twice = once.restart()
    described = twice.describe()
    assert described.group_state == "Stable"
    assert {m.member_id: m.member_assignment for m in described.members} == {m: b"second" for m in gen.members}
    assert twice.heartbeat(GROUP, gen.generation + 1, gen.leader) == Errors.NONE
