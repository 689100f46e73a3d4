"""Request validation: type and range checks that run before a request touches any state.

Each check returns the Errors code to answer with, or None when the request is well formed, so
bad input never escapes from the shard as an exception and never changes anything. The rules are
table-driven: a spec per request type names its class, how its group id is checked, and one
predicate per field.

* not the expected request class, or a field of the wrong type or out of range -> INVALID_REQUEST
  (ints must be real ints, not bools, and fit Kafka's int32/int64; strings must be encodable as
  UTF-8 so that they can be written to the log);
* a group id that is None or not a str -> INVALID_GROUP_ID; an empty one too for JoinGroup,
  SyncGroup, Heartbeat, LeaveGroup and OffsetDelete (OffsetCommit, OffsetFetch, DescribeGroups
  and DeleteGroups accept "", as Kafka does for backward compatibility).
"""

from __future__ import annotations

import logging
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any, Callable

from .apis import Api
from .consumer.messages import ConsumerGroupDescribeRequest, ConsumerGroupHeartbeatRequest
from .errors import Errors
from .messages import (
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
from .values import OffsetAndMetadata, TopicPartition

log = logging.getLogger(__name__)

INT32_MIN, INT32_MAX = -(2**31), 2**31 - 1
INT64_MIN, INT64_MAX = -(2**63), 2**63 - 1

Check = Callable[[Any], bool]

# --- field predicates ------------------------------------------------------------------------


def _is_int(v: Any, lo: int, hi: int) -> bool:
    return isinstance(v, int) and not isinstance(v, bool) and lo <= v <= hi


def int_in(lo: int, hi: int) -> Check:
    """An int (not a bool) within [lo, hi]."""
    return lambda v: _is_int(v, lo, hi)


def is_str(v: Any) -> bool:
    """A str that can be written as UTF-8 (no lone surrogates)."""
    if not isinstance(v, str):
        return False
    if v.isascii():
        return True
    try:
        v.encode("utf-8")
    except UnicodeEncodeError:
        return False
    return True


def is_opt_str(v: Any) -> bool:
    """None or a valid str."""
    return v is None or is_str(v)


def is_bytes(v: Any) -> bool:
    """bytes or bytearray."""
    return isinstance(v, (bytes, bytearray))


def is_bool(v: Any) -> bool:
    """A real bool."""
    return isinstance(v, bool)


def _is_seq(v: Any) -> bool:
    return isinstance(v, Sequence) and not isinstance(v, (str, bytes, bytearray, memoryview))


def seq_of(item: Check) -> Check:
    """A list/tuple-like sequence (not a str or bytes) whose items all pass `item`."""
    return lambda v: _is_seq(v) and all(item(x) for x in v)


def map_of(key: Check, value: Check) -> Check:
    """A mapping whose keys and values pass `key` and `value`."""
    return lambda v: isinstance(v, Mapping) and all(key(k) and value(x) for k, x in v.items())


def tuple_of(*items: Check) -> Check:
    """A tuple (e.g. a NamedTuple) of exactly these items."""
    return lambda v: isinstance(v, tuple) and len(v) == len(items) and all(c(x) for c, x in zip(items, v, strict=True))


def fields(cls: type, **checks: Check) -> Check:
    """An instance of `cls` whose named attributes pass their checks."""
    return lambda v: isinstance(v, cls) and all(c(getattr(v, f, None)) for f, c in checks.items())


INT32 = int_in(INT32_MIN, INT32_MAX)
INT64 = int_in(INT64_MIN, INT64_MAX)
PARTITION = int_in(0, INT32_MAX)
OFFSET = int_in(-1, INT64_MAX)
LEADER_EPOCH = int_in(-1, INT32_MAX)
RETENTION_MS = int_in(-1, INT64_MAX)
TOPIC_PARTITION = tuple_of(is_str, PARTITION)
OFFSET_AND_METADATA = tuple_of(OFFSET, is_str, LEADER_EPOCH)
PROTOCOL = tuple_of(is_str, is_bytes)
MEMBER_IDENTITY = fields(MemberIdentity, member_id=is_str, group_instance_id=is_opt_str, reason=is_opt_str)


def _offsets(v: Any) -> bool:
    """OffsetCommit's offsets: a mapping of TopicPartition to OffsetAndMetadata. Exact types with ASCII strings
    (the usual commit) are checked inline, without a call per field; anything else by the generic checks,
    which accept everything the inline test does."""
    if not isinstance(v, Mapping):
        return False
    for tp, om in v.items():
        if type(tp) is TopicPartition and type(om) is OffsetAndMetadata:
            topic, partition = tp
            offset, metadata, epoch = om
            if (type(topic) is str and type(metadata) is str and topic.isascii() and metadata.isascii()
                    and type(partition) is int and 0 <= partition <= INT32_MAX
                    and type(offset) is int and -1 <= offset <= INT64_MAX
                    and type(epoch) is int and -1 <= epoch <= INT32_MAX):
                continue
        if not (TOPIC_PARTITION(tp) and OFFSET_AND_METADATA(om)):
            return False
    return True


# --- group ids -------------------------------------------------------------------------------

NO_GROUP_ID, GROUP_ID, NON_EMPTY_GROUP_ID, GROUP_IDS = "none", "any", "non-empty", "list"


def _group_id_error(group_id: Any, allow_empty: bool) -> Errors | None:
    if not isinstance(group_id, str) or (not allow_empty and group_id == ""):
        return Errors.INVALID_GROUP_ID
    return None if is_str(group_id) else Errors.INVALID_REQUEST


# --- specs -----------------------------------------------------------------------------------


@dataclass(frozen=True)
class RequestSpec:
    """How one request type is validated: its class, its group-id rule and its field checks."""

    request_type: type
    group_id_rule: str
    checks: Mapping[str, Check]


SPECS: dict[str, RequestSpec] = {
    Api.JOIN_GROUP: RequestSpec(
        JoinGroupRequest,
        NON_EMPTY_GROUP_ID,
        {
            "session_timeout_ms": INT32,
            "rebalance_timeout_ms": INT32,
            "member_id": is_str,
            "group_instance_id": is_opt_str,
            "protocol_type": is_str,
            "protocols": seq_of(PROTOCOL),
            "client_id": is_str,
            "client_host": is_str,
            "reason": is_opt_str,
            "require_known_member_id": is_bool,
        },
    ),
    Api.SYNC_GROUP: RequestSpec(
        SyncGroupRequest,
        NON_EMPTY_GROUP_ID,
        {
            "generation_id": INT32,
            "member_id": is_str,
            "group_instance_id": is_opt_str,
            "protocol_type": is_opt_str,
            "protocol_name": is_opt_str,
            "assignments": map_of(is_str, is_bytes),
        },
    ),
    Api.HEARTBEAT: RequestSpec(
        HeartbeatRequest,
        NON_EMPTY_GROUP_ID,
        {"generation_id": INT32, "member_id": is_str, "group_instance_id": is_opt_str},
    ),
    Api.LEAVE_GROUP: RequestSpec(LeaveGroupRequest, NON_EMPTY_GROUP_ID, {"members": seq_of(MEMBER_IDENTITY)}),
    Api.OFFSET_COMMIT: RequestSpec(
        OffsetCommitRequest,
        GROUP_ID,
        {
            "offsets": _offsets,
            "generation_id": INT32,
            "member_id": is_str,
            "group_instance_id": is_opt_str,
            "retention_time_ms": RETENTION_MS,
        },
    ),
    Api.OFFSET_FETCH: RequestSpec(
        OffsetFetchRequest,
        GROUP_ID,
        {"partitions": lambda v: v is None or seq_of(TOPIC_PARTITION)(v), "require_stable": is_bool},
    ),
    Api.LIST_GROUPS: RequestSpec(
        ListGroupsRequest, NO_GROUP_ID, {"states_filter": seq_of(is_str), "types_filter": seq_of(is_str)}
    ),
    Api.DESCRIBE_GROUPS: RequestSpec(DescribeGroupsRequest, GROUP_IDS, {}),
    Api.DELETE_GROUPS: RequestSpec(DeleteGroupsRequest, GROUP_IDS, {}),
    Api.OFFSET_DELETE: RequestSpec(OffsetDeleteRequest, NON_EMPTY_GROUP_ID, {"partitions": seq_of(TOPIC_PARTITION)}),
    Api.CONSUMER_GROUP_HEARTBEAT: RequestSpec(
        ConsumerGroupHeartbeatRequest,
        GROUP_ID,  # an empty one gets INVALID_REQUEST from the handler, with Kafka's message
        {
            "member_id": is_str,
            "member_epoch": INT32,
            "instance_id": is_opt_str,
            "rack_id": is_opt_str,
            "rebalance_timeout_ms": INT32,
            "subscribed_topic_names": lambda v: v is None or seq_of(is_str)(v),
            "subscribed_topic_regex": is_opt_str,
            "server_assignor": is_opt_str,
            "topic_partitions": lambda v: v is None or seq_of(TOPIC_PARTITION)(v),
            "client_id": is_str,
            "client_host": is_str,
        },
    ),
    Api.CONSUMER_GROUP_DESCRIBE: RequestSpec(ConsumerGroupDescribeRequest, GROUP_IDS, {}),
}


def _validate(api: str, req: Any) -> Errors | None:
    spec = SPECS[api]
    if not isinstance(req, spec.request_type):
        return Errors.INVALID_REQUEST
    rule = spec.group_id_rule
    if rule in (GROUP_ID, NON_EMPTY_GROUP_ID):
        error = _group_id_error(getattr(req, "group_id", None), allow_empty=rule == GROUP_ID)
        if error is not None:
            return error
    elif rule == GROUP_IDS:
        group_ids: Any = getattr(req, "group_ids", None)
        if not _is_seq(group_ids):
            return Errors.INVALID_REQUEST
        for group_id in group_ids:
            error = _group_id_error(group_id, allow_empty=True)
            if error is not None:
                return error
    for name, check in spec.checks.items():
        if not check(getattr(req, name, None)):
            log.debug("rejecting %s: bad field %s", api, name)
            return Errors.INVALID_REQUEST
    return None


def check(api: str, req: Any, config: Any = None) -> Errors | None:
    """Validate `req` for `api` (a GroupCoordinator method name); None when valid.

    With a GroupConfig, also enforce its size limits: group ids longer than max_group_id_bytes
    (UTF-8) get INVALID_GROUP_ID; longer ids, names and reasons (max_name_bytes), more items than
    a request may carry, protocol metadata over max_metadata_bytes or an assignment over
    max_assignment_bytes get INVALID_REQUEST.
    """
    if api == Api.HEARTBEAT and plain_heartbeat(req, config):
        return None
    if api not in SPECS:
        raise KeyError(f"no validation spec for API {api!r}")
    error = _validate(api, req)
    if error is None and config is not None:
        error = _limits_error(api, req, config)
    return error


# A generated member id is `<client or instance id>-<uuid4>`: 37 bytes more than its prefix.
MEMBER_ID_SUFFIX_BYTES = 37


def plain_heartbeat(req: Any, config: Any) -> bool:
    """Whether `req` is a Heartbeat that the full checks would pass and that needs none of them: exact
    types, a dynamic member, ASCII ids (a byte per character) within the limits. Any other goes the long way."""
    if type(req) is not HeartbeatRequest or req.group_instance_id is not None:
        return False
    group_id, member_id, generation = req.group_id, req.member_id, req.generation_id
    return (type(group_id) is str and group_id != "" and group_id.isascii()
            and type(member_id) is str and member_id.isascii()
            and type(generation) is int and INT32_MIN <= generation <= INT32_MAX
            and (config is None or (len(group_id) <= config.max_group_id_bytes
                                    and len(member_id) <= config.max_name_bytes + MEMBER_ID_SUFFIX_BYTES)))


def _too_long(s: str | None, limit: int) -> bool:
    """Whether `s` is longer than `limit` UTF-8 bytes (a code point is 1 to 4 of them)."""
    if s is None or 4 * len(s) <= limit:
        return False
    return len(s) > limit or len(s.encode("utf-8")) > limit


def _names_and_count(api: str, req: Any) -> tuple[list[str | None], list[str], int, str]:
    """The request's names held to max_name_bytes, its member ids, and how many items it carries under which limit."""
    if api == Api.JOIN_GROUP:
        names = [req.group_instance_id, req.protocol_type, req.client_id, req.client_host, req.reason]
        return [*names, *(n for n, _ in req.protocols)], [req.member_id], len(req.protocols), "max_protocols"
    if api == Api.SYNC_GROUP:
        names = [req.group_instance_id, req.protocol_type, req.protocol_name]
        return names, [req.member_id, *req.assignments], len(req.assignments), "max_items_per_request"
    if api == Api.HEARTBEAT:
        return [req.group_instance_id], [req.member_id], 0, "max_items_per_request"
    if api == Api.LEAVE_GROUP:
        names = [x for m in req.members for x in (m.group_instance_id, m.reason)]
        return names, [m.member_id for m in req.members], len(req.members), "max_items_per_request"
    if api == Api.OFFSET_COMMIT:
        names = [req.group_instance_id, *{tp[0] for tp in req.offsets}]
        return names, [req.member_id], len(req.offsets), "max_partitions_per_request"
    if api in (Api.OFFSET_FETCH, Api.OFFSET_DELETE):
        partitions = req.partitions or ()
        return list({tp[0] for tp in partitions}), [], len(partitions), "max_partitions_per_request"
    if api in (Api.DESCRIBE_GROUPS, Api.DELETE_GROUPS, Api.CONSUMER_GROUP_DESCRIBE):
        return [], [], len(req.group_ids), "max_items_per_request"
    if api == Api.CONSUMER_GROUP_HEARTBEAT:
        names = [req.instance_id, req.rack_id, req.subscribed_topic_regex, req.server_assignor, req.client_id,
                 req.client_host, *(req.subscribed_topic_names or ()), *{tp[0] for tp in req.topic_partitions or ()}]
        count = len(req.topic_partitions or ()) + len(req.subscribed_topic_names or ())
        return names, [req.member_id], count, "max_partitions_per_request"
    return [], [], 0, "max_items_per_request"


def _any_too_long(strings: Any, limit: int) -> bool:
    """Whether any of `strings` (None ones skipped) is longer than `limit` UTF-8 bytes; short ones are not encoded."""
    for s in strings:
        if s is not None and 4 * len(s) > limit and _too_long(s, limit):
            return True
    return False


def _limits_error(api: str, req: Any, config: Any) -> Errors | None:
    ids = req.group_ids if SPECS[api].group_id_rule == GROUP_IDS else (getattr(req, "group_id", ""),)
    if _any_too_long(ids, config.max_group_id_bytes):  # _validate has checked that each is a str
        log.info("rejecting %s: group id longer than %d bytes", api, config.max_group_id_bytes)
        return Errors.INVALID_GROUP_ID
    names, member_ids, count, limit = _names_and_count(api, req)
    if count > getattr(config, limit):
        log.info("rejecting %s: more items than %s=%d", api, limit, getattr(config, limit))
        return Errors.INVALID_REQUEST
    max_name = config.max_name_bytes
    if _any_too_long(names, max_name) or _any_too_long(member_ids, max_name + MEMBER_ID_SUFFIX_BYTES):
        log.info("rejecting %s: an id, name or reason longer than %d bytes", api, max_name)
        return Errors.INVALID_REQUEST
    if api == Api.JOIN_GROUP and sum(len(meta) for _, meta in req.protocols) > config.max_metadata_bytes:
        log.info("rejecting JoinGroup of %r: protocol metadata over %d bytes", req.group_id, config.max_metadata_bytes)
        return Errors.INVALID_REQUEST
    if api == Api.SYNC_GROUP and any(len(a) > config.max_assignment_bytes for a in req.assignments.values()):
        log.info("rejecting SyncGroup of %r: an assignment over %d bytes", req.group_id, config.max_assignment_bytes)
        return Errors.INVALID_REQUEST
    return None
