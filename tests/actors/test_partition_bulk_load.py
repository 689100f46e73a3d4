"""How a partition actor replays its log at start: record by record for a short log, by column for a long one,
to the same offsets either way (its class, run on asyncio; the bulk decoder itself: tests/storage/test_bulk_replay)."""

from __future__ import annotations

import asyncio

from groupcoord.actors.service import PartitionActor, partition_runtime
from groupcoord.protocol import (
    DeleteGroupsRequest,
    OffsetAndMetadata,
    OffsetCommitRequest,
    OffsetFetchRequest,
    TopicPartition,
)
from groupcoord.storage import StorageRoot


async def _loaded(path) -> PartitionActor:
    actor = PartitionActor(0, 1, str(path), fsync="never")
    while not await actor.is_loaded():
        await asyncio.sleep(0.005)
    return actor


async def _write(path) -> None:
    actor = await _loaded(path)
    for i in range(30):
        offsets = {TopicPartition(f"t{i % 3}", p): OffsetAndMetadata(i * 10 + p, "m" if p else "") for p in range(4)}
        await actor.commit_offsets(OffsetCommitRequest(f"g{i % 5}", offsets))
    await actor.delete_groups(DeleteGroupsRequest(["g4"]))
    await actor.close()


async def _reload(path) -> tuple[str, dict, dict]:
    actor = await _loaded(path)
    fetched = {}
    for g in range(5):
        response = await actor.fetch_offsets(OffsetFetchRequest(f"g{g}"))
        fetched[f"g{g}"] = {tp: (p.offset, p.metadata) for tp, p in response.offsets.items()}
    status = await actor.status()
    await actor.close()
    return status["load_mode"], fetched, status


def test_a_short_log_replays_record_by_record_and_a_long_one_by_column_to_the_same_offsets(tmp_path, monkeypatch):
    StorageRoot(tmp_path, 1)
    asyncio.run(_write(tmp_path))
    mode, by_record, _ = asyncio.run(_reload(tmp_path))
    monkeypatch.setattr(partition_runtime, "BULK_REPLAY_MIN_RECORDS", 10)
    monkeypatch.setattr(partition_runtime, "BULK_REPLAY_MIN_RECORDS_NUMBA", 10)
    bulk_mode, by_column, status = asyncio.run(_reload(tmp_path))
    assert (mode, bulk_mode) == ("records", "bulk")
    assert by_column == by_record and by_record["g4"] == {}
    assert by_record["g3"][TopicPartition("t2", 1)] == (231, "m")  # the last of g3's commits to t2 (i = 23)
    assert status["offsets"] == 4 * 4 * 3 and status["records_replayed"] > 120
