"""JoinGroup, SyncGroup, Heartbeat and LeaveGroup: Kafka's classic membership APIs onto the partition actors."""

from __future__ import annotations

from typing import Any

from groupcoord.protocol import (
    Errors,
    HeartbeatRequest,
    HeartbeatResponse,
    JoinGroupRequest,
    JoinGroupResponse,
    LeaveGroupRequest,
    LeaveGroupResponse,
    MemberIdentity,
    SyncGroupRequest,
    SyncGroupResponse,
)

from .codec import millis
from .context import RequestContext


async def join_group(ctx: RequestContext, req: Any) -> dict:
    """JoinGroup v0-9: from v4 a new dynamic member first gets MEMBER_ID_REQUIRED with its id (KIP-394)."""
    session_ms = millis(req.session_timeout)
    request = JoinGroupRequest(
        group_id=req.group_id,
        session_timeout_ms=session_ms,
        rebalance_timeout_ms=millis(getattr(req, "rebalance_timeout", session_ms)),
        member_id=req.member_id,
        group_instance_id=getattr(req, "group_instance_id", None),
        protocol_type=req.protocol_type,
        protocols=[(p.name, p.metadata) for p in req.protocols],
        client_id=ctx.client_id,
        client_host=ctx.client_host,
        reason=getattr(req, "reason", None),
        require_known_member_id=ctx.version >= 4,
    )

    def failed(error: Errors) -> JoinGroupResponse:
        return JoinGroupResponse(error, -1, None, None, "", req.member_id, [])

    resp = await ctx.bridge.call(req.group_id, "join_group", request, failed)
    legacy = ctx.version < 7  # before v7 the protocol name is not nullable
    return {
        "throttle_time": 0,
        "error_code": resp.error,
        "generation_id": resp.generation_id,
        "protocol_type": resp.protocol_type,
        "protocol_name": (resp.protocol_name or "") if legacy else resp.protocol_name,
        "leader": resp.leader,
        "skip_assignment": resp.skip_assignment,
        "member_id": resp.member_id,
        "members": [
            {"member_id": m.member_id, "group_instance_id": m.group_instance_id, "metadata": m.metadata}
            for m in resp.members
        ],
    }


async def sync_group(ctx: RequestContext, req: Any) -> dict:
    """SyncGroup v0-5: the leader's request carries every member's assignment.

    From v5 the protocol type and name are mandatory: Kafka's API layer refuses a request without them
    with INCONSISTENT_GROUP_PROTOCOL before the coordinator sees it (so before the member is checked).
    """
    if ctx.version >= 5 and (req.protocol_type is None or req.protocol_name is None):
        return {"throttle_time": 0, "error_code": Errors.INCONSISTENT_GROUP_PROTOCOL, "protocol_type": None,
                "protocol_name": None, "assignment": b""}
    request = SyncGroupRequest(
        group_id=req.group_id,
        generation_id=req.generation_id,
        member_id=req.member_id,
        group_instance_id=getattr(req, "group_instance_id", None),
        protocol_type=getattr(req, "protocol_type", None),
        protocol_name=getattr(req, "protocol_name", None),
        assignments={a.member_id: a.assignment for a in req.assignments},
    )
    resp = await ctx.bridge.call(
        req.group_id, "sync_group", request, lambda e: SyncGroupResponse(e, None, None, b"")
    )
    return {
        "throttle_time": 0,
        "error_code": resp.error,
        "protocol_type": resp.protocol_type,
        "protocol_name": resp.protocol_name,
        "assignment": resp.assignment,
    }


async def heartbeat(ctx: RequestContext, req: Any) -> dict:
    """Heartbeat v0-4."""
    request = HeartbeatRequest(
        req.group_id, req.generation_id, req.member_id, getattr(req, "group_instance_id", None)
    )
    resp = await ctx.bridge.call(req.group_id, "heartbeat", request, HeartbeatResponse)
    return {"throttle_time": 0, "error_code": resp.error}


async def leave_group(ctx: RequestContext, req: Any) -> dict:
    """LeaveGroup v0-5: one member before v3, a batch of members (by id or instance id) from v3 (KIP-345)."""
    if ctx.version < 3:
        members = [MemberIdentity(req.member_id)]
    else:
        members = [MemberIdentity(m.member_id, m.group_instance_id, getattr(m, "reason", None)) for m in req.members]
    resp = await ctx.bridge.call(
        req.group_id, "leave_group", LeaveGroupRequest(req.group_id, members), lambda e: LeaveGroupResponse(e, [])
    )
    error = resp.error
    if ctx.version < 3 and error == Errors.NONE:  # one member: its own error is the answer's
        error = next((m.error for m in resp.members if m.error != Errors.NONE), Errors.NONE)
    return {
        "throttle_time": 0,
        "error_code": error,
        "members": [
            {"member_id": m.member_id, "group_instance_id": m.group_instance_id, "error_code": m.error}
            for m in resp.members
        ],
    }
