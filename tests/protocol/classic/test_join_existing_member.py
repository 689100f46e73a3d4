"""JoinGroup from a member the group already knows, in each state."""

from shard_context import GROUP, ShardContext

from groupcoord.protocol.errors import Errors


def _completing_group(ctx, n=2):
    """A group in CompletingRebalance at generation 2 (nobody synced yet)."""
    gen = ctx.stable_group(n)
    joins = {m: ctx.rejoin(GROUP, m) for m in gen.members}
    return ctx.generation_of({m: d.result() for m, d in joins.items()})


def test_same_metadata_in_completing_rebalance_returns_current_generation():
    ctx = ShardContext()
    gen = _completing_group(ctx)
    follower = ctx.rejoin(GROUP, gen.followers[0]).result()
    assert (follower.error, follower.generation_id, follower.leader, follower.members) == (
        Errors.NONE,
        gen.generation,
        gen.leader,
        [],
    )
    leader = ctx.rejoin(GROUP, gen.leader).result()
    assert leader.generation_id == gen.generation
    assert {m.member_id for m in leader.members} == set(gen.members)
    assert ctx.state() == "CompletingRebalance"


def test_changed_metadata_in_completing_rebalance_rebalances():
    ctx = ShardContext()
    gen = _completing_group(ctx, 3)
    parked_sync = ctx.send_sync(GROUP, gen.generation, gen.followers[0])
    assert not parked_sync.done()
    rejoin = ctx.rejoin(GROUP, gen.followers[1], protocols=(("range", b"changed"),))
    assert not rejoin.done()
    assert ctx.state() == "PreparingRebalance"
    assert parked_sync.result().error == Errors.REBALANCE_IN_PROGRESS


def test_follower_with_same_metadata_in_stable_gets_current_generation_without_rebalance():
    ctx = ShardContext()
    gen = ctx.stable_group(2)
    r = ctx.rejoin(GROUP, gen.followers[0]).result()
    assert (r.error, r.generation_id, r.leader, r.members, r.protocol_name) == (
        Errors.NONE,
        1,
        gen.leader,
        [],
        "range",
    )
    assert ctx.state() == "Stable"


def test_leader_rejoin_in_stable_rebalances_even_with_same_metadata():
    ctx = ShardContext()
    gen = ctx.stable_group(2)
    rejoin = ctx.rejoin(GROUP, gen.leader)
    assert not rejoin.done()
    assert ctx.state() == "PreparingRebalance"
    assert ctx.heartbeat(GROUP, 1, gen.followers[0]) == Errors.REBALANCE_IN_PROGRESS


def test_follower_with_changed_metadata_in_stable_rebalances():
    ctx = ShardContext()
    gen = ctx.stable_group(2)
    rejoin = ctx.rejoin(GROUP, gen.followers[0], protocols=(("range", b"new-topics"),))
    assert not rejoin.done()
    assert ctx.state() == "PreparingRebalance"
    leader = ctx.rejoin(GROUP, gen.leader).result()
    follower_meta = {m.member_id: m.metadata for m in leader.members}[gen.followers[0]]
    assert follower_meta == b"new-topics"


def test_protocol_order_counts_as_a_metadata_change():
    ctx = ShardContext()
    gen = ctx.stable_group(2, protocols=(("range", b"r"), ("roundrobin", b"rr")))
    ctx.rejoin(GROUP, gen.followers[0], protocols=(("roundrobin", b"rr"), ("range", b"r")))
    assert ctx.state() == "PreparingRebalance"


def test_known_member_id_on_unknown_group_is_unknown_member_and_creates_nothing():
    ctx = ShardContext()
    r = ctx.rejoin("nowhere", "client-1234").result()
    assert (r.error, r.member_id, r.generation_id) == (Errors.UNKNOWN_MEMBER_ID, "client-1234", -1)
    assert ctx.describe("nowhere").group_state == "Dead"
    assert ctx.log.records == []


def test_unknown_member_id_on_existing_group_is_unknown_member():
    ctx = ShardContext()
    ctx.stable_group(2)
    r = ctx.rejoin(GROUP, "client-unknown").result()
    assert (r.error, r.member_id) == (Errors.UNKNOWN_MEMBER_ID, "client-unknown")
    assert ctx.state() == "Stable"


def test_former_member_rejoining_an_empty_group_is_unknown_member():
    ctx = ShardContext()
    gen = ctx.stable_group(1)
    ctx.leave(GROUP, gen.leader)
    assert ctx.state() == "Empty"
    r = ctx.rejoin(GROUP, gen.leader).result()
    assert (r.error, r.member_id) == (Errors.UNKNOWN_MEMBER_ID, gen.leader)


def test_rejoin_in_preparing_rebalance_parks_until_completion():
    ctx = ShardContext()
    gen = ctx.stable_group(2)
    first = ctx.rejoin(GROUP, gen.leader)
    assert not first.done()
    second = ctx.rejoin(GROUP, gen.followers[0])
    assert first.result().generation_id == second.result().generation_id == 2
