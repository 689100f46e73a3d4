"""GroupMember on a real local Ray: assignment, leaving, dying, cooperative moves, static members, commits."""

from __future__ import annotations

import pytest
import ray
from member_threads import PollingMember, settled
from ray_helpers import wait_for
from services import running_service

from groupcoord.actors.client.admin import AdminClient
from groupcoord.actors.client.errors import CommitFailedError
from groupcoord.actors.client.member import GroupMember
from groupcoord.protocol import OffsetAndMetadata, TopicPartition, partition_for
from groupcoord.protocol.messages import DescribeGroupsRequest

NAMESPACE = "gc-test-members"
PARTITIONS = {TopicPartition("t", p) for p in range(6)}


@pytest.fixture(scope="module")
def svc(ray_local, tmp_path_factory):
    with running_service(tmp_path_factory, NAMESPACE, 2) as service:
        AdminClient(service).create_topic("t", 6)
        yield service


def test_three_members_share_all_partitions_disjointly(svc, members):
    members += [PollingMember(svc, "g-three", f"m{i}", partition_assignment_strategy=("range",)) for i in range(3)]
    wait_for(lambda: settled(members, PARTITIONS), what="three members to settle")
    assert sorted(len(m.assignment()) for m in members) == [2, 2, 2]
    assert not any(m.errors for m in members)


def test_a_member_that_leaves_hands_its_partitions_over(svc, members):
    members += [PollingMember(svc, "g-leave", f"m{i}", partition_assignment_strategy=("range",)) for i in range(2)]
    wait_for(lambda: settled(members, PARTITIONS), what="two members to settle")
    leaving = members.pop()
    leaving.close()
    wait_for(lambda: settled(members, PARTITIONS), what="the remaining member to take everything")
    assert members[0].assignment() == PARTITIONS
    assert leaving.events[-1] == ("revoked", frozenset(leaving.events[-2][1]))


@ray.remote(num_cpus=0)
class MemberActor:
    """A member in its own process, so that killing it stops its heartbeats without a LeaveGroup."""

    def __init__(self, service, group: str, **options) -> None:
        self.member = GroupMember(service, group, topics=["t"], **options)

    def poll(self) -> list:
        return sorted(self.member.poll(100))


def test_a_member_that_dies_is_expired_after_its_session_timeout(svc, members):
    doomed = MemberActor.remote(svc, "g-dies", session_timeout_ms=1500, heartbeat_interval_ms=300,
                                partition_assignment_strategy=("range",))
    members.append(PollingMember(svc, "g-dies", "survivor", session_timeout_ms=1500,
                                 partition_assignment_strategy=("range",)))

    def both_own_some():
        theirs = set(ray.get(doomed.poll.remote()))
        return theirs and members[0].assignment() and theirs | members[0].assignment() == PARTITIONS

    wait_for(both_own_some, what="the two members to share the partitions")
    generation = members[0].member.generation_id
    ray.kill(doomed)
    wait_for(lambda: members[0].assignment() == PARTITIONS, timeout_s=30, what="the dead member's expiry")
    assert members[0].member.generation_id > generation


def test_cooperative_sticky_moves_only_what_must_move(svc, members):
    opts = {"partition_assignment_strategy": ("cooperative-sticky",)}
    members.append(PollingMember(svc, "g-coop", "first", **opts))
    wait_for(lambda: settled(members, PARTITIONS), what="the first member to own everything")
    members.append(PollingMember(svc, "g-coop", "second", **opts))
    wait_for(lambda: settled(members, PARTITIONS), what="a balanced cooperative assignment")
    first, second = members
    assert len(first.assignment()) == len(second.assignment()) == 3
    revoked = [tps for kind, tps in first.events if kind == "revoked"]
    assert revoked == [frozenset(second.assignment())], "only the partitions that moved were revoked"
    assert all(kind == "assigned" for kind, _ in second.events)
    # The listener saw each revocation before the partitions were assigned elsewhere.
    assert ("assigned", frozenset()) in first.events or len(first.events) >= 2


def test_static_member_restarted_within_its_session_keeps_its_partitions(svc, members):
    opts = {"partition_assignment_strategy": ("range",), "session_timeout_ms": 10000}
    a = PollingMember(svc, "g-static", "a", group_instance_id="instance-a", **opts)
    b = PollingMember(svc, "g-static", "b", group_instance_id="instance-b", **opts)
    members += [a, b]
    wait_for(lambda: settled(members, PARTITIONS), what="two static members to settle")
    before = b.assignment()
    generation = a.member.generation_id
    b.close()  # a static member does not send LeaveGroup
    members.remove(b)
    b2 = PollingMember(svc, "g-static", "b-restarted", group_instance_id="instance-b", **opts)
    members.append(b2)
    wait_for(lambda: b2.assignment() == before, what="the restarted static member to get its partitions back")
    assert a.member.generation_id == generation and b2.member.generation_id == generation


def test_members_ride_through_a_coordinator_restart(svc, members):
    members += [PollingMember(svc, "g-ride", f"m{i}", partition_assignment_strategy=("range",)) for i in range(2)]
    wait_for(lambda: settled(members, PARTITIONS), what="two members to settle")
    generation = members[0].member.generation_id
    tp = next(iter(members[0].assignment()))
    _, handle = svc.find_coordinator("g-ride")
    old_pid = ray.get(handle.status.remote(), timeout=60)["pid"]
    ray.kill(handle, no_restart=False)
    members[0].member.commit({tp: OffsetAndMetadata(77, "after restart")})  # retried until the actor is back
    status = wait_for(lambda: ray.get(handle.status.remote(), timeout=10), what="the coordinator's status")
    assert status["pid"] != old_pid, "the coordinator did not restart"
    assert members[0].member.committed([tp])[tp] == OffsetAndMetadata(77, "after restart", -1)
    assert settled(members, PARTITIONS) and members[0].member.generation_id == generation
    assert not any(m.errors for m in members)


def test_commit_and_committed_round_trip_and_async_commits_coalesce(svc, members):
    m = PollingMember(svc, "g-commit", "solo", partition_assignment_strategy=("range",))
    members.append(m)
    wait_for(lambda: settled(members, PARTITIONS), what="the member to own everything")
    tps = sorted(PARTITIONS)
    m.member.commit({tp: OffsetAndMetadata(i * 10, f"m{i}") for i, tp in enumerate(tps)})
    assert m.member.committed(tps) == {tp: OffsetAndMetadata(i * 10, f"m{i}", -1) for i, tp in enumerate(tps)}
    done = []
    coalescer = m.member.client.coalescer()
    calls_before = coalescer.calls
    for offset in range(1, 501):
        m.member.commit_async({tps[0]: OffsetAndMetadata(offset)}, callback=lambda o, e: done.append(e))
    assert m.member._wait_async_commits(30)
    wait_for(lambda: len(done) == 500, what="the async commit callbacks (run by poll)")
    assert done == [None] * 500
    assert m.member.committed([tps[0]])[tps[0]].offset == 500
    assert coalescer.calls - calls_before < 100, "per-message commits must be coalesced into few calls"


def test_commit_with_a_stale_generation_raises_commit_failed(svc, members):
    m = PollingMember(svc, "g-stale", "solo", partition_assignment_strategy=("range",))
    members.append(m)
    wait_for(lambda: settled(members, PARTITIONS), what="the member to own everything")
    m.stop_polling()
    m.member.membership.generation += 5  # as if this member had missed rebalances
    with pytest.raises(CommitFailedError, match="rebalanced"):
        m.member.commit({TopicPartition("t", 0): OffsetAndMetadata(1)})


def test_manual_assignment_commits_in_a_simple_group(svc):
    member = GroupMember(svc, "g-manual")
    member.assign([TopicPartition("t", 0), TopicPartition("t", 1)])
    assert member.poll() == {TopicPartition("t", 0), TopicPartition("t", 1)}
    member.commit({TopicPartition("t", 0): OffsetAndMetadata(5)})
    assert member.committed([TopicPartition("t", 0)])[TopicPartition("t", 0)].offset == 5
    member.close()
    described = AdminClient(svc).describe_groups(["g-manual"])["g-manual"]
    assert described.group_state == "Empty" and described.protocol_type == ""


def test_admin_describes_groups_of_every_partition_in_request_order_as_the_router_does(svc):
    """AdminClient fetches the partitions' answers itself (the router hands it their refs): the same
    descriptions as the router's own DescribeGroups, in request order, unknown groups "Dead"."""
    ids = [f"g-described-{i}" for i in range(12)]
    assert len({partition_for(g, svc.num_partitions) for g in ids}) == svc.num_partitions
    for g in ids[:8]:
        member = GroupMember(svc, g)
        member.commit({TopicPartition("t", 0): OffsetAndMetadata(1)})  # a simple group: Empty
        member.close()
    request = list(reversed(ids))
    described = AdminClient(svc).describe_groups(request)
    assert list(described) == request
    assert [d.group_state for d in described.values()] == ["Dead"] * 4 + ["Empty"] * 8
    via_router = ray.get(svc.router.describe_groups.remote(DescribeGroupsRequest(request))).groups
    assert list(described.values()) == via_router


def test_leader_rebalances_when_a_topic_grows(svc, members):
    members += [PollingMember(svc, "g-grow", f"m{i}", topics=["grow"], metadata_max_age_ms=200,
                              partition_assignment_strategy=("range",)) for i in range(2)]
    admin = AdminClient(svc)
    admin.create_topic("grow", 2)
    grown = {TopicPartition("grow", p) for p in range(4)}
    wait_for(lambda: settled(members, {TopicPartition("grow", p) for p in range(2)}), what="two partitions")
    admin.create_partitions("grow", 4)
    wait_for(lambda: settled(members, grown), what="the leader to notice the new partitions")
