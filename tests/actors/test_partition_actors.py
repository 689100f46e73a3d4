"""Partition actors on a real local Ray: the group protocol end to end, and recovery after restarts."""

from __future__ import annotations

import os
import shutil

import pytest
import ray
from ray_helpers import form_group, heartbeat, join_async, kill_and_wait_restart, new_member_id, sync, wait_for
from services import running_service

from groupcoord.actors import connect, start, stop
from groupcoord.actors.client.handle import ServiceError
from groupcoord.actors.service.names import ROUTER_NAME
from groupcoord.protocol import Errors, OffsetAndMetadata, TopicPartition
from groupcoord.protocol.messages import (
    DescribeGroupsRequest,
    ListGroupsRequest,
    OffsetCommitRequest,
    OffsetFetchRequest,
)
from groupcoord.storage import StorageRoot

NAMESPACE = "gc-test-partitions"


@pytest.fixture(scope="module")
def svc(ray_local, tmp_path_factory):
    with running_service(tmp_path_factory, NAMESPACE, 4, initial_rebalance_delay_ms=1000) as service:
        yield service


def commit(handle, group, generation, member_id, offsets):
    req = OffsetCommitRequest(group, offsets, generation_id=generation, member_id=member_id)
    return ray.get(handle.commit_offsets.remote(req)).errors


def fetch(handle, group, partitions=None):
    return ray.get(handle.fetch_offsets.remote(OffsetFetchRequest(group, partitions)))


def test_group_forms_syncs_commits_and_fetches(svc):
    _, handle = svc.find_coordinator("orders")
    generation, ids, leader = form_group(handle, "orders", 3)
    assert generation == 1 and leader in ids
    tp = TopicPartition("t", 0)
    assert commit(handle, "orders", generation, ids[1], {tp: OffsetAndMetadata(42, "m")}) == {tp: Errors.NONE}
    got = fetch(handle, "orders", [tp]).offsets[tp]
    assert (got.offset, got.metadata, got.error) == (42, "m", Errors.NONE)
    described = ray.get(handle.describe_groups.remote(DescribeGroupsRequest(["orders"]))).groups[0]
    assert described.group_state == "Stable" and len(described.members) == 3
    listed = ray.get(svc.router.list_groups.remote(ListGroupsRequest()))
    assert "orders" in {g.group_id for g in listed.groups}


def test_wrong_partition_answers_not_coordinator(svc):
    p, _ = svc.find_coordinator("orders")
    other = svc.partition((p + 1) % svc.num_partitions)
    resp = ray.get(join_async(other, "orders"))
    assert resp.error == Errors.NOT_COORDINATOR


def test_killed_partition_restarts_with_state_and_members_keep_generation(svc):
    group = "payments"
    _, handle = svc.find_coordinator(group)
    generation, ids, _ = form_group(handle, group, 2)
    tps = {TopicPartition("pay", i): OffsetAndMetadata(100 + i) for i in range(10)}
    assert set(commit(handle, group, generation, ids[0], tps).values()) == {Errors.NONE}

    old_pid = ray.get(handle.status.remote())["pid"]
    assert kill_and_wait_restart(handle)["pid"] != old_pid
    for mid in ids:
        assert heartbeat(handle, group, generation, mid) == Errors.NONE
    described = ray.get(handle.describe_groups.remote(DescribeGroupsRequest([group]))).groups[0]
    assert described.group_state == "Stable" and {m.member_id for m in described.members} == set(ids)
    fetched = fetch(handle, group).offsets
    assert {tp: v.offset for tp, v in fetched.items()} == {tp: o.offset for tp, o in tps.items()}


def _wait_until_rebalancing(handle, group: str) -> None:
    """Until a join sent before has started the rebalance: an async actor may run concurrent calls in any order."""
    wait_for(lambda: ray.get(handle.describe_groups.remote(DescribeGroupsRequest([group]))).groups[0].group_state
             == "PreparingRebalance", what="the rebalance to start")


def test_restart_during_rebalance_forces_a_rejoin(svc):
    group = "rebalancing"
    _, handle = svc.find_coordinator(group)
    generation, ids, _ = form_group(handle, group, 2)
    newcomer = new_member_id(handle, group)
    parked = join_async(handle, group, newcomer)  # starts a rebalance and parks
    _wait_until_rebalancing(handle, group)
    assert heartbeat(handle, group, generation, ids[0]) == Errors.REBALANCE_IN_PROGRESS

    old_pid = ray.get(handle.status.remote())["pid"]
    handle.crash.remote()
    with pytest.raises((ray.exceptions.RayActorError, ray.exceptions.ActorUnavailableError)):
        ray.get(parked, timeout=60)
    wait_for(lambda: ray.get(handle.is_loaded.remote()), what="partition reload")
    assert ray.get(handle.status.remote())["pid"] != old_pid, "the partition did not restart"
    # The in-flight rebalance is gone: the group is back at its last stored generation, Stable.
    assert heartbeat(handle, group, generation, ids[0]) == Errors.NONE
    # The newcomer's pending id died with the actor, as in Kafka: it must start over.
    assert ray.get(join_async(handle, group, newcomer)).error == Errors.UNKNOWN_MEMBER_ID
    again = new_member_id(handle, group)
    # The new member starts the rebalance; only then do the others rejoin (a follower rejoining a Stable
    # group unchanged is answered at once).
    refs = [join_async(handle, group, again)]
    _wait_until_rebalancing(handle, group)
    refs += [join_async(handle, group, m) for m in ids]
    joins = ray.get(refs)
    assert {j.error for j in joins} == {Errors.NONE}
    assert {j.generation_id for j in joins} == {generation + 1}
    new_leader = joins[0].leader
    assert sync(handle, group, generation + 1, new_leader, {}).error == Errors.NONE


def test_router_restart_keeps_routing(svc):
    def pid() -> int:
        return ray.get(svc.router.__ray_call__.remote(lambda self: os.getpid()))

    old_pid = pid()
    ray.kill(svc.router, no_restart=False)
    # ray.kill returns before the process is gone: a call may still reach the old router, so wait for a new one.
    wait_for(lambda: pid() != old_pid, what="the router to restart in a new process")
    info = ray.get(svc.router.info.remote())
    assert info["num_partitions"] == svc.num_partitions
    p, handle = ray.get(svc.router.find_coordinator.remote("orders"))
    assert handle == svc.partition(p)
    assert ray.get(handle.is_loaded.remote())
    assert connect(NAMESPACE).num_partitions == svc.num_partitions


def test_service_outlives_the_driver_that_started_it(ray_local, tmp_path):
    import subprocess
    import sys
    import textwrap

    namespace = "gc-test-detached"
    gcs = ray_local.get_runtime_context().gcs_address
    script = textwrap.dedent(
        f"""
        import ray
        from groupcoord.actors import start
        from groupcoord.protocol.config import GroupConfig
        ray.init(address={gcs!r}, namespace={namespace!r}, log_to_driver=False)
        start(num_partitions=2, storage_path={str(tmp_path)!r}, namespace={namespace!r},
              config=GroupConfig(min_session_timeout_ms=100))
        """
    )
    subprocess.run([sys.executable, "-c", script], check=True, timeout=180)
    try:
        svc = connect(namespace)
        _, handle = svc.find_coordinator("after-driver")
        assert ray.get(join_async(handle, "after-driver")).error == Errors.MEMBER_ID_REQUIRED
    finally:
        stop(namespace)


def _no_service(namespace):
    with pytest.raises(ValueError):
        ray.get_actor(ROUTER_NAME, namespace=namespace)


def test_a_second_service_on_a_root_in_use_is_refused(svc):
    with pytest.raises(ServiceError, match=f"storage root {svc.storage_path} is in use by another running"):
        start(num_partitions=4, storage_path=svc.storage_path, namespace="gc-test-second-service")
    _no_service("gc-test-second-service")


def test_start_refuses_a_directory_that_is_neither_empty_nor_a_root_and_touches_nothing(svc, tmp_path):
    (tmp_path / "photos").mkdir()
    with pytest.raises(ServiceError, match=f"storage root {tmp_path} is neither empty nor a groupcoord"):
        start(num_partitions=2, storage_path=str(tmp_path), namespace="gc-test-foreign")
    assert [p.name for p in tmp_path.iterdir()] == ["photos"]
    _no_service("gc-test-foreign")


def test_start_refuses_a_root_whose_partition_directory_is_missing(svc, tmp_path):
    root = StorageRoot(tmp_path, 2)
    shutil.rmtree(root.partition_dir(1))
    before = sorted(p.name for p in tmp_path.iterdir())
    with pytest.raises(ServiceError, match=f"storage root {tmp_path} holds partitions \\[1\\] whose directories"):
        start(num_partitions=2, storage_path=str(tmp_path), namespace="gc-test-lost")
    assert sorted(p.name for p in tmp_path.iterdir()) == before
    _no_service("gc-test-lost")
