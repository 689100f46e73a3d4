"""OffsetCommit, OffsetFetch, OffsetDelete and DeleteGroups against a GroupCoordinator shard.

Helpers at the top (Shard, ControlledLog) are also used by test_offset_expiry.py.
"""

from __future__ import annotations

from typing import Sequence

import pytest

from groupcoord.protocol.assignors.consumer_protocol import Subscription, encode_subscription
from groupcoord.protocol.config import GroupConfig
from groupcoord.protocol.errors import Errors
from groupcoord.protocol.messages import (
    DeleteGroupsRequest,
    DescribeGroupsRequest,
    HeartbeatRequest,
    JoinGroupRequest,
    LeaveGroupRequest,
    ListGroupsRequest,
    MemberIdentity,
    OffsetCommitRequest,
    OffsetDeleteRequest,
    OffsetFetchPartition,
    OffsetFetchRequest,
    SyncGroupRequest,
)
from groupcoord.protocol.records import OffsetCommitKey, OffsetCommitValue, Record
from groupcoord.protocol.shard.clock import ManualClock
from groupcoord.protocol.shard.coordinator import GroupCoordinator
from groupcoord.protocol.shard.log import MemoryLog
from groupcoord.protocol.values import OffsetAndMetadata, TopicPartition

SESSION_MS = 100_000
A0, A1, B0, C0 = (
    TopicPartition("a", 0),
    TopicPartition("a", 1),
    TopicPartition("b", 0),
    TopicPartition("c", 0),
)
NONE_FETCHED = OffsetFetchPartition(-1, "", -1, Errors.NONE)


def config(**overrides) -> GroupConfig:
    base = dict(min_session_timeout_ms=10, initial_rebalance_delay_ms=0)
    base.update(overrides)
    return GroupConfig(**base)


def consumer_metadata(*topics: str) -> bytes:
    return encode_subscription(Subscription(list(topics)))


class ControlledLog:
    """A RecordLog whose durability the test moves by hand (then tells the shard via on_durable)."""

    def __init__(self) -> None:
        self.records: list[Record] = []
        self.appends = 0
        self._durable = 0

    def append(self, records: Sequence[Record]) -> int:
        self.appends += 1
        self.records.extend(records)
        return len(self.records)

    @property
    def durable_offset(self) -> int:
        return self._durable

    def make_durable(self, coord: GroupCoordinator, upto: int | None = None) -> None:
        self._durable = len(self.records) if upto is None else upto
        coord.on_durable(self._durable)


class Shard:
    """A GroupCoordinator on a ManualClock and MemoryLog, with short-hands for the calls tests make."""

    def __init__(self, cfg: GroupConfig | None = None, clock: ManualClock | None = None, log=None) -> None:
        self.config = cfg or config()
        self.clock = clock or ManualClock()
        self.log = log if log is not None else MemoryLog()
        self.coord = GroupCoordinator(self.config, self.clock, self.log)

    def restarted(self) -> Shard:
        """A fresh shard that reopens this shard's log and replays it (same config and clock)."""
        log = MemoryLog()
        log.records.extend(self.log.records)
        fresh = Shard(self.config, self.clock, log)
        fresh.coord.load(list(log.records))
        return fresh

    def advance(self, ms: int) -> None:
        self.clock.advance(ms)
        self.coord.tick()

    # --- groups -------------------------------------------------------------------------

    def stable_group(
        self,
        group_id: str,
        members: dict[str, bytes],
        protocol_type: str = "consumer",
        instance_ids: dict[str, str] | None = None,
        sync: bool = True,
    ) -> tuple[int, dict[str, str]]:
        """Join `members` (client id -> metadata) in one rebalance and sync; returns (generation, ids)."""
        instance_ids = instance_ids or {}
        joins = {
            client: self.coord.join_group(
                JoinGroupRequest(
                    group_id,
                    SESSION_MS,
                    protocol_type=protocol_type,
                    protocols=[("range", meta)],
                    client_id=client,
                    group_instance_id=instance_ids.get(client),
                    require_known_member_id=False,
                )
            )
            for client, meta in members.items()
        }
        self.coord.tick()
        responses = {client: d.result() for client, d in joins.items()}
        assert {r.error for r in responses.values()} == {Errors.NONE}, responses
        ids = {client: r.member_id for client, r in responses.items()}
        generation = next(iter(responses.values())).generation_id
        if sync:
            leader = next(iter(responses.values())).leader
            syncs = [
                self.coord.sync_group(
                    SyncGroupRequest(
                        group_id,
                        generation,
                        member_id,
                        instance_ids.get(client),
                        assignments={m: b"" for m in ids.values()} if member_id == leader else {},
                    )
                )
                for client, member_id in ids.items()
            ]
            assert {s.result().error for s in syncs} == {Errors.NONE}
            assert self.state(group_id) == "Stable"
        return generation, ids

    def leave_all(self, group_id: str, member_ids: Sequence[str]) -> None:
        response = self.coord.leave_group(
            LeaveGroupRequest(group_id, [MemberIdentity(m) for m in member_ids])
        ).result()
        assert response.error == Errors.NONE

    def heartbeat(self, group_id: str, generation: int, member_id: str) -> Errors:
        return self.coord.heartbeat(HeartbeatRequest(group_id, generation, member_id)).result().error

    def describe(self, group_id: str):
        return self.coord.describe_groups(DescribeGroupsRequest([group_id])).result().groups[0]

    def state(self, group_id: str) -> str:
        return self.describe(group_id).group_state

    def listed(self) -> list[tuple[str, str, str]]:
        groups = self.coord.list_groups(ListGroupsRequest()).result().groups
        return sorted((g.group_id, g.protocol_type, g.group_state) for g in groups)

    # --- offsets ------------------------------------------------------------------------

    def commit(self, group_id: str, offsets: dict, **kwargs) -> dict[TopicPartition, Errors]:
        offsets = {tp: v if isinstance(v, tuple) else OffsetAndMetadata(v) for tp, v in offsets.items()}
        return self.coord.commit_offsets(OffsetCommitRequest(group_id, offsets, **kwargs)).result().errors

    def fetch(self, group_id: str, partitions: Sequence[TopicPartition] | None = None):
        response = self.coord.fetch_offsets(OffsetFetchRequest(group_id, partitions)).result()
        assert response.error == Errors.NONE
        return response.offsets

    def committed(self, group_id: str) -> dict[TopicPartition, int]:
        return {tp: p.offset for tp, p in self.fetch(group_id).items()}

    def view(self, group_ids: Sequence[str]):
        """Everything a client can observe about these groups: offsets, descriptions, the group list."""
        return (
            {g: self.fetch(g) for g in group_ids},
            self.coord.describe_groups(DescribeGroupsRequest(list(group_ids))).result(),
            self.listed(),
        )


@pytest.fixture
def shard() -> Shard:
    return Shard()


# --- OffsetCommit ------------------------------------------------------------------------------


def test_commit_to_unknown_group_creates_a_simple_group(shard):
    assert shard.commit("simple", {A0: 5, B0: 7}) == {A0: Errors.NONE, B0: Errors.NONE}
    assert shard.committed("simple") == {A0: 5, B0: 7}
    described = shard.describe("simple")
    assert (described.group_state, described.protocol_type, described.members) == ("Empty", "", [])
    assert len(shard.log.records) == 2  # offsets only: the group exists through their replay
    assert shard.coord.groups.get_group("simple").generation_id == 0


def test_commit_with_generation_to_unknown_group_is_illegal_generation(shard):
    assert shard.commit("nope", {A0: 5, B0: 1}, generation_id=0, member_id="m") == {
        A0: Errors.ILLEGAL_GENERATION,
        B0: Errors.ILLEGAL_GENERATION,
    }
    assert shard.coord.groups.get_group("nope") is None
    assert shard.log.records == []
    assert shard.fetch("nope", [A0]) == {A0: NONE_FETCHED}


def test_commit_with_generation_to_unknown_group_is_group_id_not_found_from_v9(shard):
    # Kafka's answer depends on the wire version; the Python API (no version) gets the v0-v8 one.
    v9 = shard.coord.commit_offsets(
        OffsetCommitRequest("nope", {A0: OffsetAndMetadata(5)}, 0, "m", api_version=9)).result()
    v8 = shard.coord.commit_offsets(
        OffsetCommitRequest("nope", {A0: OffsetAndMetadata(5)}, 0, "m", api_version=8)).result()
    assert (v9.errors, v8.errors) == ({A0: Errors.GROUP_ID_NOT_FOUND}, {A0: Errors.ILLEGAL_GENERATION})
    assert shard.log.records == []


def test_commit_to_empty_group_with_negative_generation_skips_member_checks(shard):
    _, ids = shard.stable_group("g", {"c1": consumer_metadata("a")})
    shard.leave_all("g", list(ids.values()))
    assert shard.state("g") == "Empty"
    assert shard.commit("g", {A0: 3}, member_id="whoever", group_instance_id="ghost") == {A0: Errors.NONE}
    assert shard.committed("g") == {A0: 3}


def test_commit_to_empty_group_with_a_generation_is_unknown_member(shard):
    generation, ids = shard.stable_group("g", {"c1": consumer_metadata("a")})
    shard.leave_all("g", list(ids.values()))
    assert shard.commit("g", {A0: 3}, generation_id=generation, member_id=ids["c1"]) == {
        A0: Errors.UNKNOWN_MEMBER_ID
    }
    assert shard.committed("g") == {}


def test_member_commits_to_stable_group(shard):
    generation, ids = shard.stable_group("g", {"c1": consumer_metadata("a"), "c2": consumer_metadata("a")})
    assert shard.commit("g", {A0: 10}, generation_id=generation, member_id=ids["c1"]) == {A0: Errors.NONE}
    assert shard.commit("g", {A1: 11}, generation_id=generation, member_id=ids["c2"]) == {A1: Errors.NONE}
    assert shard.committed("g") == {A0: 10, A1: 11}


@pytest.mark.parametrize(
    "kwargs, expected",
    [
        (dict(generation_id=1, member_id="stranger"), Errors.UNKNOWN_MEMBER_ID),
        (dict(generation_id=99, member_id="<c1>"), Errors.ILLEGAL_GENERATION),
        (dict(generation_id=-1, member_id="<c1>"), Errors.ILLEGAL_GENERATION),
        (dict(), Errors.UNKNOWN_MEMBER_ID),  # no member info: only an Empty group takes it
        (dict(generation_id=1, member_id="", group_instance_id=None), Errors.UNKNOWN_MEMBER_ID),
        (dict(generation_id=1, member_id="<c1>", group_instance_id="unmapped"), Errors.UNKNOWN_MEMBER_ID),
        (dict(generation_id=1, member_id="<c2>", group_instance_id="i1"), Errors.FENCED_INSTANCE_ID),
        (dict(generation_id=99, member_id="<c2>", group_instance_id="i1"), Errors.FENCED_INSTANCE_ID),
        (dict(generation_id=1, member_id="<c1>", group_instance_id="i1"), Errors.NONE),
    ],
)
def test_commit_validation_order_on_stable_group(shard, kwargs, expected):
    generation, ids = shard.stable_group(
        "g", {"c1": consumer_metadata("a"), "c2": consumer_metadata("a")}, instance_ids={"c1": "i1"}
    )
    assert generation == 1
    if kwargs.get("member_id", "").startswith("<"):
        kwargs["member_id"] = ids[kwargs["member_id"][1:-1]]
    before = len(shard.log.records)
    assert shard.commit("g", {A0: 1, B0: 2}, **kwargs) == {A0: expected, B0: expected}
    assert len(shard.log.records) == before + (2 if expected == Errors.NONE else 0)


def test_commit_during_completing_rebalance_is_rebalance_in_progress(shard):
    generation, ids = shard.stable_group("g", {"c1": consumer_metadata("a")}, sync=False)
    assert shard.state("g") == "CompletingRebalance"
    assert shard.commit("g", {A0: 1}, generation_id=generation, member_id=ids["c1"]) == {
        A0: Errors.REBALANCE_IN_PROGRESS
    }
    assert shard.committed("g") == {}


def test_commit_during_preparing_rebalance_is_accepted_from_current_generation(shard):
    generation, ids = shard.stable_group("g", {"c1": consumer_metadata("a")})
    late = shard.coord.join_group(
        JoinGroupRequest(
            "g", SESSION_MS, protocols=[("range", consumer_metadata("a"))], require_known_member_id=False
        )
    )
    assert not late.done() and shard.state("g") == "PreparingRebalance"
    assert shard.commit("g", {A0: 4}, generation_id=generation, member_id=ids["c1"]) == {A0: Errors.NONE}
    assert shard.committed("g") == {A0: 4}


def test_commit_keeps_the_members_session_alive():
    shard = Shard(config(min_session_timeout_ms=10))
    members = {"c1": consumer_metadata("a"), "c2": consumer_metadata("a")}
    generation, ids = shard.stable_group("g", members)
    # c1 only commits, c2 only heartbeats: both stay through several session timeouts.
    for _ in range(3):
        shard.advance(SESSION_MS - 1000)
        assert shard.commit("g", {A0: 1}, generation_id=generation, member_id=ids["c1"]) == {A0: Errors.NONE}
        assert shard.heartbeat("g", generation, ids["c2"]) == Errors.NONE
    assert shard.state("g") == "Stable"
    # Now c1 stops committing: its session expires and the group rebalances without it.
    shard.advance(SESSION_MS - 1000)
    assert shard.heartbeat("g", generation, ids["c2"]) == Errors.NONE
    shard.advance(2000)
    assert ids["c1"] not in {m.member_id for m in shard.describe("g").members}


def test_metadata_too_large_is_per_partition_in_utf16_code_units():
    shard = Shard(config(offset_metadata_max_bytes=4))
    # "😀😀" is 2 Python characters but 4 UTF-16 code units (Java String.length()): allowed.
    # "😀😀a" is 3 characters, 5 code units: too large although len() <= 4.
    result = shard.commit(
        "g",
        {
            A0: OffsetAndMetadata(1, "😀😀"),
            A1: OffsetAndMetadata(2, "😀😀a"),
            B0: OffsetAndMetadata(3, "abcde"),
        },
    )
    assert result == {
        A0: Errors.NONE,
        A1: Errors.OFFSET_METADATA_TOO_LARGE,
        B0: Errors.OFFSET_METADATA_TOO_LARGE,
    }
    assert shard.committed("g") == {A0: 1}
    assert shard.fetch("g", [A0])[A0].metadata == "😀😀"
    assert len(shard.log.records) == 1


def test_commit_where_every_partition_is_too_large_writes_nothing_and_creates_no_group():
    shard = Shard(config(offset_metadata_max_bytes=1))
    assert shard.commit("g", {A0: OffsetAndMetadata(1, "xx")}) == {A0: Errors.OFFSET_METADATA_TOO_LARGE}
    assert shard.log.records == [] and shard.coord.groups.get_group("g") is None


def test_commit_record_values():
    clock = ManualClock(1_000)
    shard = Shard(config(), clock)
    shard.commit("g", {A0: OffsetAndMetadata(5, "meta", 3)}, retention_time_ms=500)
    clock.advance(10)
    shard.commit("g", {B0: OffsetAndMetadata(6)})
    assert shard.log.records == [
        Record(OffsetCommitKey("g", "a", 0), OffsetCommitValue(5, 3, "meta", 1_000, 1_500)),
        Record(OffsetCommitKey("g", "b", 0), OffsetCommitValue(6, -1, "", 1_010, -1)),
    ]
    assert shard.fetch("g", [A0, B0]) == {
        A0: OffsetFetchPartition(5, "meta", 3, Errors.NONE),
        B0: OffsetFetchPartition(6, "", -1, Errors.NONE),
    }


class _Offset(int):
    pass


class _Metadata(str):
    pass


@pytest.mark.parametrize("value", [OffsetAndMetadata(_Offset(5), "meta", 3), OffsetAndMetadata(5, _Metadata("meta"), 3),
                                   OffsetAndMetadata(5, "meta", _Offset(3))], ids=["offset", "metadata", "epoch"])
def test_int_and_str_subclasses_are_stored_as_the_plain_types(value):
    # Validation lets them through; the records and the columns hold plain ints and strs, as after a replay.
    shard = Shard(config(), ManualClock(1_000))
    shard.commit("g", {A0: OffsetAndMetadata(4), A1: value})
    record = shard.log.records[1]
    assert record == Record(OffsetCommitKey("g", "a", 1), OffsetCommitValue(5, 3, "meta", 1_000, -1))
    assert [type(x) for x in record.value[:3]] == [int, int, str]
    fetched = shard.fetch("g", [A1])[A1]
    assert fetched == OffsetFetchPartition(5, "meta", 3, Errors.NONE)
    assert [type(fetched.offset), type(fetched.metadata), type(fetched.leader_epoch)] == [int, str, int]


def test_huge_retention_is_capped_to_int64():
    shard = Shard(config(), ManualClock(10))
    shard.commit("g", {A0: 1}, retention_time_ms=2**63 - 1)
    assert shard.log.records[0].value.expire_timestamp == 2**63 - 1


def test_a_commit_is_one_append_with_one_record_per_partition():
    log = ControlledLog()
    shard = Shard(log=log)
    d = shard.coord.commit_offsets(
        OffsetCommitRequest("g", {A0: OffsetAndMetadata(1), A1: OffsetAndMetadata(2)})
    )
    assert log.appends == 1 and [r.key for r in log.records] == [
        OffsetCommitKey("g", "a", 0),
        OffsetCommitKey("g", "a", 1),
    ]
    assert not d.done()  # not durable yet
    log.make_durable(shard.coord)
    assert d.result().errors == {A0: Errors.NONE, A1: Errors.NONE}


def test_latest_commit_wins(shard):
    shard.commit("g", {A0: 1})
    shard.commit("g", {A0: 2})
    shard.commit("g", {A0: OffsetAndMetadata(1, "back")})
    assert shard.fetch("g", [A0])[A0] == OffsetFetchPartition(1, "back", -1, Errors.NONE)
    assert shard.restarted().fetch("g", [A0])[A0] == OffsetFetchPartition(1, "back", -1, Errors.NONE)


def test_empty_group_id_is_a_valid_group(shard):
    assert shard.commit("", {A0: 9}) == {A0: Errors.NONE}
    assert shard.committed("") == {A0: 9}


# --- OffsetFetch -------------------------------------------------------------------------------


def test_fetch_explicit_and_all_partitions(shard):
    shard.commit("g", {A0: OffsetAndMetadata(5, "m", 2), B0: 7})
    assert shard.fetch("g", [A0, C0]) == {A0: OffsetFetchPartition(5, "m", 2, Errors.NONE), C0: NONE_FETCHED}
    assert shard.fetch("g") == {
        A0: OffsetFetchPartition(5, "m", 2, Errors.NONE),
        B0: OffsetFetchPartition(7, "", -1, Errors.NONE),
    }
    assert shard.fetch("g", []) == {}


def test_fetch_accepts_plain_tuples(shard):
    shard.commit("g", {A0: 5})
    assert shard.fetch("g", [("a", 0)]) == {A0: OffsetFetchPartition(5, "", -1, Errors.NONE)}


def test_fetch_unknown_group(shard):
    assert shard.fetch("unknown", [A0, B0]) == {A0: NONE_FETCHED, B0: NONE_FETCHED}
    assert shard.fetch("unknown") == {}
    assert shard.coord.groups.get_group("unknown") is None


def test_fetch_answers_regardless_of_group_state(shard):
    generation, ids = shard.stable_group("g", {"c1": consumer_metadata("a")})
    shard.commit("g", {A0: 5}, generation_id=generation, member_id=ids["c1"])
    shard.coord.join_group(
        JoinGroupRequest(
            "g", SESSION_MS, protocols=[("range", consumer_metadata("a"))], require_known_member_id=False
        )
    )
    assert shard.state("g") == "PreparingRebalance"
    assert shard.committed("g") == {A0: 5}


@pytest.mark.parametrize("require_stable", [False, True])
def test_fetch_waits_behind_earlier_writes(require_stable):
    log = ControlledLog()
    shard = Shard(log=log)
    commit = shard.coord.commit_offsets(OffsetCommitRequest("g", {A0: OffsetAndMetadata(5)}))
    fetch = shard.coord.fetch_offsets(OffsetFetchRequest("g", [A0], require_stable))
    fetch_all = shard.coord.fetch_offsets(OffsetFetchRequest("g", None, require_stable))
    assert not commit.done() and not fetch.done() and not fetch_all.done()
    log.make_durable(shard.coord)
    assert commit.result().errors == {A0: Errors.NONE}
    expected = OffsetFetchPartition(5, "", -1, Errors.NONE)
    assert fetch.result().offsets == {A0: expected}
    assert fetch_all.result().offsets == {A0: expected}


def test_fetch_waits_only_for_writes_before_it():
    log = ControlledLog()
    shard = Shard(log=log)
    shard.coord.commit_offsets(OffsetCommitRequest("g", {A0: OffsetAndMetadata(1)}))
    log.make_durable(shard.coord)
    first = len(log.records)
    second_commit = shard.coord.commit_offsets(OffsetCommitRequest("g", {A0: OffsetAndMetadata(2)}))
    fetch = shard.coord.fetch_offsets(OffsetFetchRequest("g", [A0]))
    log.make_durable(shard.coord, first)  # the second commit is still not durable
    assert not second_commit.done() and not fetch.done()
    log.make_durable(shard.coord)
    assert fetch.result().offsets[A0].offset == 2


def test_fetch_with_nothing_pending_is_answered_at_once():
    log = ControlledLog()
    shard = Shard(log=log)
    shard.coord.commit_offsets(OffsetCommitRequest("g", {A0: OffsetAndMetadata(1)}))
    log.make_durable(shard.coord)
    assert shard.coord.fetch_offsets(OffsetFetchRequest("g", [A0], True)).done()


# --- OffsetDelete ------------------------------------------------------------------------------


def delete_offsets(shard: Shard, group_id: str, partitions):
    return shard.coord.delete_offsets(OffsetDeleteRequest(group_id, partitions)).result()


def test_delete_offsets_of_unknown_group(shard):
    response = delete_offsets(shard, "nope", [A0])
    assert (response.error, response.errors) == (Errors.GROUP_ID_NOT_FOUND, {})
    assert shard.log.records == []


def test_delete_offsets_of_empty_group_deletes_every_requested_partition(shard):
    shard.commit("g", {A0: 1, A1: 2, B0: 3})
    before = len(shard.log.records)
    response = delete_offsets(shard, "g", [A0, C0, A0])
    assert response.error == Errors.NONE
    assert response.errors == {A0: Errors.NONE, C0: Errors.NONE}
    assert shard.log.records[before:] == [Record(OffsetCommitKey("g", "a", 0), None)]  # only for existing
    assert shard.committed("g") == {A1: 2, B0: 3}


def test_delete_offsets_of_stable_consumer_group_spares_subscribed_topics(shard):
    generation, ids = shard.stable_group("g", {"c1": consumer_metadata("a"), "c2": consumer_metadata("c")})
    shard.commit("g", {A0: 1, B0: 2, C0: 3}, generation_id=generation, member_id=ids["c1"])
    response = delete_offsets(shard, "g", [A0, B0, C0])
    assert response.error == Errors.NONE
    assert response.errors == {
        A0: Errors.GROUP_SUBSCRIBED_TO_TOPIC,
        B0: Errors.NONE,
        C0: Errors.GROUP_SUBSCRIBED_TO_TOPIC,
    }
    assert shard.committed("g") == {A0: 1, C0: 3}


def test_delete_offsets_counts_the_topics_of_the_generation_not_of_a_member_joining_it(shard):
    # Kafka's ClassicGroup takes the members' topics when a generation starts: a member that joins during
    # the next rebalance does not protect its topics until that rebalance completes.
    generation, ids = shard.stable_group("g", {"c1": consumer_metadata("a")})
    shard.commit("g", {A0: 1, B0: 2}, generation_id=generation, member_id=ids["c1"])
    joining = shard.coord.join_group(JoinGroupRequest("g", SESSION_MS, protocol_type="consumer",
                                                      protocols=[("range", consumer_metadata("b"))],
                                                      require_known_member_id=False))
    assert not joining.done() and shard.state("g") == "PreparingRebalance"
    response = delete_offsets(shard, "g", [A0, B0])
    assert response.errors == {A0: Errors.GROUP_SUBSCRIBED_TO_TOPIC, B0: Errors.NONE}
    assert shard.committed("g") == {A0: 1}


def test_delete_offsets_with_unknown_subscription_treats_every_topic_as_subscribed(shard):
    generation, ids = shard.stable_group("g", {"c1": b"\x00not a subscription"})
    shard.commit("g", {B0: 2}, generation_id=generation, member_id=ids["c1"])
    response = delete_offsets(shard, "g", [B0])
    assert response.errors == {B0: Errors.GROUP_SUBSCRIBED_TO_TOPIC}
    assert shard.committed("g") == {B0: 2}


def test_delete_offsets_of_non_empty_group_of_another_protocol_type(shard):
    generation, ids = shard.stable_group("g", {"w1": b"connect-metadata"}, protocol_type="connect")
    shard.commit("g", {B0: 2}, generation_id=generation, member_id=ids["w1"])
    response = delete_offsets(shard, "g", [B0])
    assert (response.error, response.errors) == (Errors.NON_EMPTY_GROUP, {})
    assert shard.committed("g") == {B0: 2}


def test_delete_offsets_of_empty_group_of_another_protocol_type_is_allowed(shard):
    generation, ids = shard.stable_group("g", {"w1": b"connect-metadata"}, protocol_type="connect")
    shard.commit("g", {B0: 2}, generation_id=generation, member_id=ids["w1"])
    shard.leave_all("g", list(ids.values()))
    assert delete_offsets(shard, "g", [B0]).errors == {B0: Errors.NONE}
    assert shard.committed("g") == {}


def test_deleting_the_last_offset_leaves_the_empty_group_until_expiry(shard):
    shard.commit("g", {A0: 1})
    delete_offsets(shard, "g", [A0])
    assert shard.state("g") == "Empty"  # Java: no immediate Empty -> Dead
    assert shard.coord.offsets.has_offsets("g") is False
    shard.advance(shard.config.offsets_retention_check_interval_ms)
    assert shard.state("g") == "Dead" and shard.coord.groups.get_group("g") is None


# --- DeleteGroups ------------------------------------------------------------------------------


def test_delete_groups(shard):
    shard.commit("simple", {A0: 1, B0: 2})
    generation, ids = shard.stable_group("busy", {"c1": consumer_metadata("a")})
    shard.commit("busy", {A0: 3}, generation_id=generation, member_id=ids["c1"])
    before = len(shard.log.records)
    response = shard.coord.delete_groups(DeleteGroupsRequest(["simple", "busy", "nope", "simple"])).result()
    assert response.results == {
        "simple": Errors.NONE,
        "busy": Errors.NON_EMPTY_GROUP,
        "nope": Errors.GROUP_ID_NOT_FOUND,
    }
    assert {r.key for r in shard.log.records[before:]} == {
        OffsetCommitKey("simple", "a", 0),
        OffsetCommitKey("simple", "b", 0),
        shard.coord.groups.group_tombstone("simple").key,
    }
    assert all(r.value is None for r in shard.log.records[before:])
    assert shard.state("simple") == "Dead"
    assert shard.fetch("simple", [A0]) == {A0: NONE_FETCHED} and shard.fetch("simple") == {}
    assert "simple" not in {g for g, _, _ in shard.listed()}
    assert shard.committed("busy") == {A0: 3}


def test_delete_groups_writes_one_append():
    log = ControlledLog()
    shard = Shard(log=log)
    shard.coord.commit_offsets(OffsetCommitRequest("x", {A0: OffsetAndMetadata(1)}))
    shard.coord.commit_offsets(OffsetCommitRequest("y", {A0: OffsetAndMetadata(1)}))
    log.make_durable(shard.coord)
    appends = log.appends
    d = shard.coord.delete_groups(DeleteGroupsRequest(["x", "y"]))
    assert log.appends == appends + 1 and not d.done()
    log.make_durable(shard.coord)
    assert d.result().results == {"x": Errors.NONE, "y": Errors.NONE}


def test_delete_empty_consumer_group_and_recommit(shard):
    generation, ids = shard.stable_group("g", {"c1": consumer_metadata("a")})
    shard.commit("g", {A0: 5}, generation_id=generation, member_id=ids["c1"])
    shard.leave_all("g", list(ids.values()))
    assert shard.coord.delete_groups(DeleteGroupsRequest(["g"])).result().results == {"g": Errors.NONE}
    assert shard.state("g") == "Dead"
    assert shard.fetch("g", [A0]) == {A0: NONE_FETCHED}
    # A later commit by a simple consumer creates a new simple group.
    assert shard.commit("g", {A0: 6}) == {A0: Errors.NONE}
    assert (shard.state("g"), shard.describe("g").protocol_type) == ("Empty", "")
    restarted = shard.restarted()
    assert restarted.view(["g"]) == shard.view(["g"])


def test_delete_group_in_each_non_empty_state(shard):
    shard.stable_group("completing", {"c1": consumer_metadata("a")}, sync=False)
    shard.stable_group("stable", {"c1": consumer_metadata("a")})
    shard.stable_group("preparing", {"c1": consumer_metadata("a")})
    shard.coord.join_group(
        JoinGroupRequest("preparing", SESSION_MS, protocols=[("range", b"")], require_known_member_id=False)
    )
    assert [shard.state(g) for g in ("completing", "stable", "preparing")] == [
        "CompletingRebalance",
        "Stable",
        "PreparingRebalance",
    ]
    results = shard.coord.delete_groups(DeleteGroupsRequest(["completing", "stable", "preparing"])).result()
    assert set(results.results.values()) == {Errors.NON_EMPTY_GROUP}


# --- restarts ----------------------------------------------------------------------------------


def test_restart_after_commits_restores_offsets_and_groups(shard):
    shard.commit("simple", {A0: OffsetAndMetadata(1, "x", 4), B0: 2})
    generation, ids = shard.stable_group(
        "consumers", {"c1": consumer_metadata("a"), "c2": consumer_metadata("b")}
    )
    shard.commit("consumers", {A0: 10, B0: 20}, generation_id=generation, member_id=ids["c2"])
    shard.commit("simple", {A0: OffsetAndMetadata(3, "y", 5)})
    restarted = shard.restarted()
    assert restarted.view(["simple", "consumers", "unknown"]) == shard.view(
        ["simple", "consumers", "unknown"]
    )
    assert restarted.describe("simple").group_state == "Empty"
    assert restarted.coord.offsets.offsets_of("simple") == shard.coord.offsets.offsets_of("simple")


def test_restart_after_deletes(shard):
    shard.commit("gone", {A0: 1})
    shard.commit("partly", {A0: 1, B0: 2})
    generation, ids = shard.stable_group("consumers", {"c1": consumer_metadata("a")})
    shard.commit("consumers", {A0: 1, B0: 2}, generation_id=generation, member_id=ids["c1"])
    shard.coord.delete_groups(DeleteGroupsRequest(["gone"]))
    delete_offsets(shard, "partly", [A0])
    delete_offsets(shard, "consumers", [A0, B0])
    groups = ["gone", "partly", "consumers"]
    restarted = shard.restarted()
    assert restarted.view(groups) == shard.view(groups)
    assert restarted.state("gone") == "Dead" and restarted.coord.groups.get_group("gone") is None
    assert restarted.committed("partly") == {B0: 2} and restarted.committed("consumers") == {A0: 1}


def test_restart_of_a_restart_is_the_same(shard):
    shard.commit("g", {A0: 1})
    shard.coord.delete_groups(DeleteGroupsRequest(["g"]))
    shard.commit("g", {B0: 2})
    once = shard.restarted()
    twice = once.restarted()
    assert once.view(["g"]) == twice.view(["g"]) == shard.view(["g"])


def test_offsets_of_and_has_offsets(shard):
    shard.commit("g", {A0: 1})
    offsets = shard.coord.offsets.offsets_of("g")
    assert list(offsets) == [A0] and offsets[A0].offset == 1
    offsets.clear()  # a copy
    assert shard.coord.offsets.has_offsets("g") and not shard.coord.offsets.has_offsets("other")
    assert shard.coord.offsets.offsets_of("other") == {}
