"""OffsetCommit, OffsetFetch and OffsetDelete: committed offsets, with topics by name (or by id from v10)."""

from __future__ import annotations

from typing import Any

from groupcoord.protocol import (
    Errors,
    OffsetAndMetadata,
    OffsetCommitRequest,
    OffsetCommitResponse,
    OffsetDeleteRequest,
    OffsetDeleteResponse,
    OffsetFetchRequest,
    OffsetFetchResponse,
    TopicPartition,
)

from .codec import millis
from .context import RequestContext


async def _topic_names(ctx: RequestContext, topics: Any) -> dict[int, str | None]:
    """For each requested topic (by position): its name, looked up by id when the version names topics by id."""
    out: dict[int, str | None] = {}
    for i, topic in enumerate(topics):
        name = getattr(topic, "name", None)
        if name is None and getattr(topic, "topic_id", None) is not None:
            name = await ctx.bridge.topic_name(topic.topic_id)
        out[i] = name
    return out


def _topic_entry(ctx: RequestContext, name: str, partitions: list[dict]) -> dict:
    return {"name": name, "topic_id": ctx.bridge.topic_id(name), "partitions": partitions}


async def offset_commit(ctx: RequestContext, req: Any) -> dict:
    """OffsetCommit v2-10: partitions of topics the registry does not know get UNKNOWN_TOPIC_OR_PARTITION
    (UNKNOWN_TOPIC_ID by id), as Kafka answers for topics that do not exist, and TOPIC_AUTHORIZATION_FAILED
    for topics the principal may not READ (the partition actors check the ones it sees); the others are
    committed."""
    names = await _topic_names(ctx, req.topics)
    known = await ctx.bridge.topics()
    if any(n is not None and n not in known for n in names.values()):
        known = await ctx.bridge.topics(fresh=True)
    offsets: dict[TopicPartition, OffsetAndMetadata] = {}
    rejected: list[tuple[int, int, Errors]] = []
    for i, topic in enumerate(req.topics):
        name = names[i]
        missing = Errors.UNKNOWN_TOPIC_ID if name is None else (
            await ctx.bridge.missing_topic(name, "READ") if name not in known else Errors.NONE)
        for p in topic.partitions:
            if missing != Errors.NONE or name is None:
                rejected.append((i, p.partition_index, missing))
                continue
            offsets[TopicPartition(name, p.partition_index)] = OffsetAndMetadata(
                p.committed_offset, p.committed_metadata or "", getattr(p, "committed_leader_epoch", -1)
            )
    errors: dict[TopicPartition, Errors] = {}
    if offsets:
        request = OffsetCommitRequest(
            group_id=req.group_id,
            offsets=offsets,
            generation_id=req.generation_id_or_member_epoch,
            member_id=req.member_id,
            group_instance_id=getattr(req, "group_instance_id", None),
            retention_time_ms=millis(getattr(req, "retention_time", -1)),
            api_version=ctx.version,
        )
        resp = await ctx.bridge.call(
            req.group_id, "commit_offsets", request, lambda e: OffsetCommitResponse({tp: e for tp in offsets})
        )
        errors = resp.errors
    topics = []
    for i, topic in enumerate(req.topics):
        name = names[i]
        partitions = [
            {"partition_index": p.partition_index,
             "error_code": errors.get(TopicPartition(name, p.partition_index), Errors.NONE) if name else Errors.NONE}
            for p in topic.partitions
        ]
        for j, index, error in rejected:
            if j == i:
                next(q for q in partitions if q["partition_index"] == index)["error_code"] = error
        topics.append({"name": name or "", "topic_id": getattr(topic, "topic_id", None), "partitions": partitions})
    return {"throttle_time": 0, "topics": topics}


async def _fetch_one(ctx: RequestContext, group_id: str, topics: Any, require_stable: bool,
                     member_id: str | None = None, member_epoch: int = -1) -> tuple[Errors, list]:
    """One group's committed offsets as Kafka's response topics (all of them when `topics` is None); from v9
    a KIP-848 member's id and epoch are checked (an error answers the group with no topics, as Kafka)."""
    partitions = None
    if topics is not None:
        names = await _topic_names(ctx, topics)
        partitions = [
            TopicPartition(names[i], p) for i, t in enumerate(topics) if names[i] is not None
            for p in t.partition_indexes
        ]
    resp = await ctx.bridge.call(
        group_id, "fetch_offsets", OffsetFetchRequest(group_id, partitions, require_stable, member_id, member_epoch),
        lambda e: OffsetFetchResponse(e, {}),
    )
    if resp.error in (Errors.UNKNOWN_MEMBER_ID, Errors.STALE_MEMBER_EPOCH):
        return resp.error, []
    by_topic: dict[str, list[dict]] = {}
    for tp, p in sorted(resp.offsets.items()):
        by_topic.setdefault(tp.topic, []).append({
            "partition_index": tp.partition, "committed_offset": p.offset,
            "committed_leader_epoch": p.leader_epoch, "metadata": p.metadata, "error_code": p.error,
        })
    if topics is not None:  # topics asked by an id the registry does not know: UNKNOWN_TOPIC_ID
        names = await _topic_names(ctx, topics)
        for i, t in enumerate(topics):
            if names[i] is None:
                by_topic.setdefault(f"\0{i}", []).extend(
                    {"partition_index": p, "committed_offset": -1, "committed_leader_epoch": -1, "metadata": "",
                     "error_code": Errors.UNKNOWN_TOPIC_ID} for p in t.partition_indexes)
    out = []
    for name, parts in by_topic.items():
        if name.startswith("\0"):
            out.append({"name": "", "topic_id": topics[int(name[1:])].topic_id, "partitions": parts})
        else:
            out.append(_topic_entry(ctx, name, parts))
    return resp.error, out


async def offset_fetch(ctx: RequestContext, req: Any) -> dict:
    """OffsetFetch v1-10: one group before v8, several groups per request from v8 (KIP-709)."""
    if ctx.version < 8:
        error, out = await _fetch_one(ctx, req.group_id, req.topics, getattr(req, "require_stable", False))
        if ctx.version < 2 and error != Errors.NONE:  # v1 has no top-level error: each partition carries it
            for t in out:
                for p in t["partitions"]:
                    p["error_code"] = error
        return {"throttle_time": 0, "topics": out, "error_code": error}
    groups = []
    for group in req.groups:
        error, out = await _fetch_one(ctx, group.group_id, group.topics, req.require_stable,
                                      getattr(group, "member_id", None), getattr(group, "member_epoch", -1))
        groups.append({"group_id": group.group_id, "topics": out, "error_code": error})
    return {"throttle_time": 0, "groups": groups}


async def offset_delete(ctx: RequestContext, req: Any) -> dict:
    """OffsetDelete v0 (KIP-496): not for topics an active member of the group subscribes to."""
    tps = [TopicPartition(t.name, p.partition_index) for t in req.topics for p in t.partitions]
    resp = await ctx.bridge.call(
        req.group_id, "delete_offsets", OffsetDeleteRequest(req.group_id, tps), lambda e: OffsetDeleteResponse(e, {})
    )
    topics = [
        {"name": t.name, "partitions": [
            {"partition_index": p.partition_index,
             "error_code": resp.errors.get(TopicPartition(t.name, p.partition_index), Errors.NONE)}
            for p in t.partitions]}
        for t in req.topics
    ] if resp.error == Errors.NONE else []
    return {"error_code": resp.error, "throttle_time": 0, "topics": topics}
