"""A client asking a router that knows no leader for its group's partition yet (a replicated service's router
just restarted, or an election without a majority): it keeps asking, and never calls None.

Found by the Ray-level replication chaos of issue 27 (the router restarted during a repair): the restarted
router answered FindCoordinator with None until it had learnt the leaders, the client took None for the
coordinator's actor, and each heartbeat and commit of the member failed with an AttributeError from then on.
"""

from __future__ import annotations

import dataclasses

import pytest
import ray
from services import running_service

from groupcoord.actors.client.coordinator_client import CoordinatorClient, CoordinatorUnavailableError
from groupcoord.protocol import Errors, OffsetFetchRequest
from groupcoord.protocol.apis import Api

NAMESPACE = "gc-coordinator-unknown"


@ray.remote(num_cpus=0)
class RouterWithoutLeader:
    """A router that knows partition 0's leader only once it is told."""

    def __init__(self) -> None:
        self.leader = None

    def set_leader(self, handle) -> None:
        self.leader = handle

    def find_coordinator(self, group_id: str):
        return 0, self.leader


@pytest.fixture(scope="module")
def svc(ray_local, tmp_path_factory):
    with running_service(tmp_path_factory, NAMESPACE, 1) as service:
        yield service


def test_a_client_waits_for_a_leader_instead_of_calling_none(svc) -> None:
    router = RouterWithoutLeader.remote()
    unknown = dataclasses.replace(svc, router=router, partitions=[None])
    client = CoordinatorClient(unknown, "g", request_timeout_ms=1_000, retry_backoff_ms=20)
    request = OffsetFetchRequest("g", None)
    with pytest.raises(CoordinatorUnavailableError):
        client.call(Api.OFFSET_FETCH, request)
    with pytest.raises(CoordinatorUnavailableError):
        client.call_once(Api.HEARTBEAT, None)
    client.rediscover()
    assert client.handle is None
    ray.get(router.set_leader.remote(svc.partition(0)))
    assert client.call(Api.OFFSET_FETCH, request).error == Errors.NONE
    assert client.handle is not None
    ray.get(router.set_leader.remote(None))
    client.rediscover()  # a router that knows no leader again: the last one known is kept
    assert client.handle is not None
    assert client.call(Api.OFFSET_FETCH, request).error == Errors.NONE
