"""GroupMember(group_protocol="consumer") on a real local Ray: the coordinator assigns, members reconcile."""

from __future__ import annotations

import pytest
from member_threads import PollingMember, settled
from ray_helpers import wait_for
from services import running_service

from groupcoord.actors.client.admin import AdminClient
from groupcoord.actors.client.errors import GroupCoordinatorError
from groupcoord.actors.client.member import GroupMember
from groupcoord.protocol import (
    ConsumerGroupDescribeRequest,
    Errors,
    ListGroupsRequest,
    OffsetAndMetadata,
    TopicPartition,
)

NAMESPACE = "gc-test-consumer-protocol"
PARTITIONS = {TopicPartition("t", p) for p in range(6)}


@pytest.fixture(scope="module")
def svc(ray_local, tmp_path_factory):
    with running_service(
        tmp_path_factory, NAMESPACE, 2, consumer_heartbeat_interval_ms=200, consumer_session_timeout_ms=3000
    ) as service:
        AdminClient(service).create_topic("t", 6)  # after start: the router pushes it to the partitions
        yield service


def consumer(svc, group: str, name: str, **options) -> PollingMember:
    return PollingMember(svc, group, name, group_protocol="consumer", **options)


def test_members_share_the_partitions_and_a_leaver_hands_its_partitions_over(svc, members):
    members += [consumer(svc, "cg-share", f"m{i}") for i in range(3)]
    wait_for(lambda: settled(members, PARTITIONS), what="three consumer-protocol members to settle")
    assert sorted(len(m.assignment()) for m in members) == [2, 2, 2]
    leaving = members.pop()
    given_up = leaving.assignment()
    seen = {m.name: len(m.events) for m in members}
    leaving.close()
    assert leaving.events[-1] == ("revoked", frozenset(given_up))
    wait_for(lambda: settled(members, PARTITIONS), what="the two others to take the leaver's partitions")
    assert not any(m.errors for m in members)
    # Incremental: the staying members only gained partitions; nothing was taken from them.
    for m in members:
        assert [kind for kind, _ in m.events[seen[m.name] :]] == ["assigned"]
    groups = members[0].member.client.call("list_groups", ListGroupsRequest(types_filter=["consumer"])).groups
    assert [(g.group_id, g.group_type) for g in groups] == [("cg-share", "consumer")]


def test_a_joining_member_gets_partitions_only_after_their_owner_revoked_them(svc, members):
    first = consumer(svc, "cg-join", "first")
    members.append(first)
    wait_for(lambda: settled(members, PARTITIONS), what="the first member to own everything")
    members.append(consumer(svc, "cg-join", "second"))
    wait_for(lambda: settled(members, PARTITIONS), what="the group to settle with two members")
    revoked = next(tps for kind, tps in first.events if kind == "revoked")
    assigned_second = [tps for kind, tps in members[1].events if kind == "assigned"]
    assert frozenset().union(*assigned_second) == revoked
    described = first.member.client.call("consumer_group_describe", ConsumerGroupDescribeRequest(["cg-join"]))
    group = described.groups[0]
    assert (group.error, group.group_state, len(group.members)) == (Errors.NONE, "Stable", 2)
    assert {m.member_epoch for m in group.members} == {group.assignment_epoch}


def test_commits_carry_the_member_epoch_and_read_back(svc, members):
    m = consumer(svc, "cg-commit", "solo")
    members.append(m)
    wait_for(lambda: settled(members, PARTITIONS), what="the member to own everything")
    tp = TopicPartition("t", 3)
    m.member.commit({tp: OffsetAndMetadata(77, "x")})
    assert m.member.committed([tp]) == {tp: OffsetAndMetadata(77, "x", -1)}
    assert m.member.generation_id >= 1


def test_a_classic_member_cannot_join_a_consumer_group(svc, members):
    members.append(consumer(svc, "cg-mixed", "modern"))
    wait_for(lambda: settled(members, PARTITIONS), what="the consumer-protocol member to settle")
    classic = GroupMember(svc, "cg-mixed", topics=["t"], session_timeout_ms=3000, heartbeat_interval_ms=300)

    def refused() -> GroupCoordinatorError | None:
        try:
            classic.poll(100)  # returns by its timeout while the join is in flight; a later poll collects it
        except GroupCoordinatorError as e:
            return e
        return None

    try:
        assert wait_for(refused, what="the classic join to be refused").error == Errors.INCONSISTENT_GROUP_PROTOCOL
    finally:
        classic.close()
