"""ListGroups, DescribeGroups and DeleteGroups (fanned out by the router), and ConsumerGroupDescribe."""

from __future__ import annotations

from typing import Any

import ray

from groupcoord.protocol import (
    ConsumerGroupDescribeRequest,
    ConsumerGroupDescribeResponse,
    DeleteGroupsRequest,
    DescribedConsumerGroup,
    DescribeGroupsRequest,
    Errors,
    ListGroupsRequest,
)

from .context import NO_AUTHORIZED_OPERATIONS, RequestContext


async def list_groups(ctx: RequestContext, req: Any) -> dict:
    """ListGroups v0-5: with state filters from v4 and type filters from v5 (KIP-518, KIP-848)."""
    request = ListGroupsRequest(tuple(getattr(req, "states_filter", ())), tuple(getattr(req, "types_filter", ())))
    try:
        resp = await ctx.bridge.router_call("list_groups", request)
    except ray.exceptions.RayError:
        return {"throttle_time": 0, "error_code": Errors.COORDINATOR_NOT_AVAILABLE, "groups": []}
    groups = [
        {"group_id": g.group_id, "protocol_type": g.protocol_type, "group_state": g.group_state,
         "group_type": g.group_type}
        for g in resp.groups
    ]
    return {"throttle_time": 0, "error_code": resp.error, "groups": groups}


async def describe_groups(ctx: RequestContext, req: Any) -> dict:
    """DescribeGroups v0-6: from v6 a group that does not exist is GROUP_ID_NOT_FOUND (before: state Dead)."""
    ids = list(req.groups)
    try:
        resp = await ctx.bridge.router_call("describe_groups", DescribeGroupsRequest(ids))
        described = {d.group_id: d for d in resp.groups}
    except ray.exceptions.RayError:
        described = {}
    groups = []
    for group_id in ids:
        d = described.get(group_id)
        if d is None:
            groups.append({"error_code": Errors.COORDINATOR_NOT_AVAILABLE, "group_id": group_id, "group_state": "",
                           "protocol_type": "", "protocol_data": "", "members": [],
                           "authorized_operations": NO_AUTHORIZED_OPERATIONS})
            continue
        error, message = d.error, None
        if ctx.version >= 6 and error == Errors.NONE and d.group_state == "Dead" and not d.members:
            error, message = Errors.GROUP_ID_NOT_FOUND, f"Group {group_id} not found."
        groups.append({
            "error_code": error, "error_message": message, "group_id": group_id, "group_state": d.group_state,
            "protocol_type": d.protocol_type, "protocol_data": d.protocol_data,
            "members": [
                {"member_id": m.member_id, "group_instance_id": m.group_instance_id, "client_id": m.client_id,
                 "client_host": m.client_host, "member_metadata": m.member_metadata,
                 "member_assignment": m.member_assignment}
                for m in d.members
            ],
            "authorized_operations": NO_AUTHORIZED_OPERATIONS,
        })
    return {"throttle_time": 0, "groups": groups}


async def delete_groups(ctx: RequestContext, req: Any) -> dict:
    """DeleteGroups v0-2: only Empty groups are deleted (NON_EMPTY_GROUP otherwise), with their offsets."""
    ids = list(req.groups_names)
    try:
        results = (await ctx.bridge.router_call("delete_groups", DeleteGroupsRequest(ids))).results
    except ray.exceptions.RayError:
        results = {}
    return {
        "throttle_time": 0,
        "results": [{"group_id": g, "error_code": results.get(g, Errors.COORDINATOR_NOT_AVAILABLE)} for g in ids],
    }


def _assignment(ctx: RequestContext, tps: Any) -> dict:
    by_topic: dict[str, list[int]] = {}
    for tp in tps:
        by_topic.setdefault(tp.topic, []).append(tp.partition)
    return {"topic_partitions": [
        {"topic_id": ctx.bridge.topic_id(t), "topic_name": t, "partitions": sorted(ps)}
        for t, ps in sorted(by_topic.items())
    ]}


async def consumer_group_describe(ctx: RequestContext, req: Any) -> dict:
    """ConsumerGroupDescribe v0-1 (KIP-848): each group from the partition actor that owns it."""
    groups = []
    for group_id in req.group_ids:
        resp = await ctx.bridge.call(
            group_id, "consumer_group_describe", ConsumerGroupDescribeRequest([group_id]),
            lambda e, g=group_id: ConsumerGroupDescribeResponse([DescribedConsumerGroup(e, g)]),
        )
        d = resp.groups[0]
        groups.append({
            "error_code": d.error, "error_message": d.error_message, "group_id": d.group_id,
            "group_state": d.group_state, "group_epoch": d.group_epoch, "assignment_epoch": d.assignment_epoch,
            "assignor_name": d.assignor_name, "authorized_operations": NO_AUTHORIZED_OPERATIONS,
            "members": [
                {"member_id": m.member_id, "instance_id": m.instance_id, "rack_id": m.rack_id,
                 "member_epoch": m.member_epoch, "client_id": m.client_id, "client_host": m.client_host,
                 "subscribed_topic_names": list(m.subscribed_topic_names),
                 "subscribed_topic_regex": m.subscribed_topic_regex,
                 "assignment": _assignment(ctx, m.assignment),
                 "target_assignment": _assignment(ctx, m.target_assignment), "member_type": m.member_type}
                for m in d.members
            ],
        })
    return {"throttle_time": 0, "groups": groups}
