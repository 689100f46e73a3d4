"""DescribeGroups and ListGroups with Kafka's fields."""

from shard_context import GROUP, ShardContext

from groupcoord.protocol.errors import Errors
from groupcoord.protocol.messages import (
    DescribedGroup,
    DescribedMember,
    DescribeGroupsRequest,
    ListedGroup,
    ListGroupsRequest,
)


def _list(ctx, states=(), types=()):
    r = ctx.coord.list_groups(ListGroupsRequest(states, types)).result()
    assert r.error == Errors.NONE
    return sorted(r.groups, key=lambda g: g.group_id)


def _four_groups(ctx):
    """ "empty" (Empty), "preparing", "completing" and "stable", in those states."""
    gen = ctx.stable_group(1, "empty")
    ctx.leave("empty", gen.leader)
    ctx.join_members(1, "completing")
    ctx.stable_group(1, "stable", protocol_type="connect")
    ctx.join("preparing")


def test_describe_unknown_group_is_dead_without_error():
    ctx = ShardContext()
    assert ctx.describe("nowhere") == DescribedGroup(Errors.NONE, "nowhere", "Dead", "", "", [])


def test_describe_stable_group_shows_protocol_metadata_and_assignments():
    ctx = ShardContext()
    member_id, _pending = ctx.join(client_id="my-client", client_host="/10.0.0.7", group_instance_id=None)
    ctx.advance(3_000)
    ctx.send_sync(GROUP, 1, member_id, {member_id: b"assigned"})
    assert ctx.describe() == DescribedGroup(
        Errors.NONE,
        GROUP,
        "Stable",
        "consumer",
        "range",
        [DescribedMember(member_id, None, "my-client", "/10.0.0.7", b"range-meta", b"assigned")],
    )


def test_describe_shows_the_metadata_of_the_selected_protocol():
    ctx = ShardContext()
    protocols = (("roundrobin", b"rr-meta"), ("range", b"range-meta"))
    a, _ = ctx.join(protocols=protocols)
    ctx.join(protocols=(("range", b"only-range"),))
    ctx.advance(6_000)
    ctx.send_sync(GROUP, 1, a, {})
    metadata = {m.member_id: m.member_metadata for m in ctx.describe().members}
    assert metadata[a] == b"range-meta"
    assert ctx.describe().protocol_data == "range"


def test_describe_static_member_shows_its_instance_id():
    ctx = ShardContext()
    member_id, _ = ctx.join(group_instance_id="instance-7")
    assert ctx.describe().members[0].group_instance_id == "instance-7"
    assert ctx.describe().members[0].member_id == member_id


def test_describe_rebalancing_group_has_no_protocol_data_or_metadata():
    ctx = ShardContext()
    gen = ctx.stable_group(2)
    ctx.rejoin(GROUP, gen.leader)
    described = ctx.describe()
    assert (described.group_state, described.protocol_type, described.protocol_data) == (
        "PreparingRebalance",
        "consumer",
        "",
    )
    assert {m.member_id for m in described.members} == set(gen.members)
    assert all(m.member_metadata == b"" for m in described.members)
    assert {m.member_id: m.member_assignment for m in described.members} == {
        gen.members[0]: b"assignment-0",
        gen.members[1]: b"assignment-1",
    }


def test_describe_completing_rebalance_group():
    ctx = ShardContext()
    gen = ctx.join_members(1, client_host="/1.2.3.4")
    described = ctx.describe()
    assert described == DescribedGroup(
        Errors.NONE,
        GROUP,
        "CompletingRebalance",
        "consumer",
        "",
        [DescribedMember(gen.leader, None, "client-0", "/1.2.3.4", b"", b"")],
    )


def test_describe_empty_group_keeps_its_protocol_type():
    ctx = ShardContext()
    gen = ctx.stable_group(1)
    ctx.leave(GROUP, gen.leader)
    assert ctx.describe() == DescribedGroup(Errors.NONE, GROUP, "Empty", "consumer", "", [])


def test_describe_several_groups_in_request_order():
    ctx = ShardContext()
    ctx.stable_group(1, "b")
    ctx.stable_group(1, "a")
    r = ctx.coord.describe_groups(DescribeGroupsRequest(["b", "nowhere", "a"])).result()
    assert [(g.group_id, g.group_state) for g in r.groups] == [
        ("b", "Stable"),
        ("nowhere", "Dead"),
        ("a", "Stable"),
    ]


def test_list_groups_shows_every_group_with_type_and_state():
    ctx = ShardContext()
    _four_groups(ctx)
    assert _list(ctx) == [
        ListedGroup("completing", "consumer", "CompletingRebalance", "classic"),
        ListedGroup("empty", "consumer", "Empty", "classic"),
        ListedGroup("preparing", "consumer", "PreparingRebalance", "classic"),
        ListedGroup("stable", "connect", "Stable", "classic"),
    ]


def test_list_groups_includes_a_group_created_by_a_first_phase_join():
    ctx = ShardContext()
    ctx.send_join("new")
    assert _list(ctx) == [ListedGroup("new", "", "Empty", "classic")]


def test_list_groups_states_filter_is_case_insensitive():
    ctx = ShardContext()
    _four_groups(ctx)
    assert [g.group_id for g in _list(ctx, states=["stable"])] == ["stable"]
    assert [g.group_id for g in _list(ctx, states=["EMPTY", "preparingREBALANCE"])] == ["empty", "preparing"]
    assert [g.group_id for g in _list(ctx, states=["CompletingRebalance"])] == ["completing"]
    assert _list(ctx, states=["Rebalancing"]) == []


def test_list_groups_types_filter():
    ctx = ShardContext()
    _four_groups(ctx)
    assert len(_list(ctx, types=["classic"])) == 4
    assert len(_list(ctx, types=["Classic"])) == 4
    assert _list(ctx, types=["consumer"]) == []
    assert [g.group_id for g in _list(ctx, states=["stable"], types=["classic"])] == ["stable"]


def test_list_groups_on_a_fresh_shard_is_empty():
    ctx = ShardContext()
    assert _list(ctx) == []
