"""A partition actor's answers while its log loads, and its routing check (its class, run on asyncio)."""

from __future__ import annotations

import asyncio

from groupcoord.actors.service import PartitionActor, request_path
from groupcoord.protocol import (
    Errors,
    HeartbeatRequest,
    JoinGroupRequest,
    OffsetAndMetadata,
    OffsetCommitRequest,
    OffsetFetchRequest,
    SyncGroupRequest,
    TopicPartition,
    partition_for,
)
from groupcoord.storage import StorageRoot

TP = TopicPartition("t", 0)


def test_requests_before_the_log_is_loaded_get_load_in_progress_and_heartbeats_none(tmp_path):
    StorageRoot(tmp_path, 1)  # start() creates the root; a partition only opens one

    async def scenario():
        actor = PartitionActor(0, 1, str(tmp_path))  # loading starts, but has not run yet
        join = await actor.join_group(JoinGroupRequest("g", 10000, protocols=[("range", b"")]))
        sync = await actor.sync_group(SyncGroupRequest("g", 1, "m"))
        heartbeat = await actor.heartbeat(HeartbeatRequest("g", 1, "m"))
        commit = await actor.commit_offsets(OffsetCommitRequest("g", {TP: OffsetAndMetadata(1)}))
        fetch = await actor.fetch_offsets(OffsetFetchRequest("g"))
        loaded_before = await actor.is_loaded()
        while not await actor.is_loaded():
            await asyncio.sleep(0.01)
        after = await actor.commit_offsets(OffsetCommitRequest("g", {TP: OffsetAndMetadata(1)}))
        return join, sync, heartbeat, commit, fetch, loaded_before, after

    join, sync, heartbeat, commit, fetch, loaded_before, after = asyncio.run(scenario())
    assert not loaded_before
    assert join.error == Errors.COORDINATOR_LOAD_IN_PROGRESS
    assert sync.error == Errors.COORDINATOR_LOAD_IN_PROGRESS
    assert heartbeat.error == Errors.NONE  # Kafka answers heartbeats blindly while loading
    assert commit.errors == {TP: Errors.COORDINATOR_LOAD_IN_PROGRESS}
    assert fetch.error == Errors.COORDINATOR_LOAD_IN_PROGRESS
    assert after.errors == {TP: Errors.NONE}


def test_a_group_of_another_partition_gets_not_coordinator(tmp_path):
    other = next(g for g in (f"g{i}" for i in range(100)) if partition_for(g, 2) == 1)
    StorageRoot(tmp_path, 2)

    async def scenario():
        actor = PartitionActor(0, 2, str(tmp_path))
        return await actor.join_group(JoinGroupRequest(other, 10000, protocols=[("range", b"")]))

    assert asyncio.run(scenario()).error == Errors.NOT_COORDINATOR


def test_ownership_stays_right_past_the_ids_it_remembers(tmp_path, monkeypatch):
    monkeypatch.setattr(request_path, "_OWNED_CACHE_SIZE", 3)
    StorageRoot(tmp_path, 4)
    ids = [f"group-{i}" for i in range(50)]

    async def scenario():
        actor = PartitionActor(1, 4, str(tmp_path))
        answers = [actor.requests.owns(g) for g in ids + ids[::-1]]
        await actor.close()
        return answers, len(actor.requests._owned)

    answers, remembered = asyncio.run(scenario())
    assert answers == [partition_for(g, 4) == 1 for g in ids + ids[::-1]]
    assert any(answers) and not all(answers) and remembered <= 3
