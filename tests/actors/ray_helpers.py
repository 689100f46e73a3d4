"""Small synchronous helpers that drive partition actors the way a client would, for the Ray tests."""

from __future__ import annotations

import ray
from waiting import wait_for

from groupcoord.protocol import Errors
from groupcoord.protocol.messages import (
    HeartbeatRequest,
    JoinGroupRequest,
    JoinGroupResponse,
    SyncGroupRequest,
    SyncGroupResponse,
)

SESSION_MS = 10_000


def kill_and_wait_restart(handle, timeout_s: float = 60.0) -> dict:
    """Kill a partition actor (Ray restarts it) and wait for a new process that has loaded its log."""
    old_pid = ray.get(handle.status.remote())["pid"]
    ray.kill(handle, no_restart=False)

    def restarted():
        status = ray.get(handle.status.remote())
        return status if status["pid"] != old_pid and status["loaded"] else None

    return wait_for(restarted, timeout_s, what="the partition actor to restart and reload")


def join_request(group: str, member_id: str = "", **kw) -> JoinGroupRequest:
    return JoinGroupRequest(
        group,
        kw.pop("session_timeout_ms", SESSION_MS),
        kw.pop("rebalance_timeout_ms", SESSION_MS),
        member_id=member_id,
        client_id=kw.pop("client_id", "test"),
        protocols=kw.pop("protocols", [("range", b"meta")]),
        **kw,
    )


def join_async(handle, group: str, member_id: str = "", **kw):
    """Send a JoinGroup; returns the ObjectRef (a join may park until the phase completes)."""
    return handle.join_group.remote(join_request(group, member_id, **kw))


def new_member_id(handle, group: str, **kw) -> str:
    """First phase of a dynamic join: the member id the coordinator hands out."""
    resp: JoinGroupResponse = ray.get(join_async(handle, group, **kw))
    assert resp.error == Errors.MEMBER_ID_REQUIRED, resp
    return resp.member_id


def sync(handle, group: str, generation: int, member_id: str, assignments=None) -> SyncGroupResponse:
    return ray.get(
        handle.sync_group.remote(
            SyncGroupRequest(group, generation, member_id, assignments=assignments or {})
        )
    )


def heartbeat(handle, group: str, generation: int, member_id: str) -> Errors:
    return ray.get(handle.heartbeat.remote(HeartbeatRequest(group, generation, member_id))).error


def form_group(handle, group: str, n: int) -> tuple[int, list[str], str]:
    """Join `n` dynamic members and sync them; returns (generation, member ids, leader id)."""
    ids = [new_member_id(handle, group) for _ in range(n)]
    refs = [join_async(handle, group, mid) for mid in ids]
    joins = ray.get(refs)
    assert all(j.error == Errors.NONE for j in joins), joins
    generation, leader = joins[0].generation_id, joins[0].leader
    assignments = {mid: f"assign-{i}".encode() for i, mid in enumerate(ids)}
    follower_refs = [
        handle.sync_group.remote(SyncGroupRequest(group, generation, mid)) for mid in ids if mid != leader
    ]
    leader_sync = sync(handle, group, generation, leader, assignments)
    assert leader_sync.error == Errors.NONE, leader_sync
    assert all(s.error == Errors.NONE for s in ray.get(follower_refs))
    return generation, ids, leader
