"""Protocol type and protocol selection, and leader election."""

from shard_context import GROUP, REBALANCE_MS, ShardContext

from groupcoord.protocol.classic.group import Member, generate_member_id
from groupcoord.protocol.errors import Errors
from groupcoord.protocol.messages import JoinGroupMember

RANGE_RR = (("range", b"r"), ("roundrobin", b"rr"))


def _join_all(ctx, protocol_lists):
    pending = [ctx.join(protocols=p, client_id=f"c{i}") for i, p in enumerate(protocol_lists)]
    ctx.advance(3_000)
    ctx.advance(3_000)
    return [(mid, d.result()) for mid, d in pending]


def test_first_member_fixes_the_protocol_type():
    ctx = ShardContext()
    _member_id, pending = ctx.join(protocol_type="connect")
    ctx.advance(3_000)
    assert pending.result().protocol_type == "connect"
    assert ctx.describe().protocol_type == "connect"
    other = ctx.send_join(protocol_type="consumer").result()
    assert (other.error, other.member_id) == (Errors.INCONSISTENT_GROUP_PROTOCOL, "")


def test_empty_protocol_type_is_inconsistent_on_an_empty_group():
    ctx = ShardContext()
    r = ctx.send_join(protocol_type="").result()
    assert (r.error, r.member_id, r.generation_id) == (Errors.INCONSISTENT_GROUP_PROTOCOL, "", -1)
    assert ctx.describe().members == []


def test_empty_protocol_list_is_inconsistent_on_an_empty_group():
    ctx = ShardContext()
    r = ctx.send_join(protocols=()).result()
    assert (r.error, r.member_id) == (Errors.INCONSISTENT_GROUP_PROTOCOL, "")


def test_protocol_type_mismatch_is_inconsistent_for_existing_member_too():
    ctx = ShardContext()
    gen = ctx.stable_group(2)
    r = ctx.rejoin(GROUP, gen.followers[0], protocol_type="connect").result()
    assert (r.error, r.member_id) == (Errors.INCONSISTENT_GROUP_PROTOCOL, gen.followers[0])
    assert ctx.state() == "Stable"


def test_no_protocol_in_common_with_all_members_is_inconsistent():
    ctx = ShardContext()
    ctx.stable_group(2)
    r = ctx.send_join(protocols=(("roundrobin", b"x"),)).result()
    assert (r.error, r.member_id) == (Errors.INCONSISTENT_GROUP_PROTOCOL, "")


def test_one_protocol_in_common_with_all_members_is_enough():
    ctx = ShardContext()
    ctx.stable_group(2)
    r = ctx.send_join(protocols=(("roundrobin", b"x"), ("range", b"y"))).result()
    assert r.error == Errors.MEMBER_ID_REQUIRED


def test_each_member_votes_for_its_first_protocol_supported_by_all():
    ctx = ShardContext()
    joined = _join_all(
        ctx,
        [
            (("range", b"a"), ("roundrobin", b"a")),
            (("roundrobin", b"b"), ("range", b"b")),
            (("roundrobin", b"c"),),
        ],
    )
    assert {r.protocol_name for _, r in joined} == {"roundrobin"}


def test_protocol_with_most_votes_is_selected():
    ctx = ShardContext()
    joined = _join_all(ctx, [RANGE_RR, RANGE_RR, (("roundrobin", b"rr"), ("range", b"r"))])
    assert {r.protocol_name for _, r in joined} == {"range"}


def test_empty_group_takes_the_protocol_type_of_its_next_first_member():
    ctx = ShardContext()
    gen = ctx.stable_group(1)
    ctx.leave(GROUP, gen.leader)
    assert ctx.state() == "Empty"
    _member_id, pending = ctx.join(protocol_type="connect", protocols=(("sticky", b"s"),))
    ctx.advance(3_000)
    r = pending.result()
    assert (r.error, r.protocol_type, r.protocol_name) == (Errors.NONE, "connect", "sticky")


def test_first_member_is_leader_and_leader_alone_gets_member_metadata():
    ctx = ShardContext()
    joined = _join_all(
        ctx,
        [
            (("range", b"range-A"), ("roundrobin", b"rr-A")),
            (("roundrobin", b"rr-B"), ("range", b"range-B")),
            (("range", b"range-C"),),
        ],
    )
    (a, ra), (b, rb), (c, rc) = joined
    assert {r.leader for _, r in joined} == {a}
    assert ra.protocol_name == "range"
    assert sorted(ra.members, key=lambda m: m.member_id) == sorted(
        [
            JoinGroupMember(a, None, b"range-A"),
            JoinGroupMember(b, None, b"range-B"),
            JoinGroupMember(c, None, b"range-C"),
        ],
        key=lambda m: m.member_id,
    )
    assert rb.members == [] and rc.members == []


def test_another_member_leads_after_the_leader_leaves():
    ctx = ShardContext()
    gen = ctx.stable_group(3)
    ctx.leave(GROUP, gen.leader)
    joins = {m: ctx.rejoin(GROUP, m) for m in gen.followers}
    responses = {m: d.result() for m, d in joins.items()}
    leaders = {r.leader for r in responses.values()}
    assert len(leaders) == 1
    new_leader = leaders.pop()
    assert new_leader in gen.followers
    assert {m.member_id for m in responses[new_leader].members} == set(gen.followers)


def test_a_rejoined_member_leads_when_the_leader_does_not_rejoin():
    ctx = ShardContext()
    leader_id, leader_join = ctx.join(group_instance_id="static-leader", session_timeout_ms=100_000)
    follower_id, follower_join = ctx.join()
    ctx.advance(3_000)
    ctx.advance(3_000)
    gen = ctx.generation_of({leader_id: leader_join.result(), follower_id: follower_join.result()})
    assert gen.leader == leader_id
    ctx.sync_all(gen)
    rejoin = ctx.rejoin(GROUP, follower_id, protocols=(("range", b"changed"),))
    ctx.advance(REBALANCE_MS)
    r = rejoin.result()
    assert (r.error, r.generation_id, r.leader) == (Errors.NONE, 2, follower_id)
    assert {m.member_id for m in r.members} == {leader_id, follower_id}


def test_members_with_the_same_subscription_share_one_copy_of_it_and_of_their_host():
    ctx = ShardContext()
    subscription = (("range", b"orders-0,orders-1"), ("roundrobin", b"rr"))
    pending = dict(ctx.join(protocols=subscription, client_host="".join(["/10.0.0.", "7"])) for _ in range(3))
    other, last = ctx.join(protocols=(("range", b"payments"),))
    ctx.advance(3_000)
    ctx.advance(3_000)
    joined = list(pending)
    ctx.sync_all(ctx.generation_of({m: d.result() for m, d in {**pending, other: last}.items()}))
    members = ctx.group().members
    first, *rest = (members[m] for m in joined)
    assert all(m.protocols is first.protocols and m.client_host is first.client_host for m in rest)
    assert first.protocols == subscription and members[other].protocols == (("range", b"payments"),)
    # Replay shares them the same way (the group record keeps the chosen protocol's metadata per member).
    replayed = ctx.restart().group().members
    firsts = [replayed[m] for m in joined]
    assert all(m.protocols is firsts[0].protocols for m in firsts[1:])
    assert firsts[0].protocols == (("range", b"orders-0,orders-1"),)


def test_a_member_id_made_from_the_client_id_keeps_no_second_copy_of_it():
    def member(member_id: str, instance_id: str | None = None) -> Member:
        return Member(member_id, instance_id, "app-1", "/10.0.0.7", 1000, 1000, "consumer", ())

    dynamic = member(generate_member_id("app-1", None))
    static = member(generate_member_id("app-1", "instance-a"), "instance-a")
    given = member("app-1-not-a-generated-id")
    assert dynamic._client_id is None and static._client_id == given._client_id == "app-1"
    assert dynamic.client_id == static.client_id == given.client_id == "app-1"
    # Describe, the group record and a restart all read it back.
    ctx = ShardContext()
    pending = dict(ctx.join(client_id="consumer-7") for _ in range(2))
    ctx.advance(3_000)
    ctx.advance(3_000)
    ctx.sync_all(ctx.generation_of({m: d.result() for m, d in pending.items()}))
    assert [m.client_id for m in ctx.describe().members] == ["consumer-7"] * 2
    assert [m.client_id for m in ctx.restart().describe().members] == ["consumer-7"] * 2
    assert all(m._client_id is None for m in ctx.group().members.values())
