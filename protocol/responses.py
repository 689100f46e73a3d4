"""Responses built without a handler's logic: each API's error response, and JoinGroup/SyncGroup answers."""

from __future__ import annotations

from typing import Any, Callable

from .apis import Api
from .classic.group import ClassicGroup, Member
from .consumer.messages import ConsumerGroupDescribeResponse, ConsumerGroupHeartbeatResponse, DescribedConsumerGroup
from .errors import Errors
from .messages import (
    DeleteGroupsResponse,
    DescribedGroup,
    DescribeGroupsResponse,
    HeartbeatResponse,
    JoinGroupMember,
    JoinGroupResponse,
    LeaveGroupResponse,
    ListGroupsResponse,
    OffsetCommitResponse,
    OffsetDeleteResponse,
    OffsetFetchResponse,
    SyncGroupResponse,
)


def join_error(error: Errors, member_id: str = "") -> JoinGroupResponse:
    """A JoinGroup error response (generation -1, no protocol, no leader, no members)."""
    return JoinGroupResponse(error, -1, None, None, "", member_id, [])


def sync_error(error: Errors) -> SyncGroupResponse:
    """A SyncGroup error response."""
    return SyncGroupResponse(error, None, None, b"")


def join_response(group: ClassicGroup, member: Member, skip: bool = False) -> JoinGroupResponse:
    """The current generation as `member` sees it; the leader also gets the members."""
    members: list[JoinGroupMember] = []
    if group.is_leader(member.member_id):
        protocol = group.protocol_name or ""
        members = [
            JoinGroupMember(m.member_id, m.group_instance_id, m.metadata(protocol)) for m in group.members.values()
        ]
    return JoinGroupResponse(
        Errors.NONE,
        group.generation_id,
        group.protocol_type,
        group.protocol_name,
        group.leader_id or "",
        member.member_id,
        members,
        skip,
    )


def _str_or(value: Any, default: str = "") -> str:
    return value if isinstance(value, str) else default


def _group_ids(req: Any) -> list[str]:
    ids = getattr(req, "group_ids", None)
    if not isinstance(ids, (list, tuple)):
        return []
    return [g for g in ids if isinstance(g, str)]


def _offset_keys(req: Any) -> list:
    offsets: Any = getattr(req, "offsets", None)
    if not hasattr(offsets, "keys"):
        return []
    try:
        return [tp for tp in offsets.keys() if isinstance(tp, tuple) and hash(tp) is not None]
    except TypeError:
        return []


_ERROR_RESPONSES: dict[str, Callable[[Any, Errors], Any]] = {
    Api.JOIN_GROUP: lambda r, e: join_error(e, _str_or(getattr(r, "member_id", ""))),
    Api.SYNC_GROUP: lambda r, e: sync_error(e),
    Api.HEARTBEAT: lambda r, e: HeartbeatResponse(e),
    Api.LEAVE_GROUP: lambda r, e: LeaveGroupResponse(e, []),
    Api.OFFSET_COMMIT: lambda r, e: OffsetCommitResponse({tp: e for tp in _offset_keys(r)}),
    Api.OFFSET_FETCH: lambda r, e: OffsetFetchResponse(e, {}),
    Api.LIST_GROUPS: lambda r, e: ListGroupsResponse(e, []),
    Api.DESCRIBE_GROUPS: lambda r, e: DescribeGroupsResponse(
        [DescribedGroup(e, g, "", "", "", []) for g in _group_ids(r)]
    ),
    Api.DELETE_GROUPS: lambda r, e: DeleteGroupsResponse({g: e for g in _group_ids(r)}),
    Api.OFFSET_DELETE: lambda r, e: OffsetDeleteResponse(e, {}),
    Api.CONSUMER_GROUP_HEARTBEAT: lambda r, e: ConsumerGroupHeartbeatResponse(e, None, None, 0, 0, None),
    Api.CONSUMER_GROUP_DESCRIBE: lambda r, e: ConsumerGroupDescribeResponse(
        [DescribedConsumerGroup(e, g) for g in _group_ids(r)]
    ),
}


def response_error(response: Any) -> Errors:
    """The error a response carries: its top-level code, else the first per-item one that is not NONE."""
    error = getattr(response, "error", None)
    if error is not None and error != Errors.NONE:
        return error
    items: Any = ()
    if hasattr(response, "errors"):  # OffsetCommit, OffsetDelete
        items = response.errors.values()
        if type(response.errors) is dict and not any(items):  # every one NONE (code 0), found in C
            return Errors.NONE if error is None else error
    elif hasattr(response, "results"):  # DeleteGroups
        items = response.results.values()
    elif hasattr(response, "groups") and not hasattr(response, "error"):  # DescribeGroups
        items = (g.error for g in response.groups)
    elif hasattr(response, "members"):  # LeaveGroup's per-member answers
        items = (m.error for m in response.members if hasattr(m, "error"))
    for item in items:
        if item != Errors.NONE:
            return item
    return Errors.NONE if error is None else error


def error_response(api: str, req: Any, error: Errors) -> Any:
    """The response of `api` (a GroupCoordinator method name) that carries `error` for `req`."""
    return _ERROR_RESPONSES[api](req, error)
