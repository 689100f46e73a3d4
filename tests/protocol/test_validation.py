"""Request validation: bad input is answered with INVALID_REQUEST / INVALID_GROUP_ID and changes nothing."""

from __future__ import annotations

import dataclasses

import pytest

from groupcoord.protocol import validation
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
    OffsetFetchRequest,
    SyncGroupRequest,
)
from groupcoord.protocol.shard.clock import ManualClock
from groupcoord.protocol.shard.coordinator import GroupCoordinator
from groupcoord.protocol.shard.log import MemoryLog
from groupcoord.protocol.values import OffsetAndMetadata, TopicPartition

TP = TopicPartition("t", 0)
META = encode_subscription(Subscription(["t"]))

VALID = {
    "join_group": JoinGroupRequest("g", 10000, protocols=[("range", META)], require_known_member_id=False),
    "sync_group": SyncGroupRequest("g", 1, "m", assignments={"m": b""}),
    "heartbeat": HeartbeatRequest("g", 1, "m"),
    "leave_group": LeaveGroupRequest("g", [MemberIdentity("m")]),
    "commit_offsets": OffsetCommitRequest("g", {TP: OffsetAndMetadata(1)}),
    "fetch_offsets": OffsetFetchRequest("g", [TP]),
    "list_groups": ListGroupsRequest(),
    "describe_groups": DescribeGroupsRequest(["g"]),
    "delete_groups": DeleteGroupsRequest(["g"]),
    "delete_offsets": OffsetDeleteRequest("g", [TP]),
}


BIG32, BIG64 = 2**31, 2**63
SURROGATE = "bad\ud800"

# (api, field, bad value) -> INVALID_REQUEST
BAD_FIELDS = [
    ("join_group", "session_timeout_ms", "10000"),
    ("join_group", "session_timeout_ms", True),
    ("join_group", "session_timeout_ms", BIG32),
    ("join_group", "session_timeout_ms", 1.5),
    ("join_group", "rebalance_timeout_ms", -(BIG32 + 1)),
    ("join_group", "member_id", None),
    ("join_group", "member_id", 5),
    ("join_group", "group_instance_id", 7),
    ("join_group", "group_instance_id", SURROGATE),
    ("join_group", "protocol_type", None),
    ("join_group", "protocols", "range"),
    ("join_group", "protocols", [("range", "not bytes")]),
    ("join_group", "protocols", [("range",)]),
    ("join_group", "protocols", [(None, META)]),
    ("join_group", "protocols", None),
    ("join_group", "client_id", None),
    ("join_group", "client_host", b"host"),
    ("join_group", "reason", 3),
    ("join_group", "require_known_member_id", 1),
    ("sync_group", "generation_id", "1"),
    ("sync_group", "generation_id", BIG32),
    ("sync_group", "generation_id", False),
    ("sync_group", "member_id", None),
    ("sync_group", "protocol_type", 1),
    ("sync_group", "protocol_name", b"range"),
    ("sync_group", "assignments", [("m", b"")]),
    ("sync_group", "assignments", {"m": "text"}),
    ("sync_group", "assignments", {1: b""}),
    ("sync_group", "assignments", None),
    ("heartbeat", "generation_id", None),
    ("heartbeat", "member_id", 1),
    ("heartbeat", "group_instance_id", b"i"),
    ("leave_group", "members", None),
    ("leave_group", "members", [("m", None)]),
    ("leave_group", "members", [MemberIdentity(None)]),  # type: ignore[arg-type]
    ("leave_group", "members", [MemberIdentity("m", 5)]),  # type: ignore[arg-type]
    ("leave_group", "members", [MemberIdentity("m", reason=1)]),  # type: ignore[arg-type]
    ("leave_group", "members", MemberIdentity("m")),
    ("commit_offsets", "offsets", None),
    ("commit_offsets", "offsets", [(TP, OffsetAndMetadata(1))]),
    ("commit_offsets", "offsets", {TopicPartition("t", -1): OffsetAndMetadata(1)}),
    ("commit_offsets", "offsets", {TopicPartition("t", BIG32): OffsetAndMetadata(1)}),
    ("commit_offsets", "offsets", {TopicPartition("t", True): OffsetAndMetadata(1)}),
    ("commit_offsets", "offsets", {TopicPartition(None, 0): OffsetAndMetadata(1)}),  # type: ignore[arg-type]
    ("commit_offsets", "offsets", {TopicPartition(SURROGATE, 0): OffsetAndMetadata(1)}),
    ("commit_offsets", "offsets", {("t",): OffsetAndMetadata(1)}),
    ("commit_offsets", "offsets", {"t": OffsetAndMetadata(1)}),
    ("commit_offsets", "offsets", {TP: OffsetAndMetadata(-2)}),
    ("commit_offsets", "offsets", {TP: OffsetAndMetadata(BIG64)}),
    ("commit_offsets", "offsets", {TP: OffsetAndMetadata(1.0)}),  # type: ignore[arg-type]
    ("commit_offsets", "offsets", {TP: OffsetAndMetadata(False)}),
    ("commit_offsets", "offsets", {TP: OffsetAndMetadata(1, None)}),  # type: ignore[arg-type]
    ("commit_offsets", "offsets", {TP: OffsetAndMetadata(1, b"m")}),  # type: ignore[arg-type]
    ("commit_offsets", "offsets", {TP: OffsetAndMetadata(1, SURROGATE)}),
    ("commit_offsets", "offsets", {TP: OffsetAndMetadata(1, "", -2)}),
    ("commit_offsets", "offsets", {TP: OffsetAndMetadata(1, "", BIG32)}),
    ("commit_offsets", "offsets", {TP: 5}),
    ("commit_offsets", "offsets", {TP: (1, "")}),
    ("commit_offsets", "generation_id", BIG32),
    ("commit_offsets", "generation_id", None),
    ("commit_offsets", "member_id", None),
    ("commit_offsets", "group_instance_id", 1),
    ("commit_offsets", "retention_time_ms", -2),
    ("commit_offsets", "retention_time_ms", BIG64),
    ("commit_offsets", "retention_time_ms", "1000"),
    ("fetch_offsets", "partitions", "t"),
    ("fetch_offsets", "partitions", {TP}),
    ("fetch_offsets", "partitions", [("t", -1)]),
    ("fetch_offsets", "partitions", [("t", "0")]),
    ("fetch_offsets", "partitions", [TP, None]),
    ("fetch_offsets", "require_stable", None),
    ("fetch_offsets", "require_stable", 0),
    ("list_groups", "states_filter", "Stable"),
    ("list_groups", "states_filter", [None]),
    ("list_groups", "types_filter", None),
    ("describe_groups", "group_ids", "g"),
    ("describe_groups", "group_ids", None),
    ("delete_groups", "group_ids", "g"),
    ("delete_groups", "group_ids", {"g"}),
    ("delete_offsets", "partitions", None),
    ("delete_offsets", "partitions", [("t", -5)]),
    ("delete_offsets", "partitions", [(1, 0)]),
]

# (api, group id) -> INVALID_GROUP_ID
BAD_GROUP_IDS = [
    (api, gid)
    for api in ("join_group", "sync_group", "heartbeat", "leave_group", "delete_offsets")
    for gid in (None, "", 7, b"g")
] + [(api, gid) for api in ("commit_offsets", "fetch_offsets") for gid in (None, 7, b"g")]


TOP_LEVEL_ERROR = {api for api in VALID if api not in ("commit_offsets", "describe_groups", "delete_groups")}


def make_coordinator() -> GroupCoordinator:
    return GroupCoordinator(GroupConfig(min_session_timeout_ms=10), ManualClock(), MemoryLog())


def seeded() -> GroupCoordinator:
    """A shard with one simple group holding one offset, so that a bad request could change something."""
    coord = make_coordinator()
    assert coord.commit_offsets(OffsetCommitRequest("g", {TP: OffsetAndMetadata(5)})).result().errors == {
        TP: Errors.NONE
    }
    return coord


def snapshot(coord: GroupCoordinator):
    fetch = coord.fetch_offsets(OffsetFetchRequest("g")).result()
    describe = coord.describe_groups(DescribeGroupsRequest(["g", ""])).result()
    return len(coord.log.records), fetch, describe, sorted(coord.groups.groups)


@pytest.mark.parametrize("api", sorted(VALID))
def test_valid_requests_pass(api):
    assert validation.check(api, VALID[api]) is None
    assert validation.check(api, VALID[api]) is None


@pytest.mark.parametrize("api, field, value", BAD_FIELDS)
def test_bad_field_is_invalid_request(api, field, value):
    req = dataclasses.replace(VALID[api], **{field: value})
    assert validation.check(api, req) == Errors.INVALID_REQUEST
    assert validation.check(api, req) == Errors.INVALID_REQUEST


@pytest.mark.parametrize("api, group_id", BAD_GROUP_IDS)
def test_bad_group_id_is_invalid_group_id(api, group_id):
    req = dataclasses.replace(VALID[api], group_id=group_id)
    assert validation.check(api, req) == Errors.INVALID_GROUP_ID


@pytest.mark.parametrize("api", ["describe_groups", "delete_groups"])
@pytest.mark.parametrize("group_ids", [["g", None], [3]])
def test_bad_group_id_in_a_list_is_invalid_group_id(api, group_ids):
    assert validation.check(api, dataclasses.replace(VALID[api], group_ids=group_ids)) == Errors.INVALID_GROUP_ID


@pytest.mark.parametrize("api", ["commit_offsets", "fetch_offsets"])
def test_empty_group_id_is_allowed_where_kafka_allows_it(api):
    assert validation.check(api, dataclasses.replace(VALID[api], group_id="")) is None


@pytest.mark.parametrize("api", ["describe_groups", "delete_groups"])
def test_empty_group_id_in_a_list_is_allowed(api):
    assert validation.check(api, dataclasses.replace(VALID[api], group_ids=["", "g"])) is None


def test_surrogate_group_id_is_invalid_request():
    assert validation.check("commit_offsets", OffsetCommitRequest(SURROGATE, {})) == Errors.INVALID_REQUEST


@pytest.mark.parametrize("api", sorted(VALID))
@pytest.mark.parametrize("wrong", [None, "request", 5])
def test_wrong_request_type_is_invalid_request(api, wrong):
    assert validation.check(api, wrong) == Errors.INVALID_REQUEST


@pytest.mark.parametrize("api", sorted(VALID))
def test_another_api_request_is_invalid_request(api):
    other = VALID["heartbeat"] if api != "heartbeat" else VALID["sync_group"]
    assert validation.check(api, other) == Errors.INVALID_REQUEST


def test_accepted_shapes():
    # Plain tuples work where a TopicPartition / OffsetAndMetadata is expected; so do boundary values.
    ok = OffsetCommitRequest(
        "g", {("t", 2**31 - 1): (2**63 - 1, "é", -1)}, generation_id=-(2**31), retention_time_ms=-1
    )
    assert validation.check("commit_offsets", ok) is None
    assert validation.check("fetch_offsets", OffsetFetchRequest("g", (("t", 0),))) is None
    assert validation.check("fetch_offsets", OffsetFetchRequest("g", None, True)) is None
    assert validation.check("leave_group", LeaveGroupRequest("g", [])) is None
    assert validation.check("sync_group", SyncGroupRequest("g", 1, "m", assignments={"m": bytearray()})) is None


# --- through the coordinator: answered with the error, nothing changes -----------------------


@pytest.mark.parametrize("api, field, value", BAD_FIELDS)
def test_coordinator_answers_bad_fields_and_changes_nothing(api, field, value):
    coord = seeded()
    before = snapshot(coord)
    response = getattr(coord, api)(dataclasses.replace(VALID[api], **{field: value})).result()
    assert _errors_in(response) <= {Errors.INVALID_REQUEST}
    if api in TOP_LEVEL_ERROR:
        assert response.error == Errors.INVALID_REQUEST
    assert snapshot(coord) == before


@pytest.mark.parametrize("api, group_id", BAD_GROUP_IDS)
def test_coordinator_answers_bad_group_ids_and_changes_nothing(api, group_id):
    coord = seeded()
    before = snapshot(coord)
    response = getattr(coord, api)(dataclasses.replace(VALID[api], group_id=group_id)).result()
    assert _errors_in(response) <= {Errors.INVALID_GROUP_ID}
    if api in TOP_LEVEL_ERROR:
        assert response.error == Errors.INVALID_GROUP_ID
    else:
        assert api == "commit_offsets" and response.errors == {TP: Errors.INVALID_GROUP_ID}
    assert snapshot(coord) == before


@pytest.mark.parametrize("api", sorted(VALID))
def test_coordinator_answers_wrong_request_types(api):
    coord = seeded()
    before = snapshot(coord)
    response = getattr(coord, api)("not a request").result()
    assert _errors_in(response) <= {Errors.INVALID_REQUEST}
    assert snapshot(coord) == before


def test_bad_partition_among_good_ones_writes_nothing():
    coord = seeded()
    before = snapshot(coord)
    req = OffsetCommitRequest("g", {TopicPartition("t", 1): OffsetAndMetadata(9), TopicPartition("t", -1): (1, "", -1)})
    response = coord.commit_offsets(req).result()
    assert set(response.errors.values()) == {Errors.INVALID_REQUEST}
    assert snapshot(coord) == before


def test_bad_delete_groups_deletes_nothing():
    coord = seeded()
    before = snapshot(coord)
    response = coord.delete_groups(DeleteGroupsRequest(["g", None])).result()  # type: ignore[list-item]
    assert response.results == {"g": Errors.INVALID_GROUP_ID}
    assert snapshot(coord) == before


def _errors_in(response) -> set[Errors]:
    """Every error code a response carries (top level, per partition, per member or per group)."""
    found: set[Errors] = set()
    for f in dataclasses.fields(response):
        value = getattr(response, f.name)
        if isinstance(value, Errors):
            found.add(value)
        elif isinstance(value, dict):
            found |= {v for v in value.values() if isinstance(v, Errors)}
        elif isinstance(value, list):
            found |= {getattr(x, "error", None) for x in value} - {None}
    return found


def test_size_limits_of_the_config_are_enforced():
    config = GroupConfig(max_group_id_bytes=8, max_metadata_bytes=len(META) + 1, max_assignment_bytes=4)
    assert validation.check("join_group", VALID["join_group"], config) is None
    long_id = dataclasses.replace(VALID["join_group"], group_id="é" * 5)  # 10 bytes of UTF-8
    assert validation.check("join_group", long_id, config) == Errors.INVALID_GROUP_ID
    assert (
        validation.check("describe_groups", DescribeGroupsRequest(["ok", "x" * 9]), config) == Errors.INVALID_GROUP_ID
    )
    fat = dataclasses.replace(VALID["join_group"], protocols=[("range", META), ("rr", b"yy")])
    assert validation.check("join_group", fat, config) == Errors.INVALID_REQUEST
    big = dataclasses.replace(VALID["sync_group"], assignments={"m": b"12345"})
    assert validation.check("sync_group", big, config) == Errors.INVALID_REQUEST


def test_a_rejected_oversized_join_changes_nothing():
    coord = GroupCoordinator(GroupConfig(max_metadata_bytes=4), ManualClock(), MemoryLog())
    req = JoinGroupRequest("g", 10000, protocols=[("range", b"12345")])
    assert coord.join_group(req).result().error == Errors.INVALID_REQUEST
    assert (
        coord.log.records == []
        and coord.describe_groups(DescribeGroupsRequest(["g"])).result().groups[0].group_state == "Dead"
    )


NAME_LIMIT = GroupConfig(max_name_bytes=8, max_protocols=2, max_partitions_per_request=2, max_items_per_request=2)
LONG = "é" * 5  # 10 bytes of UTF-8, 5 characters
TPS3 = [TopicPartition("t", p) for p in range(3)]


@pytest.mark.parametrize(
    "api, changes",
    [
        ("join_group", {"client_id": LONG}),
        ("join_group", {"client_host": LONG}),
        ("join_group", {"group_instance_id": LONG}),
        ("join_group", {"protocol_type": LONG}),
        ("join_group", {"reason": LONG}),
        ("join_group", {"protocols": [(LONG, META)]}),
        ("join_group", {"protocols": [("a", b""), ("b", b""), ("c", b"")]}),
        ("join_group", {"member_id": "m" * (8 + validation.MEMBER_ID_SUFFIX_BYTES + 1)}),
        ("sync_group", {"protocol_name": LONG}),
        ("sync_group", {"assignments": {"a": b"", "b": b"", "c": b""}}),
        ("sync_group", {"assignments": {"m" * 46: b""}}),
        ("heartbeat", {"group_instance_id": LONG}),
        ("leave_group", {"members": [MemberIdentity("m", reason=LONG)]}),
        ("leave_group", {"members": [MemberIdentity("a"), MemberIdentity("b"), MemberIdentity("c")]}),
        ("commit_offsets", {"offsets": {TopicPartition(LONG, 0): OffsetAndMetadata(1)}}),
        ("commit_offsets", {"offsets": {tp: OffsetAndMetadata(1) for tp in TPS3}}),
        ("fetch_offsets", {"partitions": TPS3}),
        ("fetch_offsets", {"partitions": [TopicPartition(LONG, 0)]}),
        ("delete_offsets", {"partitions": TPS3}),
        ("describe_groups", {"group_ids": ["a", "b", "c"]}),
        ("delete_groups", {"group_ids": ["a", "b", "c"]}),
    ],
)
def test_ids_names_and_item_counts_over_their_limits_are_invalid_requests(api, changes):
    assert validation.check(api, VALID[api], NAME_LIMIT) is None
    assert validation.check(api, dataclasses.replace(VALID[api], **changes), NAME_LIMIT) == Errors.INVALID_REQUEST


def test_a_member_id_generated_from_the_longest_client_id_is_accepted_back():
    coord = GroupCoordinator(GroupConfig(max_name_bytes=8, min_session_timeout_ms=10), ManualClock(), MemoryLog())
    first = coord.join_group(JoinGroupRequest("g", 10000, client_id="c" * 8, protocols=[("range", META)])).result()
    assert first.error == Errors.MEMBER_ID_REQUIRED and len(first.member_id) == 8 + validation.MEMBER_ID_SUFFIX_BYTES
    again = JoinGroupRequest("g", 10000, member_id=first.member_id, client_id="c" * 8, protocols=[("range", META)])
    assert validation.check("join_group", again, coord.config) is None


class _Epoch(int):
    """An int subclass: valid for the generic checks, outside the inline test's exact types."""


class _Str(str):
    pass


_OFFSET_KEYS = [TopicPartition("t", 0), TopicPartition("té", 3), TopicPartition(SURROGATE, 0), TopicPartition("t", -1),
                TopicPartition("t", BIG32), TopicPartition("t", True), TopicPartition("t", _Epoch(2)),
                TopicPartition(_Str("t"), 1), TopicPartition(None, 0), ("t", 0), ("t",), ("t", 0, 1), "t"]
_OFFSET_VALUES = [OffsetAndMetadata(1), OffsetAndMetadata(0, "é", 5), OffsetAndMetadata(-1, "m", -1),
                  OffsetAndMetadata(-2), OffsetAndMetadata(BIG64), OffsetAndMetadata(BIG64 - 1, "", BIG32 - 1),
                  OffsetAndMetadata(1, None), OffsetAndMetadata(1, SURROGATE), OffsetAndMetadata(1, "", BIG32),
                  OffsetAndMetadata(True), OffsetAndMetadata(1, "", _Epoch(3)), OffsetAndMetadata(1.0),
                  OffsetAndMetadata(1, _Str("m")), (1, "", -1), (1, ""), None]


@pytest.mark.parametrize("key", _OFFSET_KEYS, ids=repr)
def test_commit_offsets_are_judged_inline_exactly_as_the_generic_checks_judge_them(key):
    generic = validation.map_of(validation.TOPIC_PARTITION, validation.OFFSET_AND_METADATA)
    for value in _OFFSET_VALUES:
        offsets = {TP: OffsetAndMetadata(7), key: value}
        assert validation._offsets(offsets) == generic(offsets), (key, value)
    assert validation._offsets({TP: OffsetAndMetadata(7), TopicPartition("u", 2): OffsetAndMetadata(8, "x", 0)})
    assert not validation._offsets([(TP, OffsetAndMetadata(1))]) and not validation._offsets(None)


_HEARTBEAT_IDS = ["g", "", "é", SURROGATE, _Str("g"), "x" * 40, "x" * 41, "é" * 40, None, 7]
_GENERATIONS = [1, -1, 0, BIG32, -BIG32, BIG32 - 1, True, _Epoch(2), 1.0, None]


@pytest.mark.parametrize("config", [None, GroupConfig(), GroupConfig(max_group_id_bytes=40, max_name_bytes=3)],
                         ids=["no config", "default limits", "small limits"])
def test_heartbeats_are_judged_on_their_short_path_exactly_as_the_generic_checks_judge_them(config):
    """A plain heartbeat skips the generic checks; every other shape must still get their answer."""
    judged = 0
    for group_id in _HEARTBEAT_IDS:
        for member_id in _HEARTBEAT_IDS:
            for generation in _GENERATIONS:
                for instance_id in (None, "i", SURROGATE):
                    req = HeartbeatRequest(group_id, generation, member_id, instance_id)
                    generic = validation._validate("heartbeat", req)
                    if generic is None and config is not None:
                        generic = validation._limits_error("heartbeat", req, config)
                    assert validation.check("heartbeat", req, config) == generic, req
                    judged += validation.plain_heartbeat(req, config)
    assert judged > 0
