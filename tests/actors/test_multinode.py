"""Two Ray nodes on one machine: a partition actor whose node is removed comes back on the other."""

from __future__ import annotations

import ray
from ray.cluster_utils import Cluster
from ray.util.scheduling_strategies import NodeAffinitySchedulingStrategy
from ray_helpers import form_group, heartbeat, wait_for

from groupcoord.actors import start, stop
from groupcoord.protocol import Errors, OffsetAndMetadata, TopicPartition
from groupcoord.protocol.config import GroupConfig
from groupcoord.protocol.messages import DescribeGroupsRequest, OffsetCommitRequest, OffsetFetchRequest

NAMESPACE = "gc-test-multinode"


@ray.remote(num_cpus=0)
def _node_id() -> str:
    return ray.get_runtime_context().get_node_id()


def test_partition_moves_to_surviving_node_with_its_state(tmp_path):
    if ray.is_initialized():
        ray.shutdown()  # this test needs a cluster of its own
    cluster = Cluster(initialize_head=True, head_node_args={"num_cpus": 1, "include_dashboard": False})
    worker = cluster.add_node(num_cpus=1)
    cluster.wait_for_nodes()  # until the worker has registered, SPREAD can only place on the head
    try:
        ray.init(address=cluster.address, namespace=NAMESPACE, log_to_driver=False)
        # The head's raylet learns of the worker's resources later than the GCS does; until then SPREAD places
        # every actor on the head (it did once, on a loaded machine). A task pinned to the worker runs only once
        # the head's raylet knows it.
        pinned = NodeAffinitySchedulingStrategy(worker.node_id, soft=False)
        assert ray.get(_node_id.options(scheduling_strategy=pinned).remote(), timeout=120) == worker.node_id
        # SPREAD is Ray's best effort: on a loaded machine it has placed all four on the head, twice. This test is
        # about the move, so it starts the service again (on a fresh directory) until a partition is on the worker.
        for attempt in range(3):
            svc = start(
                num_partitions=4,
                storage_path=str(tmp_path / str(attempt)),  # the same directory from both nodes: a shared FS
                namespace=NAMESPACE,
                config=GroupConfig(min_session_timeout_ms=100, initial_rebalance_delay_ms=1000),
            )
            statuses = ray.get(svc.router.status.remote())
            on_worker = [s["partition"] for s in statuses if s["node_id"] == worker.node_id]
            if on_worker:
                break
            stop(NAMESPACE)
        assert on_worker, f"SPREAD placed no partition on the worker node in 3 starts: {statuses}"
        p = on_worker[0]
        handle = svc.partition(p)
        group = next(g for g in (f"group-{i}" for i in range(1000)) if svc.find_coordinator(g)[0] == p)
        generation, ids, _ = form_group(handle, group, 2)
        tp = TopicPartition("t", 3)
        req = OffsetCommitRequest(
            group, {tp: OffsetAndMetadata(7)}, generation_id=generation, member_id=ids[0]
        )
        assert ray.get(handle.commit_offsets.remote(req)).errors[tp] == Errors.NONE

        cluster.remove_node(worker)

        def moved():
            status = ray.get(handle.status.remote())
            return status["loaded"] and status["node_id"] != worker.node_id

        wait_for(moved, timeout_s=120, what="the partition actor to restart on the head node")
        assert heartbeat(handle, group, generation, ids[1]) == Errors.NONE
        described = ray.get(handle.describe_groups.remote(DescribeGroupsRequest([group]))).groups[0]
        assert described.group_state == "Stable" and len(described.members) == 2
        fetched = ray.get(handle.fetch_offsets.remote(OffsetFetchRequest(group, [tp]))).offsets[tp]
        assert fetched.offset == 7
    finally:
        stop(NAMESPACE)
        ray.shutdown()
        cluster.shutdown()
