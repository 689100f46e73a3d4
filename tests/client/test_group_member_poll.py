"""A real GroupMember on the shared Ray: poll(timeout_ms) returns by its deadline while its join is held."""

from __future__ import annotations

from services import running_service
from waiting import wait_for

from groupcoord.actors.client.admin import AdminClient
from groupcoord.actors.client.member import GroupMember
from groupcoord.actors.client.membership import MemberState
from groupcoord.protocol import TopicPartition


def test_poll_returns_while_the_join_is_held_and_a_later_poll_completes_it(ray_local, tmp_path_factory):
    # The coordinator holds a new group's join for the initial rebalance delay (KIP-134): 3 s here.
    with running_service(tmp_path_factory, "client-poll", 1, initial_rebalance_delay_ms=3_000) as svc:
        AdminClient(svc).create_topic("t", 2)
        member = GroupMember(svc, "g", topics=["t"], session_timeout_ms=6_000, heartbeat_interval_ms=500)
        try:
            assert member.poll(timeout_ms=100) == set()
            assert member.membership.state == MemberState.REBALANCING  # its join is still in flight
            owned = wait_for(lambda: member.poll(timeout_ms=100), what="the held join to complete")
            assert owned == {TopicPartition("t", 0), TopicPartition("t", 1)}
            assert member.generation_id == 1
        finally:
            member.close()
