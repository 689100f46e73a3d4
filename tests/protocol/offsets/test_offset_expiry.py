"""Offset expiry (KIP-211 as in Kafka's Java OffsetExpirationConditionImpl) and Empty -> Dead cleanup."""

from __future__ import annotations

import pytest
from test_offsets import A0, A1, B0, C0, SESSION_MS, Shard, config, consumer_metadata

from groupcoord.protocol.errors import Errors
from groupcoord.protocol.messages import JoinGroupRequest
from groupcoord.protocol.records import (
    GroupMetadataKey,
    GroupMetadataValue,
    OffsetCommitKey,
    OffsetCommitValue,
    Record,
)
from groupcoord.protocol.shard.clock import ManualClock
from groupcoord.protocol.values import OffsetAndMetadata

RETENTION = 10_000
INTERVAL = 1_000


def expiry_shard(start_ms: int = 0) -> Shard:
    return Shard(
        config(offsets_retention_ms=RETENTION, offsets_retention_check_interval_ms=INTERVAL),
        ManualClock(start_ms),
    )


def cleanup(shard: Shard) -> None:
    shard.coord.expire_offsets_now()


def tombstoned(shard: Shard, since: int) -> set:
    return {r.key for r in shard.log.records[since:] if r.value is None}


# --- the periodic check ----------------------------------------------------------------------


def test_retention_check_runs_every_interval_from_creation():
    shard = Shard(config(offsets_retention_ms=100, offsets_retention_check_interval_ms=INTERVAL))
    shard.commit("g", {A0: 1})
    shard.advance(INTERVAL - 1)
    assert shard.committed("g") == {A0: 1}  # expired at 100 ms, but no check ran yet
    shard.advance(1)
    assert shard.committed("g") == {} and shard.state("g") == "Dead"
    shard.commit("g", {A0: 2})
    shard.advance(INTERVAL - 1)
    assert shard.committed("g") == {A0: 2}
    shard.advance(1)
    assert shard.committed("g") == {}


def test_retention_check_runs_one_interval_after_load():
    shard = Shard(config(offsets_retention_ms=100, offsets_retention_check_interval_ms=INTERVAL))
    shard.commit("g", {A0: 1})
    shard.clock.advance(INTERVAL // 2)  # no tick: the old shard goes away
    restarted = shard.restarted()
    restarted.advance(INTERVAL - 1)
    assert restarted.committed("g") == {A0: 1}
    restarted.advance(1)
    assert restarted.committed("g") == {}


# --- simple groups (no protocol type) ----------------------------------------------------------


def test_simple_group_offsets_expire_by_commit_time_and_the_group_dies():
    shard = expiry_shard()
    shard.commit("s", {A0: 1})
    shard.clock.advance(5_000)
    shard.commit("s", {B0: 2})
    shard.clock.advance(RETENTION - 5_000 - 1)
    cleanup(shard)
    assert shard.committed("s") == {A0: 1, B0: 2}
    shard.clock.advance(1)  # A0 is exactly RETENTION old: expired (>=)
    mark = len(shard.log.records)
    cleanup(shard)
    assert shard.committed("s") == {B0: 2} and shard.state("s") == "Empty"
    assert tombstoned(shard, mark) == {OffsetCommitKey("s", "a", 0)}
    shard.clock.advance(5_000)
    mark = len(shard.log.records)
    cleanup(shard)
    assert shard.committed("s") == {} and shard.state("s") == "Dead"
    assert tombstoned(shard, mark) == {OffsetCommitKey("s", "b", 0), GroupMetadataKey("s")}
    restarted = shard.restarted()
    assert restarted.view(["s"]) == shard.view(["s"])
    assert restarted.coord.groups.get_group("s") is None


def test_cleanup_with_nothing_expired_writes_nothing():
    shard = expiry_shard()
    shard.commit("s", {A0: 1})
    mark = len(shard.log.records)
    cleanup(shard)
    assert len(shard.log.records) == mark


# --- Empty groups with a protocol type -----------------------------------------------------------


def empty_consumer_group(shard: Shard, commit_at_ms: int, empty_at_ms: int) -> None:
    """A consumer group that commits A0 at `commit_at_ms` and becomes Empty at `empty_at_ms`."""
    generation, ids = shard.stable_group("g", {"c1": consumer_metadata("a")})
    shard.clock.advance(commit_at_ms - shard.clock.now_ms())
    assert shard.commit("g", {A0: 1}, generation_id=generation, member_id=ids["c1"]) == {A0: Errors.NONE}
    shard.clock.advance(empty_at_ms - shard.clock.now_ms())
    shard.leave_all("g", list(ids.values()))
    assert shard.state("g") == "Empty"


def test_empty_group_offsets_expire_retention_after_the_group_became_empty():
    shard = expiry_shard()
    empty_consumer_group(shard, commit_at_ms=1_000, empty_at_ms=4_000)
    shard.clock.advance(1_000 + RETENTION - shard.clock.now_ms())  # retention after the commit
    cleanup(shard)
    assert shard.committed("g") == {A0: 1}
    shard.clock.advance(4_000 + RETENTION - 1 - shard.clock.now_ms())
    cleanup(shard)
    assert shard.committed("g") == {A0: 1}
    shard.clock.advance(1)
    cleanup(shard)
    assert shard.committed("g") == {} and shard.state("g") == "Dead"
    assert shard.restarted().view(["g"]) == shard.view(["g"])


def test_empty_group_base_time_survives_a_restart():
    shard = expiry_shard()
    empty_consumer_group(shard, commit_at_ms=1_000, empty_at_ms=4_000)
    shard.clock.advance(4_000 + RETENTION - 1 - shard.clock.now_ms())
    restarted = shard.restarted()
    cleanup(restarted)
    assert restarted.committed("g") == {A0: 1}
    restarted.clock.advance(1)
    cleanup(restarted)
    assert restarted.committed("g") == {} and restarted.state("g") == "Dead"


def test_empty_group_with_unknown_state_time_uses_commit_time():
    # An old group record without a state timestamp (-1), then offsets committed at 1000 and 3000.
    shard = expiry_shard(start_ms=50_000)
    shard.coord.load(
        [
            Record(GroupMetadataKey("old"), GroupMetadataValue("consumer", 3, None, None, -1, ())),
            Record(OffsetCommitKey("old", "a", 0), OffsetCommitValue(1, -1, "", 1_000, -1)),
            Record(OffsetCommitKey("old", "b", 0), OffsetCommitValue(2, -1, "", 45_000, -1)),
        ]
    )
    assert shard.state("old") == "Empty"
    cleanup(shard)
    assert shard.committed("old") == {B0: 2}


def test_empty_group_without_offsets_is_deleted_at_the_next_check():
    # Kafka's Java coordinator: an Empty group with no offsets left gets a tombstone, any generation.
    shard = expiry_shard()
    _, ids = shard.stable_group("g", {"c1": consumer_metadata("a")})
    shard.leave_all("g", list(ids.values()))
    mark = len(shard.log.records)
    cleanup(shard)
    assert shard.state("g") == "Dead"
    assert tombstoned(shard, mark) == {GroupMetadataKey("g")}
    assert shard.restarted().state("g") == "Dead"


# --- groups with members ---------------------------------------------------------------------------


def test_stable_consumer_group_expires_only_unsubscribed_topics():
    shard = expiry_shard()
    generation, ids = shard.stable_group("g", {"c1": consumer_metadata("a"), "c2": consumer_metadata("c")})
    shard.commit("g", {A0: 1, A1: 2, B0: 3, C0: 4}, generation_id=generation, member_id=ids["c1"])
    shard.clock.advance(RETENTION)
    mark = len(shard.log.records)
    cleanup(shard)
    assert shard.committed("g") == {A0: 1, A1: 2, C0: 4}
    assert tombstoned(shard, mark) == {OffsetCommitKey("g", "b", 0)}
    assert shard.state("g") == "Stable"  # not Empty: the group itself stays
    assert shard.restarted().view(["g"]) == shard.view(["g"])


def test_stable_group_unsubscribed_offset_expires_retention_after_its_commit():
    shard = expiry_shard()
    generation, ids = shard.stable_group("g", {"c1": consumer_metadata("a")})
    shard.clock.advance(3_000)
    shard.commit("g", {B0: 3}, generation_id=generation, member_id=ids["c1"])
    shard.clock.advance(RETENTION - 1)
    cleanup(shard)
    assert shard.committed("g") == {B0: 3}
    shard.clock.advance(1)
    cleanup(shard)
    assert shard.committed("g") == {}
    assert shard.state("g") == "Stable"


def test_stable_group_with_unknown_subscription_expires_nothing():
    shard = expiry_shard()
    generation, ids = shard.stable_group("g", {"c1": b"\x00\x00garbage"})
    shard.commit("g", {B0: 3}, generation_id=generation, member_id=ids["c1"])
    shard.clock.advance(RETENTION * 5)
    cleanup(shard)
    assert shard.committed("g") == {B0: 3}


def test_non_consumer_protocol_group_with_members_expires_nothing():
    shard = expiry_shard()
    generation, ids = shard.stable_group("g", {"w1": b"worker"}, protocol_type="connect")
    shard.commit("g", {B0: 3}, generation_id=generation, member_id=ids["w1"])
    shard.clock.advance(RETENTION * 5)
    cleanup(shard)
    assert shard.committed("g") == {B0: 3}


def test_rebalancing_group_expires_nothing():
    shard = expiry_shard()
    metadata = consumer_metadata("a")
    for group_id in ("preparing", "completing"):
        generation, ids = shard.stable_group(group_id, {"c1": metadata})
        shard.commit(group_id, {B0: 3}, generation_id=generation, member_id=ids["c1"])
        shard.coord.join_group(
            JoinGroupRequest(
                group_id, SESSION_MS, protocols=[("range", metadata)], require_known_member_id=False
            )
        )
    # c1 rejoins "completing": everyone has joined, so it waits in CompletingRebalance for a sync.
    shard.coord.join_group(
        JoinGroupRequest("completing", SESSION_MS, member_id=ids["c1"], protocols=[("range", metadata)])
    )
    assert shard.state("preparing") == "PreparingRebalance"
    assert shard.state("completing") == "CompletingRebalance"
    shard.clock.advance(RETENTION * 2)
    cleanup(shard)
    assert shard.committed("preparing") == {B0: 3}
    assert shard.committed("completing") == {B0: 3}


# --- explicit expire timestamps (OffsetCommit v2-v4 retention time) -------------------------------


def test_explicit_expire_timestamp_is_honoured_while_the_group_is_empty():
    shard = expiry_shard()
    shard.commit("s", {A0: 1}, retention_time_ms=100)
    shard.commit("s", {B0: 2}, retention_time_ms=RETENTION * 3)
    shard.commit("s", {C0: 3})
    shard.clock.advance(99)
    cleanup(shard)
    assert shard.committed("s") == {A0: 1, B0: 2, C0: 3}
    shard.clock.advance(1)
    cleanup(shard)
    assert shard.committed("s") == {B0: 2, C0: 3}
    shard.clock.advance(RETENTION)  # C0 is past retention; B0's own expiry is later
    cleanup(shard)
    assert shard.committed("s") == {B0: 2}
    shard.clock.advance(RETENTION * 2)
    cleanup(shard)
    assert shard.committed("s") == {} and shard.state("s") == "Dead"


# --- restarts --------------------------------------------------------------------------------------


def test_restart_after_expiry_matches():
    shard = expiry_shard()
    shard.commit("s1", {A0: 1})
    shard.commit("s2", {A0: OffsetAndMetadata(1, "m", 3)})
    generation, ids = shard.stable_group("g", {"c1": consumer_metadata("a")})
    shard.commit("g", {A0: 1, B0: 2}, generation_id=generation, member_id=ids["c1"])
    shard.clock.advance(RETENTION // 2)
    shard.commit("s2", {B0: 4})
    assert shard.heartbeat("g", generation, ids["c1"]) == Errors.NONE
    shard.clock.advance(RETENTION // 2)
    cleanup(shard)
    groups = ["s1", "s2", "g"]
    assert [shard.state(g) for g in groups] == ["Dead", "Empty", "Stable"]
    assert shard.committed("s2") == {B0: 4} and shard.committed("g") == {A0: 1}
    restarted = shard.restarted()
    assert restarted.view(groups) == shard.view(groups)


@pytest.mark.parametrize("recommit", [False, True])
def test_expired_group_stays_deleted_and_can_come_back_as_simple_group(recommit):
    shard = expiry_shard()
    shard.commit("s", {A0: 1})
    shard.clock.advance(RETENTION)
    cleanup(shard)
    assert shard.state("s") == "Dead"
    if recommit:
        assert shard.commit("s", {B0: 2}) == {B0: Errors.NONE}
        assert shard.state("s") == "Empty"
    restarted = shard.restarted()
    assert restarted.view(["s"]) == shard.view(["s"])
