"""Errors mapped once at the partition actor's edge: a request whose handler raises is answered
UNKNOWN_SERVER_ERROR, logged and counted, and the other requests of its batch are served as usual."""

from __future__ import annotations

import asyncio
import logging

from groupcoord.actors.service import PartitionActor
from groupcoord.protocol import (
    Errors,
    HeartbeatRequest,
    OffsetAndMetadata,
    OffsetCommitRequest,
    OffsetFetchRequest,
    TopicPartition,
)
from groupcoord.storage import StorageRoot

TP = TopicPartition("t", 0)


async def _loaded(path) -> PartitionActor:
    actor = PartitionActor(0, 1, str(path))
    while not await actor.is_loaded():
        await asyncio.sleep(0.01)
    return actor


def _poison(actor: PartitionActor, api: str, group_id: str) -> None:
    """Make the shard's handler of `api` raise for `group_id` (a bug in one handler, injected)."""
    coord = actor.runtime.coord
    handler = getattr(coord, api)

    def poisoned(req):
        if req.group_id == group_id:
            raise RuntimeError(f"a bug in {api}")
        return handler(req)

    setattr(coord, api, poisoned)


def test_a_poisoned_request_fails_alone_and_its_batch_neighbours_succeed(tmp_path, caplog):
    StorageRoot(tmp_path, 1)

    async def scenario():
        actor = await _loaded(tmp_path)
        _poison(actor, "commit_offsets", "poisoned")
        _poison(actor, "heartbeat", "poisoned")
        calls = [
            ("commit_offsets", OffsetCommitRequest("a", {TP: OffsetAndMetadata(7)})),
            ("heartbeat", HeartbeatRequest("poisoned", 1, "m")),
            ("commit_offsets", OffsetCommitRequest("poisoned", {TP: OffsetAndMetadata(9)})),
            ("commit_offsets", OffsetCommitRequest("b", {TP: OffsetAndMetadata(8)})),
            ("fetch_offsets", OffsetFetchRequest("a", [TP])),
        ]
        responses = await actor.batch(calls)
        alone = await actor.heartbeat(HeartbeatRequest("poisoned", 1, "m"))
        fetched_b = await actor.fetch_offsets(OffsetFetchRequest("b", [TP]))
        failures = dict(actor.telemetry.request_failures)
        await actor.close()
        return responses, alone, fetched_b, failures

    with caplog.at_level(logging.ERROR):
        responses, alone, fetched_b, failures = asyncio.run(scenario())
    commit_a, heartbeat, commit_poisoned, commit_b, fetch_a = responses
    assert commit_a.errors == {TP: Errors.NONE} and commit_b.errors == {TP: Errors.NONE}
    assert heartbeat.error == Errors.UNKNOWN_SERVER_ERROR
    assert commit_poisoned.errors == {TP: Errors.UNKNOWN_SERVER_ERROR}
    assert fetch_a.offsets[TP].offset == 7 and fetched_b.offsets[TP].offset == 8
    assert alone.error == Errors.UNKNOWN_SERVER_ERROR  # a single call is answered the same way, not raised
    assert failures == {"heartbeat": 2, "commit_offsets": 1}
    logged = [r for r in caplog.records if "answered UNKNOWN_SERVER_ERROR" in r.getMessage()]
    assert len(logged) == 3 and all(r.exc_info for r in logged)
