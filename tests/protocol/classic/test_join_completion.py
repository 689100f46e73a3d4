"""When a join phase completes: everyone rejoined, the rebalance timeout, the initial delay (KIP-134)."""

from shard_context import GROUP, INITIAL_DELAY_MS, REBALANCE_MS, SESSION_MS, ShardContext

from groupcoord.protocol.errors import Errors
from groupcoord.protocol.messages import JoinGroupMember, JoinGroupResponse


def test_join_completes_once_every_member_has_rejoined():
    ctx = ShardContext()
    gen = ctx.stable_group(3)
    joins = {m: ctx.rejoin(GROUP, m) for m in gen.members}
    assert all(d.done() for d in joins.values())
    assert {d.result().generation_id for d in joins.values()} == {2}
    assert ctx.state() == "CompletingRebalance"


def test_join_waits_for_every_member_until_then():
    ctx = ShardContext()
    gen = ctx.stable_group(3)
    joins = [ctx.rejoin(GROUP, m) for m in gen.members[:2]]
    assert not any(d.done() for d in joins)
    assert ctx.state() == "PreparingRebalance"


def test_completed_join_answers_with_generation_protocol_and_leader():
    ctx = ShardContext()
    gen = ctx.stable_group(2)
    joins = {m: ctx.rejoin(GROUP, m) for m in gen.members}
    for member_id, d in joins.items():
        r = d.result()
        assert r == JoinGroupResponse(
            Errors.NONE,
            2,
            "consumer",
            "range",
            gen.leader,
            member_id,
            r.members,
            False,
        )
    assert {m.member_id for m in joins[gen.leader].result().members} == set(gen.members)
    assert joins[gen.followers[0]].result().members == []


def test_rebalance_timeout_is_the_largest_of_the_members():
    ctx = ShardContext()
    short_id, short = ctx.join(rebalance_timeout_ms=10_000)
    long_id, long = ctx.join(rebalance_timeout_ms=60_000, session_timeout_ms=100_000)
    ctx.advance(INITIAL_DELAY_MS * 2)
    gen = ctx.generation_of({short_id: short.result(), long_id: long.result()})
    ctx.sync_all(gen)
    rejoin = ctx.rejoin(GROUP, short_id, rebalance_timeout_ms=10_000)
    ctx.advance(59_999)
    assert not rejoin.done()
    ctx.advance(1)
    r = rejoin.result()
    assert (r.error, r.generation_id) == (Errors.NONE, gen.generation + 1)


def test_dynamic_members_that_did_not_rejoin_are_removed():
    ctx = ShardContext()
    gen = ctx.stable_group(3, session_timeout_ms=100_000)
    rejoin = ctx.rejoin(GROUP, gen.leader, session_timeout_ms=100_000)
    ctx.advance(REBALANCE_MS)
    r = rejoin.result()
    assert (r.error, r.generation_id, r.members) == (
        Errors.NONE,
        2,
        [JoinGroupMember(gen.leader, None, b"range-meta")],
    )
    assert ctx.member_ids() == {gen.leader}


def test_static_members_that_did_not_rejoin_are_kept_with_their_metadata():
    ctx = ShardContext()
    static_id, static_join = ctx.join(
        group_instance_id="i-1", session_timeout_ms=100_000, protocols=(("range", b"static-meta"),)
    )
    dynamic_id, dynamic_join = ctx.join(session_timeout_ms=100_000)
    ctx.advance(INITIAL_DELAY_MS * 2)
    gen = ctx.generation_of({static_id: static_join.result(), dynamic_id: dynamic_join.result()})
    ctx.sync_all(gen)
    rejoin = ctx.rejoin(GROUP, dynamic_id, protocols=(("range", b"new"),), session_timeout_ms=100_000)
    ctx.advance(REBALANCE_MS)
    r = rejoin.result()
    assert r.generation_id == 2
    assert sorted(r.members, key=lambda m: m.member_id) == sorted(
        [JoinGroupMember(static_id, "i-1", b"static-meta"), JoinGroupMember(dynamic_id, None, b"new")],
        key=lambda m: m.member_id,
    )
    assert ctx.member_ids() == {static_id, dynamic_id}


def test_join_phase_with_nobody_rejoined_is_extended_by_another_rebalance_timeout():
    ctx = ShardContext()
    a_id, a = ctx.join(group_instance_id="a", session_timeout_ms=200_000)
    b_id, b = ctx.join(group_instance_id="b", session_timeout_ms=200_000)
    d_id, d = ctx.join(session_timeout_ms=200_000)
    ctx.advance(INITIAL_DELAY_MS * 2)
    gen = ctx.generation_of({a_id: a.result(), b_id: b.result(), d_id: d.result()})
    ctx.sync_all(gen)
    ctx.leave(GROUP, d_id)
    assert ctx.state() == "PreparingRebalance"
    ctx.advance(REBALANCE_MS)
    assert ctx.state() == "PreparingRebalance"
    assert ctx.member_ids() == {a_id, b_id}
    rejoin = ctx.rejoin(GROUP, a_id, group_instance_id="a", session_timeout_ms=200_000)
    ctx.advance(REBALANCE_MS - 1)
    assert not rejoin.done()
    ctx.advance(1)
    r = rejoin.result()
    assert (r.error, r.generation_id, r.leader) == (Errors.NONE, 2, a_id)
    assert {m.member_id for m in r.members} == {a_id, b_id}


def test_generation_increments_with_each_completed_join():
    ctx = ShardContext()
    gen = ctx.stable_group(1)
    for expected in (2, 3, 4):
        r = ctx.rejoin(GROUP, gen.leader).result()
        assert r.generation_id == expected
        ctx.send_sync(GROUP, expected, gen.leader, {gen.leader: b"x"})


# --- initial rebalance delay (KIP-134) ------------------------------------------------------


def test_initial_rebalance_never_completes_early():
    ctx = ShardContext()
    _, pending = ctx.join()
    ctx.advance(INITIAL_DELAY_MS - 1)
    assert not pending.done()
    assert ctx.state() == "PreparingRebalance"
    ctx.advance(1)
    assert pending.result().generation_id == 1


def test_initial_rebalance_is_extended_while_new_members_arrive():
    ctx = ShardContext()
    a_id, a = ctx.join()
    ctx.advance(2_000)
    b_id, b = ctx.join()
    ctx.advance(1_000)
    assert not a.done() and not b.done()
    ctx.advance(INITIAL_DELAY_MS - 1)
    assert not a.done()
    ctx.advance(1)
    assert {a.result().generation_id, b.result().generation_id} == {1}
    assert {m.member_id for m in a.result().members} == {a_id, b_id}


def test_initial_rebalance_is_bounded_by_the_rebalance_timeout():
    ctx = ShardContext()
    _, first = ctx.join()
    elapsed = 0
    while not first.done():
        ctx.advance(1_000)
        elapsed += 1_000
        ctx.join()
        assert elapsed <= REBALANCE_MS
    assert elapsed == REBALANCE_MS
    assert first.result().generation_id == 1


def test_initial_rebalance_with_rebalance_timeout_below_the_delay_completes_at_the_delay():
    ctx = ShardContext()
    _, first = ctx.join(rebalance_timeout_ms=1_000)
    ctx.advance(1_000)
    _, second = ctx.join(rebalance_timeout_ms=1_000)
    ctx.advance(INITIAL_DELAY_MS - 1_000)
    assert first.result().generation_id == second.result().generation_id == 1


def test_join_phase_in_which_no_dynamic_member_rejoined_empties_the_group():
    ctx = ShardContext()
    gen = ctx.stable_group(2, session_timeout_ms=100_000)
    newcomer, _ = ctx.join(session_timeout_ms=100_000)
    ctx.leave(GROUP, newcomer)
    assert ctx.state() == "PreparingRebalance"
    ctx.advance(REBALANCE_MS)
    assert ctx.state() == "Empty"
    assert ctx.heartbeat(GROUP, gen.generation, gen.leader) == Errors.UNKNOWN_MEMBER_ID
    assert ctx.log.records[-1].value.generation == gen.generation + 1


def test_session_expiry_of_the_last_missing_member_completes_the_join():
    ctx = ShardContext()
    gen = ctx.stable_group(2)
    rejoin = ctx.rejoin(GROUP, gen.leader)
    ctx.advance(SESSION_MS - 1)
    assert not rejoin.done()
    ctx.advance(1)
    r = rejoin.result()
    assert (r.generation_id, r.leader, [m.member_id for m in r.members]) == (2, gen.leader, [gen.leader])


def test_initial_delay_is_extended_for_a_group_that_was_empty_at_a_later_generation():
    """Java extends when the previous state was Empty, whatever the generation (Scala: only generation 0)."""
    ctx = ShardContext()
    gen = ctx.stable_group(1)
    ctx.leave(GROUP, gen.leader)
    _, a = ctx.join()
    ctx.advance(2_000)
    ctx.join()
    ctx.advance(INITIAL_DELAY_MS - 2_000)
    assert not a.done()
    ctx.advance(INITIAL_DELAY_MS)
    assert a.result().generation_id == 3


def test_expiry_of_a_pending_member_during_the_initial_delay_completes_the_join():
    """Java: removePendingMemberAndUpdateClassicGroup completes a join phase in which everyone has
    joined, without the initial-rebalance check that maybeCompleteJoinPhase makes."""
    ctx = ShardContext()
    _, first = ctx.join()
    ctx.send_join(session_timeout_ms=1_000)
    ctx.advance(999)
    assert not first.done()
    ctx.advance(1)
    assert first.result().generation_id == 1
