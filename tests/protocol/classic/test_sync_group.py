"""SyncGroup: the leader's assignment, durability before Stable, and the error paths."""

from shard_context import GROUP, HeldLog, ShardContext

from groupcoord.protocol.classic.group import GroupState
from groupcoord.protocol.errors import Errors
from groupcoord.protocol.messages import HeartbeatRequest, SyncGroupResponse


def test_leader_assignment_completes_every_parked_member():
    ctx = ShardContext()
    gen = ctx.join_members(3)
    parked = {m: ctx.send_sync(GROUP, gen.generation, m) for m in gen.followers}
    assert not any(d.done() for d in parked.values())
    assert ctx.state() == "CompletingRebalance"
    assignments = {m: f"for-{m}".encode() for m in gen.members}
    leader = ctx.send_sync(GROUP, gen.generation, gen.leader, assignments).result()
    assert leader == SyncGroupResponse(Errors.NONE, "consumer", "range", assignments[gen.leader])
    for m, d in parked.items():
        assert d.result() == SyncGroupResponse(Errors.NONE, "consumer", "range", assignments[m])
    assert ctx.state() == "Stable"


def test_follower_syncing_after_the_leader_gets_its_assignment_at_once():
    ctx = ShardContext()
    gen = ctx.join_members(2)
    follower = gen.followers[0]
    ctx.send_sync(GROUP, gen.generation, gen.leader, {follower: b"late-but-fine"})
    r = ctx.send_sync(GROUP, gen.generation, follower).result()
    assert (r.error, r.assignment) == (Errors.NONE, b"late-but-fine")


def test_members_missing_from_the_assignment_get_empty_ones_and_unknown_ids_are_ignored():
    ctx = ShardContext()
    gen = ctx.join_members(2)
    follower = gen.followers[0]
    parked = ctx.send_sync(GROUP, gen.generation, follower)
    ctx.send_sync(GROUP, gen.generation, gen.leader, {gen.leader: b"L", "client-ghost": b"G"})
    assert (parked.result().error, parked.result().assignment) == (Errors.NONE, b"")
    members = {m.member_id: m.member_assignment for m in ctx.describe().members}
    assert members == {gen.leader: b"L", follower: b""}


def test_assignments_sent_by_followers_are_ignored():
    ctx = ShardContext()
    gen = ctx.join_members(2)
    follower = gen.followers[0]
    parked = ctx.send_sync(GROUP, gen.generation, follower, {follower: b"self-assigned"})
    assert not parked.done()
    assert ctx.state() == "CompletingRebalance"
    ctx.send_sync(GROUP, gen.generation, gen.leader, {follower: b"from-leader"})
    assert parked.result().assignment == b"from-leader"


def test_group_becomes_stable_only_once_its_record_is_durable():
    log = HeldLog()
    ctx = ShardContext(log=log)
    gen = ctx.join_members(2)
    follower = gen.followers[0]
    log.hold()
    parked = ctx.send_sync(GROUP, gen.generation, follower)
    leader = ctx.send_sync(GROUP, gen.generation, gen.leader, {follower: b"F", gen.leader: b"L"})
    assert len(log.records) > log.durable_offset
    assert not leader.done() and not parked.done()
    assert ctx.group().state == GroupState.COMPLETING_REBALANCE
    heartbeat = ctx.coord.heartbeat(HeartbeatRequest(GROUP, gen.generation, follower))
    assert not heartbeat.done()
    ctx.release()
    assert leader.result() == SyncGroupResponse(Errors.NONE, "consumer", "range", b"L")
    assert parked.result() == SyncGroupResponse(Errors.NONE, "consumer", "range", b"F")
    assert heartbeat.result().error == Errors.NONE
    assert ctx.state() == "Stable"


def test_rebalance_started_before_the_record_is_durable_wins():
    log = HeldLog()
    ctx = ShardContext(log=log)
    gen = ctx.join_members(2)
    follower = gen.followers[0]
    log.hold()
    parked = ctx.send_sync(GROUP, gen.generation, follower)
    leader = ctx.send_sync(GROUP, gen.generation, gen.leader, {follower: b"F", gen.leader: b"L"})
    rejoin = ctx.rejoin(GROUP, follower, protocols=(("range", b"changed"),))
    assert not parked.done() and not leader.done()
    ctx.release()
    assert parked.result().error == Errors.REBALANCE_IN_PROGRESS
    assert leader.result().error == Errors.REBALANCE_IN_PROGRESS
    assert not rejoin.done()
    assert ctx.state() == "PreparingRebalance"


def test_sync_with_wrong_protocol_type_or_name_is_inconsistent():
    ctx = ShardContext()
    gen = ctx.join_members(1)
    bad_type = ctx.send_sync(GROUP, 1, gen.leader, protocol_type="connect").result()
    bad_name = ctx.send_sync(GROUP, 1, gen.leader, protocol_name="roundrobin").result()
    assert bad_type == SyncGroupResponse(Errors.INCONSISTENT_GROUP_PROTOCOL, None, None, b"")
    assert bad_name.error == Errors.INCONSISTENT_GROUP_PROTOCOL
    assert ctx.state() == "CompletingRebalance"
    good = ctx.send_sync(GROUP, 1, gen.leader, {gen.leader: b"x"}, protocol_type="consumer", protocol_name="range")
    assert good.result().error == Errors.NONE


def test_sync_with_wrong_generation_is_illegal_generation():
    ctx = ShardContext()
    gen = ctx.join_members(2)
    r = ctx.send_sync(GROUP, gen.generation + 1, gen.leader, {gen.leader: b"x"}).result()
    assert r.error == Errors.ILLEGAL_GENERATION
    assert ctx.state() == "CompletingRebalance"


def test_sync_from_unknown_member_is_unknown_member():
    ctx = ShardContext()
    gen = ctx.join_members(1)
    assert ctx.send_sync(GROUP, gen.generation, "client-unknown").result().error == Errors.UNKNOWN_MEMBER_ID


def test_sync_to_unknown_group_is_unknown_member():
    ctx = ShardContext()
    assert ctx.send_sync("nowhere", 1, "client-1").result().error == Errors.UNKNOWN_MEMBER_ID


def test_sync_to_empty_group_is_unknown_member():
    ctx = ShardContext()
    gen = ctx.stable_group(1)
    ctx.leave(GROUP, gen.leader)
    assert ctx.send_sync(GROUP, 2, gen.leader).result().error == Errors.UNKNOWN_MEMBER_ID


def test_sync_during_preparing_rebalance_is_rebalance_in_progress():
    ctx = ShardContext()
    gen = ctx.stable_group(2)
    ctx.rejoin(GROUP, gen.leader)
    r = ctx.send_sync(GROUP, 1, gen.followers[0]).result()
    assert r.error == Errors.REBALANCE_IN_PROGRESS


def test_sync_in_stable_returns_the_stored_assignment():
    ctx = ShardContext()
    gen = ctx.stable_group(2)
    records = len(ctx.log.records)
    for i, m in enumerate(gen.members):
        r = ctx.send_sync(GROUP, 1, m).result()
        assert r == SyncGroupResponse(Errors.NONE, "consumer", "range", f"assignment-{i}".encode())
    assert len(ctx.log.records) == records


def test_stable_leader_resync_does_not_change_the_assignment():
    ctx = ShardContext()
    gen = ctx.stable_group(2)
    r = ctx.send_sync(GROUP, 1, gen.leader, {gen.leader: b"other"}).result()
    assert r.assignment == b"assignment-0"
