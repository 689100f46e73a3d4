"""A member whose Ray session ended stops its heartbeats and never starts a new local Ray by calling out.

This module shuts the suite's Ray down; the next module's `ray_local` starts it again.
"""

from __future__ import annotations

import pytest
import ray
from waiting import wait_for

from groupcoord.actors import GroupMember, start, stop
from groupcoord.protocol import GroupConfig, OffsetAndMetadata, TopicPartition

NAMESPACE = "gc-test-after-shutdown"


def test_a_member_left_open_after_ray_shutdown_goes_quiet(ray_local, tmp_path) -> None:
    svc = start(num_partitions=1, storage_path=str(tmp_path), namespace=NAMESPACE,
                config=GroupConfig(min_session_timeout_ms=100, initial_rebalance_delay_ms=0))
    # Ray ends the process if a thread is inside a Ray call when ray.shutdown() runs: a long interval keeps
    # the heartbeat thread waiting between rounds then (close members before ray.shutdown() in real code).
    member = GroupMember(svc, "left-open", topics=["t"], heartbeat_interval_ms=3_000, session_timeout_ms=30_000)
    try:
        wait_for(lambda: member.poll(100) is not None and member.membership.is_stable(), 60, "the member to join")
        heartbeats = member._heartbeat_thread
        assert heartbeats is not None and heartbeats.is_alive()
    finally:
        stop(NAMESPACE)
        ray.shutdown()
    heartbeats.join(30)
    assert not heartbeats.is_alive(), "the heartbeat thread outlived the Ray session"
    with pytest.raises(RuntimeError, match="Ray is not connected"):
        member.commit({TopicPartition("t", 0): OffsetAndMetadata(1)})
    assert not ray.is_initialized(), "a call after ray.shutdown() started a new Ray instance"
