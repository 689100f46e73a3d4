"""A call whose coordinator never answers (its node died) goes to the replica that leads now, within the timeout.

Real actors stand in for the two replicas and the router: the old leader takes the request and never
answers, the router names the new leader, and the client's call gets the new leader's answer instead
of waiting out its request timeout, whether it went alone or through the process's coalescer (whose
link to the old leader stays blocked on the unanswered batch).
"""

from __future__ import annotations

import asyncio

import pytest
import ray
from waiting import wait_for

from groupcoord.actors.client.coordinator_client import CoordinatorClient
from groupcoord.actors.client.handle import Service
from groupcoord.protocol import Errors
from groupcoord.protocol.messages import LeaveGroupRequest, LeaveGroupResponse


@ray.remote(num_cpus=0)
class Replica:
    """Answers leave_group (or never, like a leader whose node is gone) and counts the requests it got."""

    def __init__(self, answers: bool) -> None:
        self.answers = answers
        self.requests = 0

    async def leave_group(self, request: LeaveGroupRequest) -> LeaveGroupResponse:
        self.requests += 1
        if not self.answers:
            await asyncio.sleep(3600)
        return LeaveGroupResponse(Errors.NONE)

    async def batch(self, calls: list) -> list:
        """What the coalescer sends (heartbeats, commits, fetches): the same answer for each."""
        return [await self.leave_group(request) for _, request in calls]

    def count(self) -> int:
        return self.requests


@ray.remote(num_cpus=0)
class Router:
    """Names the new leader of the one partition."""

    def __init__(self, leader: object) -> None:
        self.leader = leader

    def find_coordinator(self, group_id: str) -> tuple[int, object]:
        return 0, self.leader[0]


@pytest.mark.parametrize("api", ["leave_group", "heartbeat"])  # sent alone, and through the coalescer
def test_a_call_to_a_leader_that_never_answers_is_sent_to_the_new_leader(ray_local, api) -> None:
    old, new = Replica.remote(answers=False), Replica.remote(answers=True)
    router = Router.remote([new])  # in a list: the handle itself, not a call on it
    ray.get([old.count.remote(), new.count.remote(), router.find_coordinator.remote("")])  # all started
    svc = Service(namespace=f"gc-test-moves-{api}", num_partitions=1, storage_path="", router=router, partitions=[old])
    client = CoordinatorClient(svc, "moving", request_timeout_ms=30_000)  # the old link would wait 60 s
    try:
        response = client.call(api, LeaveGroupRequest("moving", []))
        assert response.error == Errors.NONE
        # Sent once to each, no duplicates (an async actor may start the count before the hanging call).
        assert wait_for(lambda: ray.get([old.count.remote(), new.count.remote()]) == [1, 1], 30, "both requests")
    finally:  # no thread may stay inside a call to it when a later module shuts Ray down (Ray ends the process)
        ray.kill(old)
