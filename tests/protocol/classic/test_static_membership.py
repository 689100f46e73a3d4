"""Static membership (KIP-345): fencing, replacement with and without a rebalance, survival."""

from shard_context import GROUP, INITIAL_DELAY_MS, REBALANCE_MS, ShardContext

from groupcoord.protocol.errors import Errors
from groupcoord.protocol.messages import JoinGroupMember, MemberIdentity
from groupcoord.protocol.records import GroupMetadataKey


def _static_group(ctx, *instances, **kw):
    """A Stable group of static members; assignments b"assignment-<instance>"."""
    joined = {i: ctx.join(group_instance_id=i, client_id=f"client-{i}", **kw) for i in instances}
    ctx.advance(INITIAL_DELAY_MS * 2)
    gen = ctx.generation_of({mid: d.result() for mid, d in joined.values()})
    ids = {i: mid for i, (mid, _) in joined.items()}
    ctx.sync_all(gen, assignments={mid: f"assignment-{i}".encode() for i, mid in ids.items()})
    assert ctx.state() == "Stable"
    return gen, ids


def test_join_with_known_instance_id_and_wrong_member_id_is_fenced():
    ctx = ShardContext()
    _, ids = _static_group(ctx, "a", "b")
    r = ctx.rejoin(GROUP, ids["b"], group_instance_id="a").result()
    assert (r.error, r.member_id) == (Errors.FENCED_INSTANCE_ID, ids["b"])
    assert ctx.state() == "Stable"


def test_sync_with_wrong_member_id_for_instance_is_fenced():
    ctx = ShardContext()
    gen, ids = _static_group(ctx, "a", "b")
    r = ctx.send_sync(GROUP, gen.generation, ids["b"], group_instance_id="a").result()
    assert r.error == Errors.FENCED_INSTANCE_ID


def test_heartbeat_with_wrong_member_id_for_instance_is_fenced():
    ctx = ShardContext()
    gen, ids = _static_group(ctx, "a", "b")
    assert ctx.heartbeat(GROUP, gen.generation, "client-other", "a") == Errors.FENCED_INSTANCE_ID
    assert ctx.heartbeat(GROUP, gen.generation, ids["a"], "a") == Errors.NONE


def test_leave_with_wrong_member_id_for_instance_is_fenced():
    ctx = ShardContext()
    _, ids = _static_group(ctx, "a", "b")
    r = ctx.leave(GROUP, MemberIdentity(ids["b"], "a"))
    assert [m.error for m in r.members] == [Errors.FENCED_INSTANCE_ID]
    assert ctx.member_ids() == set(ids.values())
    assert ctx.state() == "Stable"


def test_known_member_with_unknown_instance_id_is_unknown_member():
    ctx = ShardContext()
    gen, ids = _static_group(ctx, "a")
    r = ctx.rejoin(GROUP, ids["a"], group_instance_id="z").result()
    assert r.error == Errors.UNKNOWN_MEMBER_ID
    assert ctx.send_sync(GROUP, gen.generation, ids["a"], group_instance_id="z").result().error == (
        Errors.UNKNOWN_MEMBER_ID
    )


def test_replacing_a_follower_in_stable_keeps_the_generation_without_rebalance():
    ctx = ShardContext()
    gen, ids = _static_group(ctx, "a", "b")
    old = ids["b"]
    r = ctx.send_join(group_instance_id="b", client_id="client-b").result()
    assert r.error == Errors.NONE
    assert r.member_id != old and r.member_id.startswith("b-")
    assert (r.generation_id, r.leader, r.members, r.skip_assignment) == (gen.generation, ids["a"], [], False)
    assert ctx.state() == "Stable"
    assert ctx.member_ids() == {ids["a"], r.member_id}
    assert ctx.heartbeat(GROUP, gen.generation, r.member_id, "b") == Errors.NONE
    assert ctx.send_sync(GROUP, gen.generation, r.member_id, group_instance_id="b").result().assignment == (
        b"assignment-b"
    )


def test_replaced_member_id_is_unknown_or_fenced():
    ctx = ShardContext()
    gen, ids = _static_group(ctx, "a", "b")
    old = ids["b"]
    ctx.send_join(group_instance_id="b").result()
    assert ctx.heartbeat(GROUP, gen.generation, old) == Errors.UNKNOWN_MEMBER_ID
    assert ctx.heartbeat(GROUP, gen.generation, old, "b") == Errors.FENCED_INSTANCE_ID
    assert ctx.send_sync(GROUP, gen.generation, old, group_instance_id="b").result().error == (
        Errors.FENCED_INSTANCE_ID
    )
    assert ctx.rejoin(GROUP, old, group_instance_id="b").result().error == Errors.FENCED_INSTANCE_ID


def test_replacement_without_rebalance_is_persisted_with_the_new_member_id():
    ctx = ShardContext()
    gen, ids = _static_group(ctx, "a", "b")
    r = ctx.send_join(group_instance_id="b", protocols=(("range", b"new-meta"),)).result()
    last = ctx.log.records[-1]
    assert last.key == GroupMetadataKey(GROUP)
    assert (last.value.generation, last.value.protocol, last.value.leader) == (
        gen.generation,
        "range",
        ids["a"],
    )
    stored = {m.member_id: (m.group_instance_id, m.subscription, m.assignment) for m in last.value.members}
    assert stored == {
        ids["a"]: ("a", b"range-meta", b"assignment-a"),
        r.member_id: ("b", b"new-meta", b"assignment-b"),
    }


def test_replacing_the_leader_in_stable_hands_it_the_members_with_skip_assignment():
    ctx = ShardContext()
    gen, ids = _static_group(ctx, "a", "b")
    r = ctx.send_join(group_instance_id="a").result()
    assert r.error == Errors.NONE
    assert (r.generation_id, r.leader, r.skip_assignment) == (gen.generation, r.member_id, True)
    assert sorted(r.members, key=lambda m: m.group_instance_id) == [
        JoinGroupMember(r.member_id, "a", b"range-meta"),
        JoinGroupMember(ids["b"], "b", b"range-meta"),
    ]
    assert ctx.state() == "Stable"
    assert ctx.rejoin(GROUP, ids["b"], group_instance_id="b").result().leader == r.member_id


def test_replacement_that_changes_the_selected_protocol_rebalances():
    ctx = ShardContext()
    both = (("range", b"r"), ("roundrobin", b"rr"))
    gen, ids = _static_group(ctx, "a", "b", protocols=both)
    pending = ctx.send_join(group_instance_id="b", protocols=(("roundrobin", b"rr"),))
    assert not pending.done()
    assert ctx.state() == "PreparingRebalance"
    ctx.rejoin(GROUP, ids["a"], group_instance_id="a", protocols=both)
    r = pending.result()
    assert (r.error, r.generation_id, r.protocol_name) == (Errors.NONE, gen.generation + 1, "roundrobin")


def test_replacement_during_completing_rebalance_rebalances():
    ctx = ShardContext()
    gen, ids = _static_group(ctx, "a", "b")
    joins = [ctx.rejoin(GROUP, ids[i], group_instance_id=i) for i in ids]
    assert {d.result().generation_id for d in joins} == {gen.generation + 1}
    assert ctx.state() == "CompletingRebalance"
    replacement = ctx.send_join(group_instance_id="b")
    assert not replacement.done()
    assert ctx.state() == "PreparingRebalance"
    ctx.rejoin(GROUP, ids["a"], group_instance_id="a")
    r = replacement.result()
    assert (r.error, r.generation_id) == (Errors.NONE, gen.generation + 2)


def test_replacement_fences_the_parked_sync_of_the_old_member_id():
    ctx = ShardContext()
    gen, ids = _static_group(ctx, "a", "b")
    joins = [ctx.rejoin(GROUP, ids[i], group_instance_id=i) for i in ids]
    assert all(d.done() for d in joins)
    old_sync = ctx.send_sync(GROUP, gen.generation + 1, ids["b"], group_instance_id="b")
    assert not old_sync.done()
    ctx.send_join(group_instance_id="b")
    assert old_sync.result().error == Errors.FENCED_INSTANCE_ID
    assert ctx.state() == "PreparingRebalance"


def test_replacement_fences_the_parked_join_of_the_old_member_id():
    ctx = ShardContext()
    gen, ids = _static_group(ctx, "a", "b")
    old_join = ctx.rejoin(GROUP, ids["b"], group_instance_id="b", protocols=(("range", b"changed"),))
    assert ctx.state() == "PreparingRebalance"
    assert not old_join.done()
    replacement = ctx.send_join(group_instance_id="b")
    ctx.rejoin(GROUP, ids["a"], group_instance_id="a")
    r = old_join.result()
    assert (r.error, r.member_id) == (Errors.FENCED_INSTANCE_ID, ids["b"])
    new = replacement.result()
    assert (new.error, new.generation_id) == (Errors.NONE, gen.generation + 1)
    assert new.member_id != ids["b"]


def test_static_member_rejoining_with_its_member_id_follows_the_known_member_path():
    ctx = ShardContext()
    gen, ids = _static_group(ctx, "a", "b")
    r = ctx.rejoin(GROUP, ids["b"], group_instance_id="b").result()
    assert (r.error, r.member_id, r.generation_id) == (Errors.NONE, ids["b"], gen.generation)
    assert ctx.state() == "Stable"


def test_static_member_survives_a_missed_rebalance_until_its_session_expires():
    ctx = ShardContext()
    gen, ids = _static_group(ctx, "a", "b", session_timeout_ms=15_000)
    rejoin = ctx.rejoin(GROUP, ids["a"], group_instance_id="a", session_timeout_ms=15_000)
    for _ in range(2):
        ctx.advance(10_000)
        assert ctx.heartbeat(GROUP, gen.generation, ids["b"], "b") == Errors.REBALANCE_IN_PROGRESS
    ctx.advance(REBALANCE_MS - 20_000)
    r = rejoin.result()
    assert r.generation_id == gen.generation + 1
    assert {m.group_instance_id for m in r.members} == {"a", "b"}
    assert ctx.member_ids() == set(ids.values())
    assert ctx.heartbeat(GROUP, gen.generation, ids["b"], "b") == Errors.ILLEGAL_GENERATION
    ctx.send_sync(GROUP, r.generation_id, ids["a"], {ids["a"]: b"A"}, group_instance_id="a")
    ctx.advance(15_000 - 1)
    assert ids["b"] in ctx.member_ids()
    assert ctx.heartbeat(GROUP, r.generation_id, ids["a"], "a") == Errors.NONE
    ctx.advance(1)
    assert ctx.member_ids() == {ids["a"]}
    assert ctx.state() == "PreparingRebalance"
