"""The Ray side of replication's transport seam: what a replica learns of its own process from Ray."""

from __future__ import annotations

import ray
from waiting import wait_for

from groupcoord.actors.service.replication.transport import RayTransport


def test_a_replica_knows_whether_ray_restarted_it_which_is_how_a_wiped_one_refuses_to_vote(ray_local):
    class _Probe:  # defined here, so that Ray ships it by value (workers cannot import a test module)
        def __init__(self) -> None:
            self.restarted = RayTransport().restarted()

        def facts(self) -> tuple[bool, str, int]:
            import os

            return self.restarted, RayTransport().node_id(), os.getpid()

    probe = ray.remote(_Probe).options(max_restarts=1).remote()
    restarted, node, pid = ray.get(probe.facts.remote())
    assert restarted is False and node == ray.get_runtime_context().get_node_id()
    ray.kill(probe, no_restart=False)  # Ray re-runs the constructor with the same arguments

    def again():
        try:
            facts = ray.get(probe.facts.remote(), timeout=10)
        except (ray.exceptions.RayActorError, ray.exceptions.GetTimeoutError):
            return None
        return facts if facts[2] != pid else None

    assert wait_for(again, 120, "the probe to restart")[0] is True
    ray.kill(probe, no_restart=True)
