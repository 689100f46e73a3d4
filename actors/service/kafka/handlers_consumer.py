"""ConsumerGroupHeartbeat (KIP-848): topics travel by id on the wire and by name in the shard."""

from __future__ import annotations

from typing import Any

from groupcoord.protocol import ConsumerGroupHeartbeatRequest, ConsumerGroupHeartbeatResponse, Errors, TopicPartition
from groupcoord.protocol.consumer.heartbeat_checks import is_blank

from .codec import millis
from .context import RequestContext


async def consumer_group_heartbeat(ctx: RequestContext, req: Any) -> dict:
    """ConsumerGroupHeartbeat v0-1: join (epoch 0), heartbeat and acknowledge, or leave (epoch -1, static -2).

    From v1 the client generates its member id (KIP-1082): Kafka refuses an empty one in every request.
    """
    if ctx.version >= 1 and is_blank(req.member_id):
        return {"throttle_time": 0, "error_code": Errors.INVALID_REQUEST, "error_message": "MemberId can't be empty.",
                "member_id": None, "member_epoch": 0, "heartbeat_interval": 0, "assignment": None}
    owned = None
    if req.topic_partitions is not None:
        owned = []
        for t in req.topic_partitions:
            name = await ctx.bridge.topic_name(t.topic_id)
            if name is not None:  # a topic the registry no longer knows is not owned any more
                owned.extend(TopicPartition(name, p) for p in t.partitions)
    request = ConsumerGroupHeartbeatRequest(
        group_id=req.group_id,
        member_id=req.member_id,
        member_epoch=req.member_epoch,
        instance_id=req.instance_id,
        rack_id=req.rack_id,
        rebalance_timeout_ms=millis(req.rebalance_timeout),
        subscribed_topic_names=None if req.subscribed_topic_names is None else list(req.subscribed_topic_names),
        subscribed_topic_regex=getattr(req, "subscribed_topic_regex", None),
        server_assignor=req.server_assignor,
        topic_partitions=owned,
        client_id=ctx.client_id,
        client_host=ctx.client_host,
    )
    resp = await ctx.bridge.call(
        req.group_id, "consumer_group_heartbeat", request,
        lambda e: ConsumerGroupHeartbeatResponse(e, None, None, 0, 0, None),
    )
    assignment = None
    if resp.assignment is not None:
        by_topic: dict[str, list[int]] = {}
        for tp in resp.assignment:
            by_topic.setdefault(tp.topic, []).append(tp.partition)
        assignment = {"topic_partitions": [
            {"topic_id": ctx.bridge.topic_id(t), "partitions": sorted(ps)} for t, ps in sorted(by_topic.items())
        ]}
    return {
        "throttle_time": 0, "error_code": resp.error, "error_message": resp.error_message,
        "member_id": resp.member_id, "member_epoch": resp.member_epoch,
        "heartbeat_interval": resp.heartbeat_interval_ms, "assignment": assignment,
    }
