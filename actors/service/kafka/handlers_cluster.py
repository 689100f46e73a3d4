"""Metadata, FindCoordinator, CreateTopics, ListOffsets and Fetch: the listener as the one broker of its cluster.

groupcoord holds no records: Fetch answers every partition with no records after the client's
max wait (as a broker with nothing new would), ListOffsets answers the end offsets reported to
the registry, and CreateTopics registers topics (one replica: the listener).
"""

from __future__ import annotations

import asyncio
import uuid
from typing import Any

import ray

from groupcoord.protocol import Errors

from .codec import millis
from .context import NO_AUTHORIZED_OPERATIONS, NODE_ID, RequestContext

_ZERO_ID = uuid.UUID(int=0)
# Kafka's special ListOffsets timestamps.
LATEST, EARLIEST, MAX_TIMESTAMP, EARLIEST_LOCAL = -1, -2, -3, -4
# A Fetch waits at most this long for records that never come (Kafka's replica.fetch.wait.max.ms-like bound).
FETCH_WAIT_CAP_MS = 30_000
GROUP_KEY_TYPE = 0
# More partitions than this in one topic are refused: every Metadata answer lists them all.
MAX_TOPIC_PARTITIONS = 100_000


def _partition_meta(index: int) -> dict:
    return {"error_code": Errors.NONE, "partition_index": index, "leader_id": NODE_ID, "leader_epoch": 0,
            "replica_nodes": [NODE_ID], "isr_nodes": [NODE_ID], "offline_replicas": []}


async def metadata(ctx: RequestContext, req: Any) -> dict:
    """Metadata v0-13: the registry's topics the principal may DESCRIBE, every partition led by the listener;
    unknown topics are UNKNOWN_TOPIC_OR_PARTITION (no automatic creation), named topics the principal may not
    DESCRIBE TOPIC_AUTHORIZATION_FAILED."""
    topics = await ctx.bridge.topics()
    asked = req.topics
    if asked is None or (ctx.version == 0 and not asked):  # all topics (v0: an empty list means all)
        wanted = [(name, None) for name in sorted(topics)]
    else:
        wanted = []
        for t in asked:
            name = getattr(t, "name", None)
            if name is None and getattr(t, "topic_id", None) not in (None, _ZERO_ID):
                name = await ctx.bridge.topic_name(t.topic_id)
                wanted.append((name, t.topic_id))
            else:
                wanted.append((name, None))
        if any(n not in topics for n, _ in wanted):
            topics = await ctx.bridge.topics(fresh=True)
    out = []
    for name, asked_id in wanted:
        if name in topics:
            partitions = [_partition_meta(p) for p in range(topics[name]["partitions"])]
            out.append({"error_code": Errors.NONE, "name": name, "topic_id": ctx.bridge.topic_id(name),
                        "is_internal": False, "partitions": partitions,
                        "topic_authorized_operations": NO_AUTHORIZED_OPERATIONS})
        else:
            error = Errors.UNKNOWN_TOPIC_ID if asked_id is not None else (
                await ctx.bridge.missing_topic(name, "DESCRIBE"))
            out.append({"error_code": error, "name": name, "topic_id": asked_id or _ZERO_ID, "is_internal": False,
                        "partitions": [], "topic_authorized_operations": NO_AUTHORIZED_OPERATIONS})
    return {"throttle_time": 0, "brokers": [ctx.broker()], "cluster_id": ctx.bridge.cluster_id,
            "controller_id": NODE_ID, "topics": out, "cluster_authorized_operations": NO_AUTHORIZED_OPERATIONS,
            "error_code": Errors.NONE}


async def find_coordinator(ctx: RequestContext, req: Any) -> dict:
    """FindCoordinator v0-6: the listener coordinates every group; other key types are INVALID_REQUEST.

    As Kafka's, a successful answer's error message is "NONE" (the message of error 0).
    """
    key_type = getattr(req, "key_type", GROUP_KEY_TYPE)
    error, message = Errors.NONE, "NONE"
    if key_type != GROUP_KEY_TYPE:
        error, message = Errors.INVALID_REQUEST, f"groupcoord coordinates groups only (key type {key_type})"
    broker = ctx.broker()
    answer = {"error_code": error, "error_message": message,
              "node_id": NODE_ID if error == Errors.NONE else -1,
              "host": broker["host"] if error == Errors.NONE else "",
              "port": broker["port"] if error == Errors.NONE else -1}
    if ctx.version < 4:
        return {"throttle_time": 0, **answer}
    return {"throttle_time": 0, "coordinators": [{"key": key, **answer} for key in req.coordinator_keys]}


async def create_topics(ctx: RequestContext, req: Any) -> dict:
    """CreateTopics v2-7: registers topics in the registry (one replica: replication factor 1 or -1 only)."""
    out = []
    for t in req.topics:
        count = t.num_partitions if t.num_partitions != -1 else (len(t.assignments) or 1)
        error, message = Errors.NONE, None
        if t.replication_factor not in (-1, 1):
            error = Errors.INVALID_REPLICATION_FACTOR
            message = (f"Unable to replicate the partition {t.replication_factor} time(s): "
                       "the only broker is the listener.")
        elif not 1 <= count <= MAX_TOPIC_PARTITIONS:
            error, message = Errors.INVALID_PARTITIONS, f"a topic has 1 to {MAX_TOPIC_PARTITIONS} partitions"
        elif req.validate_only:
            if t.name in await ctx.bridge.topics(fresh=True):
                error, message = Errors.TOPIC_ALREADY_EXISTS, f"Topic '{t.name}' already exists."
        else:
            try:
                error = Errors(await ctx.bridge.router_call("create_topic", t.name, count))
            except ray.exceptions.RayError:
                error = Errors.REQUEST_TIMED_OUT
            if error == Errors.TOPIC_ALREADY_EXISTS:
                message = f"Topic '{t.name}' already exists."
        ok = error == Errors.NONE
        out.append({"name": t.name, "topic_id": ctx.bridge.topic_id(t.name) if ok else _ZERO_ID,
                    "error_code": error, "error_message": message, "num_partitions": count if ok else -1,
                    "replication_factor": 1 if ok else -1, "configs": [] if ok else None})
    if not req.validate_only:
        await ctx.bridge.topics(fresh=True)
    return {"throttle_time": 0, "topics": out}


async def list_offsets(ctx: RequestContext, req: Any) -> dict:
    """ListOffsets v1-11: latest is the end offset reported to the registry (0 if none), earliest 0, and a
    time lookup finds no record (offset -1): groupcoord holds no records."""
    topics = await ctx.bridge.topics()
    out = []
    for t in req.topics:
        info = topics.get(t.name)
        missing = await ctx.bridge.missing_topic(t.name, "DESCRIBE") if info is None else Errors.NONE
        parts = []
        for p in t.partitions:
            answer = {"partition_index": p.partition_index, "error_code": Errors.NONE, "timestamp": -1,
                      "offset": -1, "leader_epoch": -1}
            if info is None:
                answer["error_code"] = missing
            elif not 0 <= p.partition_index < info["partitions"]:
                answer["error_code"] = Errors.UNKNOWN_TOPIC_OR_PARTITION
            elif p.timestamp == LATEST:
                answer.update(offset=int(info["end_offsets"].get(p.partition_index, 0)), leader_epoch=0)
            elif p.timestamp in (EARLIEST, EARLIEST_LOCAL):
                answer.update(offset=0, leader_epoch=0)
            parts.append(answer)
        out.append({"name": t.name, "partitions": parts})
    return {"throttle_time": 0, "topics": out}


async def fetch(ctx: RequestContext, req: Any) -> dict:
    """Fetch v4-18, honestly: no records, after the client's max wait; no fetch sessions (session id 0)."""
    if getattr(req, "session_id", 0) != 0:
        return {"throttle_time": 0, "error_code": Errors.FETCH_SESSION_ID_NOT_FOUND, "session_id": 0,
                "responses": []}
    topics = await ctx.bridge.topics()
    responses, errors = [], False
    for t in req.topics:
        name = getattr(t, "topic", None)
        if name is None:
            name = await ctx.bridge.topic_name(t.topic_id)
        info = topics.get(name) if name is not None else None
        missing = Errors.UNKNOWN_TOPIC_ID if name is None else (
            await ctx.bridge.missing_topic(name, "READ") if info is None else Errors.NONE)
        parts = []
        for p in t.partitions:
            error = Errors.NONE
            if info is None:
                error = missing
            elif not 0 <= p.partition < info["partitions"]:
                error = Errors.UNKNOWN_TOPIC_OR_PARTITION
            errors = errors or error != Errors.NONE
            end = int(info["end_offsets"].get(p.partition, 0)) if info is not None else -1
            high = max(end, p.fetch_offset) if error == Errors.NONE else -1
            parts.append({"partition_index": p.partition, "error_code": error, "high_watermark": high,
                          "last_stable_offset": high, "log_start_offset": 0 if error == Errors.NONE else -1,
                          "aborted_transactions": [], "preferred_read_replica": -1, "records": b""})
        responses.append({"topic": name or "", "topic_id": getattr(t, "topic_id", _ZERO_ID), "partitions": parts})
    if not errors and responses:
        await asyncio.sleep(min(millis(req.max_wait), FETCH_WAIT_CAP_MS) / 1000)
    return {"throttle_time": 0, "error_code": Errors.NONE, "session_id": 0, "responses": responses}
