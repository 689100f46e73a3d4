"""No silent failure for consumer groups (KIP-848): bounded expiry steps, monotonic deadlines, refused fencing.

The pure shard with a ManualClock, as in test_liveness; a group "cg" with member "a" on topic "t".
"""

from __future__ import annotations

import pytest
from rel_shard import LogThatRefuses

from groupcoord.protocol import Errors, GroupConfig, GroupCoordinator, ManualClock, MemoryLog
from groupcoord.protocol import messages as msg
from groupcoord.protocol.values import OffsetAndMetadata, TopicPartition

HOUR_MS = 3_600_000
SESSION_MS = 45_000
T0 = TopicPartition("t", 0)


def _shard(log: MemoryLog | None = None, **config) -> tuple[GroupCoordinator, ManualClock]:
    clock = ManualClock(1_000_000)
    config = {"consumer_session_timeout_ms": SESSION_MS, **config}
    coord = GroupCoordinator(GroupConfig(**config), clock, log or MemoryLog())
    coord.update_topic_metadata({"t": 1, "old": 3_000})
    return coord, clock


def _join(coord: GroupCoordinator, member: str = "a") -> int:
    req = msg.ConsumerGroupHeartbeatRequest("cg", member, 0, rebalance_timeout_ms=30_000,
                                            subscribed_topic_names=["t"], topic_partitions=[])
    resp = coord.consumer_group_heartbeat(req).result()
    assert resp.error == Errors.NONE
    return resp.member_epoch


def _commit(coord: GroupCoordinator, epoch: int, offsets: dict[TopicPartition, OffsetAndMetadata]) -> None:
    resp = coord.commit_offsets(msg.OffsetCommitRequest("cg", offsets, epoch, "a")).result()
    assert set(resp.errors.values()) == {Errors.NONE}, resp


def test_consumer_group_offset_expiry_runs_in_bounded_steps_and_keeps_a_commit_made_between_steps():
    week = 7 * 24 * HOUR_MS
    coord, clock = _shard(consumer_session_timeout_ms=10 * week, offsets_retention_ms=week)
    coord.retention.step_size = 1_000
    epoch = _join(coord)
    old = {TopicPartition("old", p): OffsetAndMetadata(p) for p in range(3_000)}
    _commit(coord, epoch, {T0: OffsetAndMetadata(1), **old})
    clock.advance(week + coord.config.offsets_retention_check_interval_ms)
    start = len(coord.log.records)
    assert coord.fire_timers(1)  # one step of the pass: more to do
    assert 0 < len(coord.log.records) - start <= 1_000
    late = TopicPartition("old", 2_999)
    _commit(coord, epoch, {late: OffsetAndMetadata(7)})
    steps = 1
    while coord.fire_timers(1):
        steps += 1
    assert steps >= 3
    # "t" is subscribed: its offset stays; of the unsubscribed "old" only the late commit is left.
    assert {tp: v.offset for tp, v in coord.offsets.offsets_of("cg").items()} == {T0: 1, late: 7}
    assert coord.stats.offset_expirations == 2_999
    # Once the member left, nothing is subscribed: everything expires and the Empty group goes with it.
    coord.consumer_group_heartbeat(msg.ConsumerGroupHeartbeatRequest("cg", "a", -1))
    clock.advance(week)
    coord.expire_offsets_now()
    assert "cg" not in coord.consumer.groups and coord.offsets.offsets_of("cg") == {}
    assert coord.stats.group_deletions == 1


def test_a_consumer_group_expiry_whose_records_are_refused_changes_nothing():
    log = LogThatRefuses()
    coord, clock = _shard(log, offsets_retention_ms=60_000)
    epoch = _join(coord)
    _commit(coord, epoch, {TopicPartition("old", 0): OffsetAndMetadata(3)})
    coord.consumer_group_heartbeat(msg.ConsumerGroupHeartbeatRequest("cg", "a", -1))
    clock.advance(60_000)
    log.refusing = True
    coord.expire_offsets_now()
    assert "cg" in coord.consumer.groups and TopicPartition("old", 0) in coord.offsets.offsets_of("cg")
    assert coord.stats.expiry_write_failures == 1
    log.refusing = False
    coord.expire_offsets_now()
    assert "cg" not in coord.consumer.groups and coord.offsets.offsets_of("cg") == {}


@pytest.mark.parametrize("step_ms", [HOUR_MS, -HOUR_MS])
def test_a_wall_clock_step_expires_no_consumer_session_early_or_late(step_ms):
    coord, clock = _shard()
    epoch = _join(coord)
    clock.step_wall(step_ms)
    beat = coord.consumer_group_heartbeat(msg.ConsumerGroupHeartbeatRequest("cg", "a", epoch)).result()
    assert beat.error == Errors.NONE  # the session is armed again after the step
    clock.advance(SESSION_MS - 1)
    coord.tick()
    assert "a" in coord.consumer.groups["cg"].members  # not early
    clock.advance(1)
    coord.tick()
    assert "a" not in coord.consumer.groups["cg"].members  # not late


def test_a_consumer_session_expiry_whose_records_are_refused_keeps_the_member_and_is_retried():
    log = LogThatRefuses()
    coord, clock = _shard(log)
    _join(coord)
    epoch = coord.consumer.groups["cg"].group_epoch
    log.refusing = True
    clock.advance(SESSION_MS)
    coord.tick()
    group = coord.consumer.groups["cg"]
    assert "a" in group.members and group.group_epoch == epoch and coord.timer_failures == 1
    log.refusing = False
    clock.advance(2_000)
    coord.tick()
    assert "a" not in coord.consumer.groups["cg"].members
