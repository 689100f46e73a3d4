"""A coordinator shard loaded from a compacted log ends in the same state as from the full log."""

from __future__ import annotations

from groupcoord.protocol import ManualClock, MemoryLog, TopicPartition
from groupcoord.protocol.config import GroupConfig
from groupcoord.protocol.messages import (
    DeleteGroupsRequest,
    DescribeGroupsRequest,
    JoinGroupRequest,
    LeaveGroupRequest,
    ListGroupsRequest,
    MemberIdentity,
    OffsetCommitRequest,
    OffsetDeleteRequest,
    OffsetFetchRequest,
    SyncGroupRequest,
)
from groupcoord.protocol.shard.coordinator import GroupCoordinator
from groupcoord.protocol.values import OffsetAndMetadata
from groupcoord.storage import PartitionLog

HOUR = 3600 * 1000
DAY = 24 * HOUR
CONFIG = GroupConfig(initial_rebalance_delay_ms=0, offsets_retention_ms=3 * DAY)


class Driver:
    """Runs requests against a shard whose log is a PartitionLog, flushing like the actor does."""

    def __init__(self, plog: PartitionLog, clock: ManualClock) -> None:
        self.plog = plog
        self.clock = clock
        self.coord = GroupCoordinator(CONFIG, clock, plog)

    def run(self, deferred):
        self.coord.on_durable(self.plog.flush())
        return deferred.result()

    def advance(self, ms: int) -> None:
        self.clock.advance(ms)
        self.coord.tick()
        self.coord.on_durable(self.plog.flush())

    def commit(self, group: str, offsets: dict, generation: int = -1, member: str = "") -> None:
        req = OffsetCommitRequest(
            group,
            {TopicPartition(t, p): OffsetAndMetadata(o, f"m{o}") for (t, p), o in offsets.items()},
            generation_id=generation,
            member_id=member,
        )
        self.run(self.coord.commit_offsets(req))

    def join_and_sync(self, group: str, clients: list[str]) -> tuple[int, list[str]]:
        ids = [self.run(self.coord.join_group(self._join(group, c, ""))).member_id for c in clients]
        return self.rejoin_and_sync(group, clients, ids), ids

    def rejoin_and_sync(self, group: str, clients: list[str], ids: list[str]) -> int:
        joins = [self.coord.join_group(self._join(group, c, m)) for c, m in zip(clients, ids, strict=True)]
        self.advance(1)
        responses = [self.run(d) for d in joins]
        generation, leader = responses[0].generation_id, responses[0].leader
        plan = {m: f"assignment-{i}".encode() for i, m in enumerate(ids)}
        for m in ids:
            req = SyncGroupRequest(group, generation, m, assignments=plan if m == leader else {})
            self.run(self.coord.sync_group(req))
        return generation

    @staticmethod
    def _join(group: str, client: str, member_id: str) -> JoinGroupRequest:
        protocols = [("range", client.encode())]
        return JoinGroupRequest(
            group, 30_000, 60_000, member_id=member_id, client_id=client, protocols=protocols
        )


def shard_state(records) -> dict:
    """Everything a client can observe of a shard loaded from `records`."""
    coord = GroupCoordinator(CONFIG, ManualClock(0), MemoryLog())
    coord.load(records)
    listed = coord.list_groups(ListGroupsRequest()).result().groups
    ids = sorted(g.group_id for g in listed)
    described = coord.describe_groups(DescribeGroupsRequest(ids)).result().groups
    offsets = {}
    for g in [*ids, "simple-0", "simple-1", "simple-2", "deleted", "expired", "consumers", "live"]:
        offsets[g] = coord.fetch_offsets(OffsetFetchRequest(g, None)).result()
    return {"listed": sorted(listed, key=repr), "described": described, "offsets": offsets}


def test_shard_state_after_compacted_replay_equals_uncompacted(tmp_path):
    clock = ManualClock(1_700_000_000_000)
    plog = PartitionLog(tmp_path, clock=clock, sync="never", segment_bytes=2_000, tombstone_retention_ms=DAY)
    d = Driver(plog, clock)
    for round_ in range(20):
        for g in range(3):
            d.commit(f"simple-{g}", {("orders", p): round_ * 10 + p for p in range(4)})
        d.advance(60_000)
    generation, members = d.join_and_sync("consumers", ["alice", "bob", "carol"])
    for round_ in range(5):
        d.commit("consumers", {("orders", p): 1000 + round_ for p in range(3)}, generation, members[0])
    d.run(d.coord.leave_group(LeaveGroupRequest("consumers", [MemberIdentity(members[1])])))
    d.rejoin_and_sync("consumers", ["alice", "carol"], [members[0], members[2]])
    d.run(d.coord.delete_offsets(OffsetDeleteRequest("simple-1", [TopicPartition("orders", 0)])))
    d.commit("deleted", {("orders", 0): 5})
    d.run(d.coord.delete_groups(DeleteGroupsRequest(["deleted"])))
    d.commit("expired", {("old", 0): 1})
    d.advance(DAY + HOUR)  # the deletions' tombstones are past the storage retention now
    for g in range(3):
        d.commit(f"simple-{g}", {("orders", p): 500 + p for p in range(2)})
    d.advance(2 * DAY)  # "expired" and "consumers" pass the offsets retention: the shard writes tombstones
    d.commit("simple-2", {("orders", 9): 9})
    generation, members = d.join_and_sync("live", ["dave", "erin"])
    d.commit("live", {("payments", p): 7 for p in range(3)}, generation, members[1])
    plog.append([])
    full = list(plog.replay())
    result = plog.compact()
    compacted = list(plog.replay())
    assert result.tombstones_dropped > 0
    assert len(compacted) < len(full) / 2
    expected = shard_state(full)
    assert expected["offsets"]["simple-0"].offsets and expected["offsets"]["live"].offsets
    assert next(g.members for g in expected["described"] if g.group_id == "live")
    assert not expected["offsets"]["expired"].offsets
    assert shard_state(compacted) == expected
    plog.close()
    reopened = PartitionLog(tmp_path, clock=clock, sync="never")
    assert shard_state(reopened.replay()) == expected
    reopened.close()
