"""Classic and consumer groups on one shard: listing, errors across protocols, offsets of consumer groups."""

from __future__ import annotations

from consumer_context import GROUP, ConsumerContext, tps

from groupcoord.protocol import (
    ConsumerGroupDescribeRequest,
    DeleteGroupsRequest,
    DescribeGroupsRequest,
    Errors,
    HeartbeatRequest,
    JoinGroupRequest,
    LeaveGroupRequest,
    ListGroupsRequest,
    MemberIdentity,
    OffsetAndMetadata,
    OffsetCommitRequest,
    OffsetDeleteRequest,
    OffsetFetchRequest,
    SyncGroupRequest,
    TopicPartition,
)

TP0 = TopicPartition("t", 0)


def _classic_member(ctx: ConsumerContext, group_id: str = "classic") -> str:
    join = ctx.coord.join_group(
        JoinGroupRequest(group_id, 10_000, protocols=[("range", b"")], require_known_member_id=False)
    )
    ctx.advance(3_000)  # the initial rebalance delay
    resp = join.result()
    assert resp.error == Errors.NONE
    ctx.coord.sync_group(
        SyncGroupRequest(group_id, resp.generation_id, resp.member_id, assignments={resp.member_id: b""})
    )
    return resp.member_id


def test_list_groups_reports_the_group_type_and_filters_by_it():
    ctx = ConsumerContext()
    _classic_member(ctx)
    ctx.join("a")
    listed = {(g.group_id, g.group_type, g.group_state) for g in ctx.coord.list_groups().result().groups}
    assert listed == {("classic", "classic", "Stable"), (GROUP, "consumer", "Stable")}
    only = ctx.coord.list_groups(ListGroupsRequest(types_filter=["Consumer"])).result().groups
    assert [g.group_id for g in only] == [GROUP]
    empty = ctx.coord.list_groups(ListGroupsRequest(states_filter=["empty"])).result().groups
    assert empty == []


def test_classic_requests_on_a_consumer_group_get_kafkas_errors():
    ctx = ConsumerContext()
    ctx.join("a")
    join = ctx.coord.join_group(JoinGroupRequest(GROUP, 10_000, protocols=[("range", b"")])).result()
    assert join.error == Errors.INCONSISTENT_GROUP_PROTOCOL
    assert ctx.coord.heartbeat(HeartbeatRequest(GROUP, 1, "a")).result().error == Errors.UNKNOWN_MEMBER_ID
    assert ctx.coord.sync_group(SyncGroupRequest(GROUP, 1, "a")).result().error == Errors.UNKNOWN_MEMBER_ID
    leave = ctx.coord.leave_group(LeaveGroupRequest(GROUP, [MemberIdentity("a")])).result()
    assert [m.error for m in leave.members] == [Errors.UNKNOWN_MEMBER_ID]
    assert "a" in ctx.group().members
    described = ctx.coord.describe_groups(DescribeGroupsRequest([GROUP])).result().groups[0]
    assert described.group_state == "Dead"


def test_a_classic_join_on_an_empty_consumer_group_replaces_it_and_keeps_its_offsets():
    ctx = ConsumerContext()
    a = ctx.join("a")
    ctx.coord.commit_offsets(OffsetCommitRequest(GROUP, {TP0: OffsetAndMetadata(5)}, a.epoch, "a")).result()
    ctx.send(member_id="a", member_epoch=-1)
    _classic_member(ctx, GROUP)
    assert GROUP not in ctx.coord.consumer.groups and ctx.coord.groups.get_group(GROUP) is not None
    assert ctx.coord.fetch_offsets(OffsetFetchRequest(GROUP)).result().offsets[TP0].offset == 5


def test_a_consumer_heartbeat_on_a_classic_group_is_group_id_not_found_unless_it_is_empty():
    ctx = ConsumerContext()
    _classic_member(ctx)
    resp = ctx.send(
        "classic",
        member_id="a",
        member_epoch=0,
        rebalance_timeout_ms=1,
        subscribed_topic_names=["t"],
        topic_partitions=[],
    )
    assert resp.error == Errors.GROUP_ID_NOT_FOUND and resp.error_message == "Group classic is not a consumer group."
    described = ctx.coord.consumer_group_describe(ConsumerGroupDescribeRequest(["classic", "nope"])).result().groups
    assert [(g.error, g.error_message) for g in described] == [
        (Errors.GROUP_ID_NOT_FOUND, "Group classic is not a consumer group."),
        (Errors.GROUP_ID_NOT_FOUND, "Group nope not found."),
    ]
    # A group that only holds offsets (an empty classic group) becomes a consumer group; its offsets stay.
    ctx.coord.commit_offsets(OffsetCommitRequest("simple", {TP0: OffsetAndMetadata(9)})).result()
    b = ctx.join("b", group_id="simple")
    assert b.owned == tps("t", *range(6)) and ctx.coord.groups.get_group("simple") is None
    assert ctx.coord.fetch_offsets(OffsetFetchRequest("simple")).result().offsets[TP0].offset == 9
    fresh = ctx.restart()
    assert "simple" in fresh.coord.consumer.groups and fresh.coord.groups.get_group("simple") is None


def test_offset_commits_of_consumer_group_members_check_the_member_epoch():
    ctx = ConsumerContext()
    a = ctx.join("a")
    ctx.join("b")

    def commit(generation: int, member: str) -> Errors:
        return (
            ctx.coord.commit_offsets(OffsetCommitRequest(GROUP, {TP0: OffsetAndMetadata(1)}, generation, member))
            .result()
            .errors[TP0]
        )

    assert commit(a.epoch, "a") == Errors.NONE
    assert commit(a.epoch + 1, "a") == Errors.STALE_MEMBER_EPOCH
    assert commit(1, "nobody") == Errors.UNKNOWN_MEMBER_ID
    assert commit(-1, "") == Errors.UNKNOWN_MEMBER_ID  # the admin client only commits to an empty group
    for m in "ab":
        ctx.send(member_id=m, member_epoch=-1)
    assert commit(-1, "") == Errors.NONE


def test_a_kip848_member_commits_with_offset_commit_v9_or_later():
    ctx = ConsumerContext()
    a = ctx.join("a")

    def commit(version: int | None) -> Errors:
        req = OffsetCommitRequest(GROUP, {TP0: OffsetAndMetadata(1)}, a.epoch, "a", api_version=version)
        return ctx.coord.commit_offsets(req).result().errors[TP0]

    assert (commit(8), commit(9), commit(None)) == (Errors.UNSUPPORTED_VERSION, Errors.NONE, Errors.NONE)


def test_offset_fetch_as_a_member_checks_its_id_and_epoch():
    ctx = ConsumerContext()
    a = ctx.join("a")

    def fetch(member_id: str | None, epoch: int) -> Errors:
        return ctx.coord.fetch_offsets(OffsetFetchRequest(GROUP, None, False, member_id, epoch)).result().error

    assert fetch("a", a.epoch) == Errors.NONE
    assert fetch(None, -1) == Errors.NONE  # not as a member (the admin client)
    assert fetch("nobody", a.epoch) == Errors.UNKNOWN_MEMBER_ID
    assert fetch("a", a.epoch - 1) == Errors.STALE_MEMBER_EPOCH


def test_a_classic_join_into_a_consumer_group_checks_the_session_timeout_first_and_names_no_member():
    ctx = ConsumerContext()
    ctx.join("a")
    refused = ctx.coord.join_group(JoinGroupRequest(GROUP, 10_000, member_id="m", protocols=[("range", b"")]))
    assert (refused.result().error, refused.result().member_id) == (Errors.INCONSISTENT_GROUP_PROTOCOL, "")
    bad = ctx.coord.join_group(JoinGroupRequest(GROUP, 1, member_id="m", protocols=[("range", b"")])).result()
    assert (bad.error, bad.member_id) == (Errors.INVALID_SESSION_TIMEOUT, "m")


def test_delete_groups_and_offset_delete_on_consumer_groups():
    ctx = ConsumerContext(topics={"t": 6, "old": 1})
    a = ctx.join("a")
    old = TopicPartition("old", 0)
    ctx.coord.commit_offsets(
        OffsetCommitRequest(GROUP, {TP0: OffsetAndMetadata(1), old: OffsetAndMetadata(2)}, a.epoch, "a")
    )
    assert ctx.coord.delete_groups(DeleteGroupsRequest([GROUP])).result().results == {GROUP: Errors.NON_EMPTY_GROUP}
    deleted = ctx.coord.delete_offsets(OffsetDeleteRequest(GROUP, [TP0, old])).result()
    assert deleted.errors == {TP0: Errors.GROUP_SUBSCRIBED_TO_TOPIC, old: Errors.NONE}
    ctx.send(member_id="a", member_epoch=-1)
    assert ctx.coord.delete_groups(DeleteGroupsRequest([GROUP])).result().results == {GROUP: Errors.NONE}
    assert GROUP not in ctx.coord.consumer.groups
    assert ctx.coord.fetch_offsets(OffsetFetchRequest(GROUP)).result().offsets == {}
    assert GROUP not in ctx.restart().coord.consumer.groups


def test_offsets_of_unsubscribed_topics_expire_and_an_empty_group_without_offsets_goes():
    ctx = ConsumerContext(
        topics={"t": 6, "old": 1}, offsets_retention_ms=60_000, offsets_retention_check_interval_ms=10_000
    )
    a = ctx.join("a")
    old = TopicPartition("old", 0)
    ctx.coord.commit_offsets(
        OffsetCommitRequest(GROUP, {TP0: OffsetAndMetadata(1), old: OffsetAndMetadata(2)}, a.epoch, "a")
    )
    for _ in range(8):
        ctx.advance(10_000)
        ctx.heartbeat(a)
    assert set(ctx.coord.offsets.offsets_of(GROUP)) == {TP0}
    ctx.send(member_id="a", member_epoch=-1)
    ctx.advance(70_000)
    assert GROUP not in ctx.coord.consumer.groups and ctx.coord.offsets.offsets_of(GROUP) == {}


def test_the_gauges_count_consumer_groups_and_their_members_beside_classic_ones():
    ctx = ConsumerContext()
    _classic_member(ctx)
    ctx.join("a")
    ctx.join("b")
    gauges = ctx.coord.gauges()
    assert gauges.groups == 2 and gauges.members == 3
    assert gauges.groups_by_state["Stable"] == 1 and gauges.groups_by_state["Reconciling"] == 1


def test_one_group_id_names_one_group_whichever_its_protocol():
    ctx = ConsumerContext()
    ctx.coord.commit_offsets(OffsetCommitRequest("simple", {TP0: OffsetAndMetadata(1)}))
    assert ctx.coord.registry.get("simple").group_type == "classic"
    ctx.join("a", group_id="simple")  # the empty classic group becomes a consumer group
    assert ctx.coord.registry.get("simple").group_type == "consumer" and len(ctx.coord.registry) == 1
    assert "simple" not in ctx.coord.groups.groups and "simple" in ctx.coord.consumer.groups
