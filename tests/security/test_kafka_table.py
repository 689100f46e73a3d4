"""Kafka's per-API authorization table applied to a real shard, allowed and denied, for both protocols."""

from __future__ import annotations

from groupcoord.protocol import Deferred, Errors, GroupCoordinator, ManualClock, MemoryLog
from groupcoord.protocol import OffsetAndMetadata as OM
from groupcoord.protocol import TopicPartition as TP
from groupcoord.protocol.config import GroupConfig
from groupcoord.protocol.messages import (
    ConsumerGroupDescribeRequest,
    ConsumerGroupHeartbeatRequest,
    DeleteGroupsRequest,
    DescribeGroupsRequest,
    HeartbeatRequest,
    JoinGroupRequest,
    LeaveGroupRequest,
    ListGroupsRequest,
    MemberIdentity,
    OffsetCommitRequest,
    OffsetDeleteRequest,
    OffsetFetchRequest,
    SyncGroupRequest,
)
from groupcoord.protocol.security.acl import AclBinding, Authorizer
from groupcoord.protocol.security.table import admit

ME = "User:app"


def acl(rtype, name, op, permission="ALLOW", pattern="LITERAL", principal=ME):
    return AclBinding(rtype, name, pattern, principal, op, permission)


class Shard:
    """A shard and the table in front of it, as the partition actor runs them."""

    def __init__(self) -> None:
        self.coord = GroupCoordinator(GroupConfig(initial_rebalance_delay_ms=0), ManualClock(1_000_000),
                                      MemoryLog())
        self.coord.update_topic_metadata({"orders": 2, "payroll": 2})
        self.admin = Authorizer([], super_users=["User:admin"])

    def call(self, api, req, authz=None, principal=ME):
        authz = authz or self.admin
        a = admit(api, req, principal if authz is not self.admin else "User:admin", authz)
        if a.request is None:
            return a.response
        result = getattr(self.coord, api)(a.request)
        if isinstance(result, Deferred) and not result.done():
            self.coord.tick()  # a lone member's join completes at the (zero) initial delay
        response = result.result() if isinstance(result, Deferred) else result
        return a.finish(response) if a.finish is not None else response


def _commit(group="g", offsets=None):
    return OffsetCommitRequest(group, offsets or {TP("orders", 0): OM(5), TP("payroll", 0): OM(7)})


def test_classic_membership_needs_read_on_the_group():
    shard = Shard()
    reader = Authorizer([acl("GROUP", "g", "READ")])
    describer = Authorizer([acl("GROUP", "g", "DESCRIBE")])
    join = JoinGroupRequest("g", 10_000, protocols=(("range", b""),), require_known_member_id=False)
    assert shard.call("join_group", join, describer).error == Errors.GROUP_AUTHORIZATION_FAILED
    joined = shard.call("join_group", join, reader)
    assert joined.error == Errors.NONE
    sync = SyncGroupRequest("g", joined.generation_id, joined.member_id, assignments={joined.member_id: b"x"})
    assert shard.call("sync_group", sync, describer).error == Errors.GROUP_AUTHORIZATION_FAILED
    assert shard.call("sync_group", sync, reader).error == Errors.NONE
    hb = HeartbeatRequest("g", joined.generation_id, joined.member_id)
    assert shard.call("heartbeat", hb, describer).error == Errors.GROUP_AUTHORIZATION_FAILED
    assert shard.call("heartbeat", hb, reader).error == Errors.NONE
    leave = LeaveGroupRequest("g", [MemberIdentity(joined.member_id)])
    assert shard.call("leave_group", leave, describer).error == Errors.GROUP_AUTHORIZATION_FAILED
    assert shard.coord.describe_groups(DescribeGroupsRequest(["g"])).result().groups[0].members  # still there
    assert shard.call("leave_group", leave, reader).error == Errors.NONE


def test_offset_commit_group_then_per_topic_read_commits_the_allowed_partitions():
    shard = Shard()
    no_group = Authorizer([acl("TOPIC", "*", "READ")])
    r = shard.call("commit_offsets", _commit(), no_group)
    assert set(r.errors.values()) == {Errors.GROUP_AUTHORIZATION_FAILED}
    partial = Authorizer([acl("GROUP", "g", "READ"), acl("TOPIC", "ord", "READ", pattern="PREFIXED")])
    r = shard.call("commit_offsets", _commit(), partial)
    assert r.errors == {TP("orders", 0): Errors.NONE, TP("payroll", 0): Errors.TOPIC_AUTHORIZATION_FAILED}
    committed = shard.call("fetch_offsets", OffsetFetchRequest("g", None)).offsets
    assert {tp: p.offset for tp, p in committed.items()} == {TP("orders", 0): 5}
    only_denied = shard.call("commit_offsets", _commit(offsets={TP("payroll", 1): OM(1)}), partial)
    assert only_denied.errors == {TP("payroll", 1): Errors.TOPIC_AUTHORIZATION_FAILED}


def test_offset_fetch_needs_describe_on_group_and_topics():
    shard = Shard()
    shard.call("commit_offsets", _commit())
    no_group = Authorizer([acl("TOPIC", "*", "DESCRIBE")])
    assert shard.call("fetch_offsets", OffsetFetchRequest("g", None), no_group).error == (
        Errors.GROUP_AUTHORIZATION_FAILED)
    some = Authorizer([acl("GROUP", "g", "DESCRIBE"), acl("TOPIC", "orders", "DESCRIBE")])
    named = shard.call("fetch_offsets", OffsetFetchRequest("g", [TP("orders", 0), TP("payroll", 0)]), some)
    assert named.error == Errors.NONE
    assert named.offsets[TP("orders", 0)].offset == 5
    assert named.offsets[TP("payroll", 0)].error == Errors.TOPIC_AUTHORIZATION_FAILED
    every = shard.call("fetch_offsets", OffsetFetchRequest("g", None), some)
    assert set(every.offsets) == {TP("orders", 0)}  # the undescribable topic is left out, as Kafka does


def test_describe_list_delete_groups():
    shard = Shard()
    for g in ("g", "h"):
        shard.call("commit_offsets", _commit(group=g))
    describer = Authorizer([acl("GROUP", "g", "DESCRIBE")])
    described = shard.call("describe_groups", DescribeGroupsRequest(["h", "g"]), describer).groups
    assert [(d.group_id, d.error) for d in described] == [("h", Errors.GROUP_AUTHORIZATION_FAILED), ("g", Errors.NONE)]
    listed = shard.call("list_groups", ListGroupsRequest(), describer)
    assert [g.group_id for g in listed.groups] == ["g"]
    cluster = Authorizer([acl("CLUSTER", "kafka-cluster", "DESCRIBE")])
    assert {g.group_id for g in shard.call("list_groups", ListGroupsRequest(), cluster).groups} == {"g", "h"}
    deleter = Authorizer([acl("GROUP", "h", "DELETE")])
    results = shard.call("delete_groups", DeleteGroupsRequest(["g", "h"]), deleter).results
    assert results == {"g": Errors.GROUP_AUTHORIZATION_FAILED, "h": Errors.NONE}
    assert shard.call("fetch_offsets", OffsetFetchRequest("g", None)).offsets  # g is untouched


def test_offset_delete_needs_delete_on_group_and_read_on_topics():
    shard = Shard()
    shard.call("commit_offsets", _commit())
    req = OffsetDeleteRequest("g", [TP("orders", 0), TP("payroll", 0)])
    reader = Authorizer([acl("GROUP", "g", "READ"), acl("TOPIC", "*", "READ")])
    assert shard.call("delete_offsets", req, reader).error == Errors.GROUP_AUTHORIZATION_FAILED
    partial = Authorizer([acl("GROUP", "g", "DELETE"), acl("TOPIC", "orders", "READ")])
    r = shard.call("delete_offsets", req, partial)
    assert r.error == Errors.NONE
    assert r.errors == {TP("orders", 0): Errors.NONE, TP("payroll", 0): Errors.TOPIC_AUTHORIZATION_FAILED}
    left = shard.call("fetch_offsets", OffsetFetchRequest("g", None)).offsets
    assert set(left) == {TP("payroll", 0)}


def test_consumer_group_heartbeat_needs_read_on_group_and_describe_on_subscribed_topics():
    shard = Shard()
    join = ConsumerGroupHeartbeatRequest("cg", "m1", 0, rebalance_timeout_ms=30_000,
                                         subscribed_topic_names=["orders", "payroll"], topic_partitions=[])
    describer = Authorizer([acl("GROUP", "cg", "DESCRIBE"), acl("TOPIC", "*", "DESCRIBE")])
    assert shard.call("consumer_group_heartbeat", join, describer).error == Errors.GROUP_AUTHORIZATION_FAILED
    one_topic = Authorizer([acl("GROUP", "cg", "READ"), acl("TOPIC", "orders", "READ")])
    denied = shard.call("consumer_group_heartbeat", join, one_topic)
    assert denied.error == Errors.TOPIC_AUTHORIZATION_FAILED and "payroll" in denied.error_message
    assert not shard.coord.consumer.groups.get("cg") or not shard.coord.consumer.groups["cg"].members
    both = Authorizer([acl("GROUP", "cg", "READ"), acl("TOPIC", "*", "DESCRIBE")])
    joined = shard.call("consumer_group_heartbeat", join, both)
    assert joined.error == Errors.NONE and joined.member_epoch > 0


def test_consumer_group_describe_needs_describe_on_group_and_its_topics():
    shard = Shard()
    join = ConsumerGroupHeartbeatRequest("cg", "m1", 0, rebalance_timeout_ms=30_000,
                                         subscribed_topic_names=["payroll"], topic_partitions=[])
    assert shard.call("consumer_group_heartbeat", join).error == Errors.NONE
    req = ConsumerGroupDescribeRequest(["cg", "other"])
    group_only = Authorizer([acl("GROUP", "cg", "DESCRIBE")])
    got = {g.group_id: g.error for g in shard.call("consumer_group_describe", req, group_only).groups}
    assert got == {"cg": Errors.TOPIC_AUTHORIZATION_FAILED, "other": Errors.GROUP_AUTHORIZATION_FAILED}
    with_topic = Authorizer([acl("GROUP", "cg", "DESCRIBE"), acl("TOPIC", "payroll", "DESCRIBE")])
    described = shard.call("consumer_group_describe", ConsumerGroupDescribeRequest(["cg"]), with_topic).groups
    assert described[0].error == Errors.NONE and described[0].members


def test_super_user_passes_everything_and_nobody_else_without_acls():
    shard = Shard()
    assert set(shard.call("commit_offsets", _commit()).errors.values()) == {Errors.NONE}
    nobody = Authorizer([])
    assert set(shard.call("commit_offsets", _commit(), nobody).errors.values()) == {Errors.GROUP_AUTHORIZATION_FAILED}
    assert shard.call("list_groups", ListGroupsRequest(), nobody).groups == []
