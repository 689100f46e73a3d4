"""One frozen dataclass per request and response, with Kafka's field names in snake_case."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Iterable, Mapping, Sequence

import msgpack

from .errors import Errors
from .values import OffsetAndMetadata, TopicPartition

# --- JoinGroup -------------------------------------------------------------------------

__all__ = [
    "DeleteGroupsRequest",
    "DeleteGroupsResponse",
    "DescribeGroupsRequest",
    "DescribeGroupsResponse",
    "DescribedGroup",
    "DescribedMember",
    "HeartbeatRequest",
    "HeartbeatResponse",
    "JoinGroupMember",
    "JoinGroupRequest",
    "JoinGroupResponse",
    "LeaveGroupRequest",
    "LeaveGroupResponse",
    "LeaveMemberResponse",
    "ListGroupsRequest",
    "ListGroupsResponse",
    "ListedGroup",
    "MemberIdentity",
    "OffsetCommitRequest",
    "OffsetCommitResponse",
    "OffsetDeleteRequest",
    "OffsetDeleteResponse",
    "OffsetFetchPartition",
    "OffsetFetchRequest",
    "OffsetFetchResponse",
    "SyncGroupRequest",
    "SyncGroupResponse",
]


@dataclass(frozen=True)
class JoinGroupRequest:
    """A member asks to join (or rejoin) a group, naming the protocols it supports."""

    group_id: str
    session_timeout_ms: int
    rebalance_timeout_ms: int = -1
    member_id: str = ""
    group_instance_id: str | None = None
    protocol_type: str = "consumer"
    protocols: Sequence[tuple[str, bytes]] = ()
    client_id: str = ""
    client_host: str = ""
    reason: str | None = None
    require_known_member_id: bool = True


@dataclass(frozen=True)
class JoinGroupMember:
    """A member as the leader sees it in a JoinGroup response."""

    member_id: str
    group_instance_id: str | None
    metadata: bytes


@dataclass(frozen=True)
class JoinGroupResponse:
    """The outcome of a join: the generation, the chosen protocol and (for the leader) the members."""

    error: Errors
    generation_id: int
    protocol_type: str | None
    protocol_name: str | None
    leader: str
    member_id: str
    members: list[JoinGroupMember] = field(default_factory=list)
    skip_assignment: bool = False
    throttle_time_ms: int = 0  # how long the client waits before its next request (a quota applies)


# --- SyncGroup -------------------------------------------------------------------------


@dataclass(frozen=True)
class SyncGroupRequest:
    """A member asks for its assignment; the leader's request carries everyone's."""

    group_id: str
    generation_id: int
    member_id: str
    group_instance_id: str | None = None
    protocol_type: str | None = None
    protocol_name: str | None = None
    assignments: Mapping[str, bytes] = field(default_factory=dict)


@dataclass(frozen=True)
class SyncGroupResponse:
    """The member's assignment for the current generation."""

    error: Errors
    protocol_type: str | None
    protocol_name: str | None
    assignment: bytes
    throttle_time_ms: int = 0  # how long the client waits before its next request (a quota applies)


# --- Heartbeat -------------------------------------------------------------------------


@dataclass(frozen=True)
class HeartbeatRequest:
    """A member tells the coordinator it is alive."""

    group_id: str
    generation_id: int
    member_id: str
    group_instance_id: str | None = None

    def __reduce__(self) -> tuple:
        # Pickled as its fields: the most frequent request, sent by the hundreds in one batch. A dataclass
        # unpickles through __new__ and a state dict, a third slower than this (see _heartbeat_from_wire).
        return _heartbeat_from_wire, (self.group_id, self.generation_id, self.member_id, self.group_instance_id)


def _heartbeat_from_wire(group_id: str, generation_id: int, member_id: str,
                         group_instance_id: str | None) -> HeartbeatRequest:
    """Rebuild a HeartbeatRequest pickled by its `__reduce__`, its dict filled directly (a frozen dataclass's
    __init__ costs a checked setattr per field)."""
    req = object.__new__(HeartbeatRequest)
    d = req.__dict__
    d["group_id"] = group_id
    d["generation_id"] = generation_id
    d["member_id"] = member_id
    d["group_instance_id"] = group_instance_id
    return req


@dataclass(frozen=True)
class HeartbeatResponse:
    """NONE, or the reason the member must rejoin; `throttle_time_ms` > 0 asks the member to wait that long first."""

    error: Errors
    throttle_time_ms: int = 0


# --- LeaveGroup ------------------------------------------------------------------------


@dataclass(frozen=True)
class MemberIdentity:
    """One member to remove: by member id, by static instance id, or both."""

    member_id: str = ""
    group_instance_id: str | None = None
    reason: str | None = None


@dataclass(frozen=True)
class LeaveGroupRequest:
    """Remove one or more members from a group (KIP-345 batch leave)."""

    group_id: str
    members: Sequence[MemberIdentity]


@dataclass(frozen=True)
class LeaveMemberResponse:
    """The outcome for one member of a LeaveGroup."""

    member_id: str
    group_instance_id: str | None
    error: Errors


@dataclass(frozen=True)
class LeaveGroupResponse:
    """A top-level error and the per-member outcomes."""

    error: Errors
    members: list[LeaveMemberResponse] = field(default_factory=list)
    throttle_time_ms: int = 0  # how long the client waits before its next request (a quota applies)


# --- OffsetCommit / OffsetFetch ---------------------------------------------------------


@dataclass(frozen=True)
class OffsetCommitRequest:
    """Commit offsets for a group, as a member of a generation or (generation -1) as a simple consumer."""

    group_id: str
    offsets: Mapping[TopicPartition, OffsetAndMetadata]
    generation_id: int = -1
    member_id: str = ""
    group_instance_id: str | None = None
    retention_time_ms: int = -1
    # The OffsetCommit version a Kafka client sent (None: the Python API). Kafka refuses versions below 9
    # from a member of a consumer-protocol (KIP-848) group with UNSUPPORTED_VERSION.
    api_version: int | None = None

    def __reduce__(self) -> tuple:
        # Pickled as flat tuples: a commit carries many NamedTuples, and pickling each one costs
        # more than the shard's whole work on it (this is what Ray sends to a partition actor).
        offsets = self.offsets
        rest = (self.generation_id, self.member_id, self.group_instance_id, self.retention_time_ms, self.api_version)
        tp, om = TopicPartition, OffsetAndMetadata
        if type(offsets) is not dict or not all(type(k) is tp and type(v) is om for k, v in offsets.items()):
            return OffsetCommitRequest, (self.group_id, offsets, *rest)
        flat = [(k[0], k[1], v[0], v[1], v[2]) for k, v in offsets.items()]
        return _commit_request_from_wire, (flat, self.group_id, *rest)


@dataclass(frozen=True)
class OffsetCommitResponse:
    """An error per partition; `throttle_time_ms` > 0 asks the client to wait that long before its next request."""

    errors: dict[TopicPartition, Errors]
    throttle_time_ms: int = 0

    def __reduce__(self) -> tuple:
        errors = self.errors
        if type(errors) is not dict or not all(type(e) is Errors for e in errors.values()):
            return OffsetCommitResponse, (errors, self.throttle_time_ms)
        flat = [(tp[0], tp[1], e.value) for tp, e in errors.items()]
        return _commit_response_from_wire, (flat, self.throttle_time_ms)


_ERRORS_BY_CODE = {e.value: e for e in Errors}
_new_tuple = tuple.__new__


def _commit_request_from_wire(
    flat: list, group_id: str, generation_id: int, member_id: str, instance_id: str | None, retention: int,
    api_version: int | None = None,
) -> OffsetCommitRequest:
    """Rebuild an OffsetCommitRequest pickled by its `__reduce__`."""
    tp, om = TopicPartition, OffsetAndMetadata
    offsets = {_new_tuple(tp, (t, p)): _new_tuple(om, (o, m, e)) for t, p, o, m, e in flat}
    return OffsetCommitRequest(group_id, offsets, generation_id, member_id, instance_id, retention, api_version)


def _commit_response_from_wire(items: list[tuple[str, int, int]], throttle_time_ms: int = 0) -> OffsetCommitResponse:
    """Rebuild an OffsetCommitResponse pickled by its `__reduce__`."""
    errors = {_new_tuple(TopicPartition, (t, p)): _ERRORS_BY_CODE[e] for t, p, e in items}
    return OffsetCommitResponse(errors, throttle_time_ms)


@dataclass(frozen=True)
class OffsetFetchRequest:
    """Read committed offsets of some partitions, or all of them (partitions=None)."""

    group_id: str
    partitions: Sequence[TopicPartition] | None = None
    require_stable: bool = False
    # A consumer-protocol member fetching as a member (OffsetFetch v9+, KIP-848): its id and epoch are checked.
    member_id: str | None = None
    member_epoch: int = -1


@dataclass(frozen=True)
class OffsetFetchPartition:
    """A committed offset; offset -1 with error NONE means nothing is committed."""

    offset: int
    metadata: str
    leader_epoch: int
    error: Errors


@dataclass(frozen=True)
class OffsetFetchResponse:
    """A group-level error and the offsets per partition."""

    error: Errors
    offsets: dict[TopicPartition, OffsetFetchPartition]
    throttle_time_ms: int = 0  # how long the client waits before its next request (a quota applies)


# --- ListGroups / DescribeGroups / DeleteGroups / OffsetDelete --------------------------


@dataclass(frozen=True)
class ListGroupsRequest:
    """List groups, optionally only those in some states or of some types."""

    states_filter: Sequence[str] = ()
    types_filter: Sequence[str] = ()


@dataclass(frozen=True)
class ListedGroup:
    """One group in a ListGroups response."""

    group_id: str
    protocol_type: str
    group_state: str
    group_type: str = "classic"


@dataclass(frozen=True)
class ListGroupsResponse:
    """The groups this coordinator owns."""

    error: Errors
    groups: list[ListedGroup]
    throttle_time_ms: int = 0  # how long the client waits before its next request (a quota applies)

    def __reduce__(self) -> tuple:
        # Pickled as flat tuples: a listing of 100,000 groups would otherwise pickle 100,000 dataclasses.
        flat = listed_rows(self.groups)
        if flat is None or type(self.error) is not Errors:
            return ListGroupsResponse, (self.error, self.groups, self.throttle_time_ms)
        return list_response_from_rows, (self.error.value, flat, self.throttle_time_ms)


ListedRow = tuple[str, str, str, str]  # a ListedGroup's fields, in order


def listed_rows(groups: object) -> list[ListedRow] | None:
    """ListGroups entries as flat tuples (how listings cross Ray), or None if `groups` is not a list of them."""
    if type(groups) is not list or not all(type(g) is ListedGroup for g in groups):
        return None
    return [(g.group_id, g.protocol_type, g.group_state, g.group_type) for g in groups]


def list_response_from_rows(error: int, flat: list[ListedRow], throttle_time_ms: int = 0) -> ListGroupsResponse:
    """Rebuild a ListGroupsResponse pickled by its `__reduce__` (its ListedGroups are built once, here)."""
    new = object.__new__
    groups: list[ListedGroup] = []
    append = groups.append
    for group_id, protocol_type, group_state, group_type in flat:
        g = new(ListedGroup)  # a frozen dataclass's own __init__ costs 4 object.__setattr__ calls per group
        d = g.__dict__
        d["group_id"] = group_id
        d["protocol_type"] = protocol_type
        d["group_state"] = group_state
        d["group_type"] = group_type
        append(g)
    return ListGroupsResponse(Errors(error), groups, throttle_time_ms)


@dataclass(frozen=True)
class DescribeGroupsRequest:
    """Describe some groups by id."""

    group_ids: Sequence[str]


@dataclass(frozen=True)
class DescribedMember:
    """A member as DescribeGroups shows it."""

    member_id: str
    group_instance_id: str | None
    client_id: str
    client_host: str
    member_metadata: bytes
    member_assignment: bytes


@dataclass(frozen=True)
class DescribedGroup:
    """A group as DescribeGroups shows it; an unknown group is NONE with state "Dead"."""

    error: Errors
    group_id: str
    group_state: str
    protocol_type: str
    protocol_data: str
    members: list[DescribedMember]


@dataclass(frozen=True)
class DescribeGroupsResponse:
    """One description per requested group, in request order."""

    groups: list[DescribedGroup]
    throttle_time_ms: int = 0  # how long the client waits before its next request (a quota applies)

    def __reduce__(self) -> tuple:
        # Pickled as flat tuples, as listings are: describing 100,000 groups is one response.
        flat = described_rows(self.groups)
        if flat is None:
            return DescribeGroupsResponse, (self.groups, self.throttle_time_ms)
        return describe_response_from_rows, (flat, self.throttle_time_ms)


MemberRow = tuple[str, "str | None", str, str, bytes, bytes]  # a DescribedMember's fields, in order
DescribedRow = tuple[int, str, str, str, str, Sequence[MemberRow]]  # a DescribedGroup's, with its error's code


def described_rows(groups: object) -> list[DescribedRow] | None:
    """DescribeGroups entries as flat tuples (how descriptions cross Ray), or None if `groups` is not a list of
    DescribedGroups whose members are lists of DescribedMembers."""
    if type(groups) is not list:
        return None
    rows: list[DescribedRow] = []
    for g in groups:
        if type(g) is not DescribedGroup or type(g.members) is not list or type(g.error) is not Errors:
            return None
        members = []
        for m in g.members:
            if type(m) is not DescribedMember:
                return None
            members.append((m.member_id, m.group_instance_id, m.client_id, m.client_host, m.member_metadata,
                            m.member_assignment))
        rows.append((g.error.value, g.group_id, g.group_state, g.protocol_type, g.protocol_data, members))
    return rows


def pack_described_rows(rows: Sequence[DescribedRow]) -> bytes:
    """DescribeGroups rows as msgpack bytes: how a partition's big answer crosses Ray (packed in C with no
    pickle memo entry per string; Ray then carries one bytes object)."""
    return msgpack.packb(rows, use_bin_type=True, unicode_errors="surrogatepass")


def unpack_described_rows(packed: bytes) -> Sequence[DescribedRow]:
    """The rows `pack_described_rows` packed (a row's members as a tuple instead of a list)."""
    return msgpack.unpackb(packed, raw=False, use_list=False, unicode_errors="surrogatepass")


def described_rows_in_order(answers: Iterable[bytes], group_ids: Iterable[str]) -> list[DescribedRow]:
    """Partitions' packed DescribeGroups rows merged into the order of `group_ids` (each id once)."""
    by_id = {row[1]: row for packed in answers for row in unpack_described_rows(packed)}
    return [by_id[g] for g in group_ids if g in by_id]


def descriptions_in(packed: bytes) -> dict[str, DescribedGroup]:
    """One partition's packed DescribeGroups rows as descriptions by group id: how an admin client builds each
    partition's answer as it arrives, then puts the merged ones in request order with in_request_order."""
    return {row[1]: _description(row) for row in unpack_described_rows(packed)}


def in_request_order(found: Mapping[str, DescribedGroup], group_ids: Iterable[str]) -> dict[str, DescribedGroup]:
    """The descriptions of `group_ids` that were found, in request order, each id once."""
    return {g: found[g] for g in group_ids if g in found}


def describe_response_from_rows(flat: list[DescribedRow], throttle_time_ms: int = 0) -> DescribeGroupsResponse:
    """Rebuild a DescribeGroupsResponse pickled by its `__reduce__`."""
    return DescribeGroupsResponse([_description(row) for row in flat], throttle_time_ms)


def _description(row: DescribedRow) -> DescribedGroup:
    error, group_id, group_state, protocol_type, protocol_data, member_rows = row
    return described_group(_ERRORS[error], group_id, group_state, protocol_type, protocol_data,
                           [described_member(*m) for m in member_rows])


_ERRORS = {e.value: e for e in Errors}  # an error code in a row -> its Errors


# Describing 100,000 groups builds a DescribedGroup and DescribedMembers for each: these two skip the frozen
# dataclass's __init__ (a checked setattr per field: a sixth of the shard's cost of a description) and fill the
# instance's dict directly, as list_response_from_rows does. They take the fields in order, unchecked.


def described_member(member_id: str, group_instance_id: str | None, client_id: str, client_host: str,
                     member_metadata: bytes, member_assignment: bytes) -> DescribedMember:
    """A DescribedMember, built as fast as Python builds an object (see above)."""
    m = object.__new__(DescribedMember)
    d = m.__dict__
    d["member_id"] = member_id
    d["group_instance_id"] = group_instance_id
    d["client_id"] = client_id
    d["client_host"] = client_host
    d["member_metadata"] = member_metadata
    d["member_assignment"] = member_assignment
    return m


def described_group(error: Errors, group_id: str, group_state: str, protocol_type: str, protocol_data: str,
                    members: list[DescribedMember]) -> DescribedGroup:
    """A DescribedGroup, built as fast as Python builds an object (see above)."""
    g = object.__new__(DescribedGroup)
    d = g.__dict__
    d["error"] = error
    d["group_id"] = group_id
    d["group_state"] = group_state
    d["protocol_type"] = protocol_type
    d["protocol_data"] = protocol_data
    d["members"] = members
    return g


@dataclass(frozen=True)
class DeleteGroupsRequest:
    """Delete Empty groups with their offsets."""

    group_ids: Sequence[str]


@dataclass(frozen=True)
class DeleteGroupsResponse:
    """An error per group id."""

    results: dict[str, Errors]
    throttle_time_ms: int = 0  # how long the client waits before its next request (a quota applies)


@dataclass(frozen=True)
class OffsetDeleteRequest:
    """Delete the committed offsets of some partitions of a group (KIP-496)."""

    group_id: str
    partitions: Sequence[TopicPartition]


@dataclass(frozen=True)
class OffsetDeleteResponse:
    """A top-level error and an error per partition."""

    error: Errors
    errors: dict[TopicPartition, Errors]
    throttle_time_ms: int = 0  # how long the client waits before its next request (a quota applies)


# --- the consumer group protocol (KIP-848) ------------------------------------------------

from .consumer.messages import *  # noqa: E402, F403  (re-exported: every request and response lives here)
from .consumer.messages import __all__ as _consumer_all  # noqa: E402

__all__ += _consumer_all
