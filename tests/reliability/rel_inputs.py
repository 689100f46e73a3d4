"""Malformed and adversarial requests (hypothesis strategies) and the checks every answer must pass.

Shared by the pure-shard, the Ray and the CLI bad-input tests. Request fields are drawn from
plausible values (many aimed at real groups and members, through placeholders such as "@m0"
that a test resolves to real member ids) with a few fields replaced by junk: wrong types, huge
strings and blobs, lone surrogates, out-of-range numbers, other request objects.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Mapping
from dataclasses import dataclass
from types import SimpleNamespace
from typing import Any

from hypothesis import strategies as st

from groupcoord.protocol import (
    DeleteGroupsRequest,
    DeleteGroupsResponse,
    DescribeGroupsRequest,
    DescribeGroupsResponse,
    Errors,
    HeartbeatRequest,
    HeartbeatResponse,
    JoinGroupRequest,
    JoinGroupResponse,
    LeaveGroupRequest,
    LeaveGroupResponse,
    ListGroupsRequest,
    ListGroupsResponse,
    MemberIdentity,
    OffsetAndMetadata,
    OffsetCommitRequest,
    OffsetCommitResponse,
    OffsetDeleteRequest,
    OffsetDeleteResponse,
    OffsetFetchRequest,
    OffsetFetchResponse,
    SyncGroupRequest,
    SyncGroupResponse,
    TopicPartition,
)
from groupcoord.protocol.assignors.consumer_protocol import (
    Assignment,
    Subscription,
    encode_assignment,
    encode_subscription,
)

HUGE_STR = "g" * (1 << 20)
HUGE_BYTES = b"\xfe" * (1 << 20)
# Drawn as short placeholders (so that failures print readably) and resolved by `build`.
HUGE_PLACEHOLDERS = {"@huge-str": HUGE_STR, "@huge-bytes": HUGE_BYTES}
SUBSCRIPTION = encode_subscription(Subscription(["t"]))
ASSIGNMENT = encode_assignment(Assignment([TopicPartition("t", 0)]))

# Placeholders a test replaces with the real member ids of the groups it built.
MEMBER_PLACEHOLDERS = ("@m0", "@m1", "@static")
GROUP_NAMES = ("stable", "empty", "opaque")

SPECIAL_STRINGS = (
    "",
    " ",
    "\x00",
    "g\ud800",
    "\udfff",
    "\ud83d\ude00",
    "😀",
    "名前",
    "g" * 300,
    "-",
    "__consumer_offsets",
    "consumer",
    "range",
)
EDGE_INTS = (
    0,
    -1,
    -2,
    1,
    2**31 - 1,
    2**31,
    -(2**31),
    -(2**31) - 1,
    2**63 - 1,
    2**63,
    -(2**63),
    -(2**63) - 1,
    2**64,
    10**30,
)

texts = st.one_of(
    st.text(max_size=20),
    st.text(st.characters(categories=["Cs"]), min_size=1, max_size=3),
    st.sampled_from(SPECIAL_STRINGS),
    st.just("@huge-str"),
)
ints = st.one_of(st.integers(-(2**31), 2**31 - 1), st.sampled_from(EDGE_INTS), st.integers(-(2**80), 2**80))
blobs = st.one_of(st.binary(max_size=40), st.just("@huge-bytes"), st.just(SUBSCRIPTION), st.just(ASSIGNMENT))

OTHER_OBJECTS = (
    object(),
    TopicPartition("t", 0),
    OffsetAndMetadata(1),
    MemberIdentity("m"),
    HeartbeatRequest("stable", 1, "m"),
    ListGroupsRequest(),
    Errors.NONE,
    Ellipsis,
    SimpleNamespace(group_id="stable"),
    frozenset({"x"}),
    range(3),
)

junk = st.one_of(
    st.none(),
    st.booleans(),
    ints,
    st.floats(allow_nan=True, allow_infinity=True),
    texts,
    blobs,
    st.builds(bytearray, st.binary(max_size=8)),
    st.lists(st.one_of(st.integers(), st.text(max_size=3)), max_size=3),
    st.tuples(st.text(max_size=3), st.integers()),
    st.dictionaries(st.text(max_size=3), st.integers(), max_size=2),
    st.sampled_from(OTHER_OBJECTS),
)

group_ids = st.one_of(st.sampled_from(GROUP_NAMES), texts)
member_ids = st.one_of(st.sampled_from(MEMBER_PLACEHOLDERS), texts)
instance_ids = st.one_of(st.none(), st.sampled_from(("inst-a", "inst-b")), texts)
timeouts = st.one_of(st.sampled_from((10, 100, 5000, 10000, 30000, 600000, -1)), ints)
topics = st.one_of(st.sampled_from(("t", "u")), texts)
topic_partitions = st.one_of(
    st.builds(TopicPartition, topics, st.one_of(st.integers(0, 3), ints)),
    st.tuples(topics, st.integers(0, 3)),
)
offsets_and_metadata = st.one_of(
    st.builds(OffsetAndMetadata, st.one_of(st.integers(-1, 1000), ints), st.one_of(st.just(""), texts), ints),
    st.builds(OffsetAndMetadata, st.integers(0, 1000)),
)
protocols = st.lists(
    st.tuples(st.one_of(st.sampled_from(("range", "roundrobin")), texts), st.one_of(st.just(SUBSCRIPTION), blobs)),
    max_size=3,
)
assignments = st.dictionaries(member_ids, st.one_of(st.just(ASSIGNMENT), blobs), max_size=4)
member_identities = st.builds(
    MemberIdentity, st.one_of(st.just(""), member_ids), instance_ids, st.one_of(st.none(), texts)
)


@dataclass(frozen=True)
class HeartbeatRequestPlus(HeartbeatRequest):
    """A heartbeat with a field the coordinator does not know (as a newer client might send)."""

    extra: Any = None


REQUESTS: dict[str, tuple[type, dict[str, st.SearchStrategy]]] = {
    "join_group": (
        JoinGroupRequest,
        {
            "group_id": group_ids,
            "session_timeout_ms": timeouts,
            "rebalance_timeout_ms": timeouts,
            "member_id": st.one_of(st.just(""), member_ids),
            "group_instance_id": instance_ids,
            "protocol_type": st.one_of(st.sampled_from(("consumer", "connect", "")), texts),
            "protocols": protocols,
            "client_id": texts,
            "client_host": texts,
            "reason": st.one_of(st.none(), texts),
            "require_known_member_id": st.booleans(),
        },
    ),
    "sync_group": (
        SyncGroupRequest,
        {
            "group_id": group_ids,
            "generation_id": st.one_of(st.integers(-1, 3), ints),
            "member_id": member_ids,
            "group_instance_id": instance_ids,
            "protocol_type": st.one_of(st.none(), st.just("consumer"), texts),
            "protocol_name": st.one_of(st.none(), st.just("range"), texts),
            "assignments": assignments,
        },
    ),
    "heartbeat": (
        HeartbeatRequest,
        {
            "group_id": group_ids,
            "generation_id": st.one_of(st.integers(-1, 3), ints),
            "member_id": member_ids,
            "group_instance_id": instance_ids,
        },
    ),
    "leave_group": (
        LeaveGroupRequest,
        {"group_id": group_ids, "members": st.lists(member_identities, max_size=4)},
    ),
    "commit_offsets": (
        OffsetCommitRequest,
        {
            "group_id": group_ids,
            "offsets": st.dictionaries(topic_partitions, offsets_and_metadata, max_size=4),
            "generation_id": st.one_of(st.integers(-1, 3), ints),
            "member_id": st.one_of(st.just(""), member_ids),
            "group_instance_id": instance_ids,
            "retention_time_ms": st.one_of(st.just(-1), ints),
        },
    ),
    "fetch_offsets": (
        OffsetFetchRequest,
        {
            "group_id": group_ids,
            "partitions": st.one_of(st.none(), st.lists(topic_partitions, max_size=4)),
            "require_stable": st.booleans(),
        },
    ),
    "list_groups": (
        ListGroupsRequest,
        {
            "states_filter": st.lists(
                st.one_of(st.sampled_from(("Stable", "Empty", "stable", "Dead")), texts), max_size=3
            ),
            "types_filter": st.lists(st.one_of(st.sampled_from(("classic", "consumer")), texts), max_size=2),
        },
    ),
    "describe_groups": (DescribeGroupsRequest, {"group_ids": st.lists(group_ids, max_size=4)}),
    "delete_groups": (DeleteGroupsRequest, {"group_ids": st.lists(group_ids, max_size=4)}),
    "delete_offsets": (
        OffsetDeleteRequest,
        {"group_id": group_ids, "partitions": st.lists(topic_partitions, max_size=4)},
    ),
}

APIS = tuple(REQUESTS)

RESPONSE_TYPES: dict[str, type] = {
    "join_group": JoinGroupResponse,
    "sync_group": SyncGroupResponse,
    "heartbeat": HeartbeatResponse,
    "leave_group": LeaveGroupResponse,
    "commit_offsets": OffsetCommitResponse,
    "fetch_offsets": OffsetFetchResponse,
    "list_groups": ListGroupsResponse,
    "describe_groups": DescribeGroupsResponse,
    "delete_groups": DeleteGroupsResponse,
    "delete_offsets": OffsetDeleteResponse,
}


@dataclass
class Drawn:
    """A drawn request before placeholders are resolved: its API, its shape and its fields."""

    api: str
    shape: str  # "request", "namespace" (same fields, wrong class), "dict", "plus" (subclass), "junk"
    fields: dict[str, Any]
    junk: Any = None
    bad_fields: tuple[str, ...] = ()


@st.composite
def drawn_requests(draw: st.DrawFn, api: str, max_bad_fields: int = 2) -> Drawn:
    """A request for `api` with up to `max_bad_fields` junk fields, or a wrong object in its place."""
    strategies = REQUESTS[api][1]
    fields = {name: draw(s) for name, s in strategies.items()}
    bad = draw(st.lists(st.sampled_from(sorted(strategies)), max_size=max_bad_fields, unique=True))
    for name in bad:
        fields[name] = draw(junk)
    shapes = ("request",) * 6 + ("namespace", "dict", "junk") + (("plus",) if api == "heartbeat" else ())
    shape = draw(st.sampled_from(shapes))
    # A junk object is anything but the API's own request class (a HeartbeatRequest is no junk to heartbeat).
    other = draw(junk.filter(lambda v: not isinstance(v, REQUESTS[api][0]))) if shape == "junk" else None
    return Drawn(api, shape, fields, other, tuple(bad))


def _resolve(value: Any, ids: Mapping[str, Any]) -> Any:
    if isinstance(value, str):
        return ids.get(value, value)
    if isinstance(value, MemberIdentity):
        return MemberIdentity(*(_resolve(v, ids) for v in dataclasses.astuple(value)))
    if isinstance(value, dict):
        return {_resolve(k, ids): _resolve(v, ids) for k, v in value.items()}
    if isinstance(value, list):
        return [_resolve(v, ids) for v in value]
    if type(value) is tuple:
        return tuple(_resolve(v, ids) for v in value)
    if isinstance(value, tuple) and hasattr(value, "_fields"):
        return type(value)(*(_resolve(v, ids) for v in value))
    return value


def build(drawn: Drawn, ids: Mapping[str, str]) -> Any:
    """The request object of `drawn`, with member-id placeholders replaced by `ids`."""
    cls = REQUESTS[drawn.api][0]
    ids = {**HUGE_PLACEHOLDERS, **ids}
    fields = {k: _resolve(v, ids) for k, v in drawn.fields.items()}
    if drawn.shape == "namespace":
        return SimpleNamespace(**fields, unknown_field=1)
    if drawn.shape == "dict":
        return fields
    if drawn.shape == "plus":
        return HeartbeatRequestPlus(**fields, extra={"x": 1})
    if drawn.shape == "junk":
        return _resolve(drawn.junk, ids)
    return cls(**fields)


def error_codes(resp: Any) -> list[Any]:
    """Every error code a response carries (top level, per partition, per member, per group)."""
    codes: list[Any] = []
    if hasattr(resp, "error"):
        codes.append(resp.error)
    for attr in ("errors", "results"):
        if isinstance(getattr(resp, attr, None), dict):
            codes.extend(getattr(resp, attr).values())
    if isinstance(resp, OffsetFetchResponse):
        codes.extend(p.error for p in resp.offsets.values())
    if isinstance(resp, LeaveGroupResponse):
        codes.extend(m.error for m in resp.members)
    if isinstance(resp, DescribeGroupsResponse):
        codes.extend(g.error for g in resp.groups)
    return codes


def check_response(api: str, resp: Any) -> list[Errors]:
    """Assert `resp` is the response type of `api` and all its codes are Errors; return the codes."""
    expected = RESPONSE_TYPES[api]
    assert type(resp) is expected, f"{api} answered {type(resp).__name__}, not {expected.__name__}: {resp!r:.300}"
    codes = error_codes(resp)
    bad = [c for c in codes if not isinstance(c, Errors)]
    assert not bad, f"{api} answered codes that are not Errors: {bad!r:.200}"
    if dataclasses.is_dataclass(resp) and api == "join_group":
        assert isinstance(resp.member_id, str)
    return codes


def is_rejection(api: str, resp: Any) -> bool:
    """Whether `resp` refuses the whole request, so that nothing may have changed."""
    if api == "join_group":
        return resp.error not in (Errors.NONE, Errors.MEMBER_ID_REQUIRED, Errors.GROUP_MAX_SIZE_REACHED,
                                  Errors.REBALANCE_IN_PROGRESS)
    if api in ("sync_group", "heartbeat", "fetch_offsets", "list_groups"):
        return resp.error != Errors.NONE
    if api == "leave_group":
        return resp.error != Errors.NONE or (bool(resp.members) and all(m.error != Errors.NONE for m in resp.members))
    if api == "commit_offsets":
        return bool(resp.errors) and all(e != Errors.NONE for e in resp.errors.values())
    if api == "delete_groups":
        return all(e != Errors.NONE for e in resp.results.values())
    if api == "delete_offsets":
        return resp.error != Errors.NONE or (bool(resp.errors) and all(e != Errors.NONE for e in resp.errors.values()))
    return False


READ_ONLY_APIS = frozenset({"fetch_offsets", "list_groups", "describe_groups"})
VALIDATION_ERRORS = frozenset({Errors.INVALID_REQUEST, Errors.INVALID_GROUP_ID})
