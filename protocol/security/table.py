"""Kafka's per-API authorization table, applied to our requests and responses.

`admit` checks one request as Kafka's KafkaApis does before handing it to the group
coordinator: the group first (its denial answers the whole request), then the topics, whose
denied partitions are answered TOPIC_AUTHORIZATION_FAILED while the others proceed. What it
returns says what the shard still has to run and how to merge the denied parts into its answer.
"""

from __future__ import annotations

import dataclasses
from dataclasses import dataclass
from typing import Any, Callable, Mapping

from ..consumer.messages import ConsumerGroupDescribeResponse, ConsumerGroupHeartbeatResponse, DescribedConsumerGroup
from ..errors import Errors
from ..messages import (
    DeleteGroupsResponse,
    DescribedGroup,
    DescribeGroupsResponse,
    ListGroupsResponse,
    OffsetCommitResponse,
    OffsetDeleteResponse,
    OffsetFetchPartition,
    OffsetFetchResponse,
    describe_response_from_rows,
)
from ..responses import error_response
from .acl import CLUSTER_NAME, Authorizer

GROUP_DENIED = Errors.GROUP_AUTHORIZATION_FAILED
TOPIC_DENIED = Errors.TOPIC_AUTHORIZATION_FAILED
CLUSTER_DENIED = Errors.CLUSTER_AUTHORIZATION_FAILED

# What each API needs, as Kafka checks it: (resource type, operation) in order; "per" marks a check
# made per group / per topic of the request, "or" an alternative that also suffices.
REQUIRED: dict[str, tuple[str, ...]] = {
    "join_group": ("GROUP READ",),
    "sync_group": ("GROUP READ",),
    "heartbeat": ("GROUP READ",),
    "leave_group": ("GROUP READ",),
    "commit_offsets": ("GROUP READ", "per TOPIC READ"),
    "fetch_offsets": ("GROUP DESCRIBE", "per TOPIC DESCRIBE"),
    "list_groups": ("CLUSTER DESCRIBE", "or per GROUP DESCRIBE"),
    "describe_groups": ("per GROUP DESCRIBE",),
    "delete_groups": ("per GROUP DELETE",),
    "delete_offsets": ("GROUP DELETE", "per TOPIC READ"),
    "consumer_group_heartbeat": ("GROUP READ", "per subscribed TOPIC DESCRIBE"),
    "consumer_group_describe": ("per GROUP DESCRIBE", "per member TOPIC DESCRIBE"),
    "create_topic": ("CLUSTER CREATE", "or TOPIC CREATE"),
    "create_partitions": ("TOPIC ALTER",),
    "report_end_offsets": ("CLUSTER ALTER", "or TOPIC ALTER"),
    "describe_topics": ("per TOPIC DESCRIBE",),
    "principals and ACLs (create, delete, alter quotas)": ("CLUSTER ALTER",),
    "principals and ACLs (list, describe)": ("CLUSTER DESCRIBE",),
}

Denial = tuple[str, str, str]  # (operation, resource type, resource name)


@dataclass(frozen=True)
class Admission:
    """What may run of one request: `request` for the shard (None: nothing, answer `response` now),
    `finish` to merge the denied parts into the shard's response, `denied` for the audit."""

    request: Any
    response: Any = None
    finish: Callable[[Any], Any] | None = None
    denied: tuple[Denial, ...] = ()


def _name(value: Any) -> str:
    return value if isinstance(value, str) else ""


def _topic(tp: Any) -> str:
    return tp[0] if isinstance(tp, tuple) and tp and isinstance(tp[0], str) else ""


def _refuse(api: str, req: Any, error: Errors, denial: Denial) -> Admission:
    return Admission(None, error_response(api, req, error), None, (denial,))


class _Check:
    """One request's checks against one principal."""

    def __init__(self, authz: Authorizer, principal: str) -> None:
        self.authz, self.principal = authz, principal
        self.denied: list[Denial] = []

    def __call__(self, operation: str, resource_type: str, name: str) -> bool:
        if self.authz.authorize(self.principal, operation, resource_type, name):
            return True
        self.denied.append((operation, resource_type, name))
        return False

    def quiet(self, operation: str, resource_type: str, name: str) -> bool:
        """A check whose denial is not a failure (Kafka's logIfDenied = false: filtering, not refusing)."""
        return self.authz.authorize(self.principal, operation, resource_type, name)


def admit(api: str, req: Any, principal: str, authz: Authorizer) -> Admission:
    """Apply Kafka's checks for `api` to `req` from `principal`."""
    check = _Check(authz, principal)
    handler = _HANDLERS.get(api)
    if handler is None:
        return Admission(req)
    return handler(req, check)


def _group_read(api: str) -> Callable[[Any, _Check], Admission]:
    def check_group(req: Any, check: _Check) -> Admission:
        group = _name(getattr(req, "group_id", None))
        if check("READ", "GROUP", group):
            return Admission(req)
        return _refuse(api, req, GROUP_DENIED, check.denied[0])

    return check_group


def _split_topics(offsets: Any, check: _Check, operation: str) -> tuple[list, list] | None:
    """The keys of `offsets` (partitions) split into allowed and denied by `operation` on their topic;
    None when every topic is allowed (the request goes through unchanged)."""
    try:
        topics = {tp[0] for tp in offsets}  # the usual case: TopicPartitions of one or a few topics
    except (TypeError, IndexError, KeyError):
        return None if not hasattr(offsets, "__iter__") else _split_odd_keys(offsets, check, operation)
    denied_topics = {t for t in topics if not check(operation, "TOPIC", _name(t))}
    if not denied_topics:
        return None
    keys = list(offsets)
    return [tp for tp in keys if tp[0] not in denied_topics], [tp for tp in keys if tp[0] in denied_topics]


def _split_odd_keys(offsets: Any, check: _Check, operation: str) -> tuple[list, list] | None:
    """_split_topics for keys that are not (topic, partition) pairs: the shard answers them, if allowed."""
    try:
        keys = list(offsets)
    except TypeError:
        return None
    denied_topics = {t for t in {_topic(tp) for tp in keys} if not check(operation, "TOPIC", t)}
    if not denied_topics:
        return None
    return [tp for tp in keys if _topic(tp) not in denied_topics], [tp for tp in keys if _topic(tp) in denied_topics]


def _commit_offsets(req: Any, check: _Check) -> Admission:
    if not check("READ", "GROUP", _name(getattr(req, "group_id", None))):
        return _refuse("commit_offsets", req, GROUP_DENIED, check.denied[0])
    offsets = getattr(req, "offsets", None)
    if type(offsets) is not dict and not isinstance(offsets, Mapping):
        return Admission(req)
    split = _split_topics(offsets, check, "READ")
    if split is None:
        return Admission(req)
    allowed, denied = split
    denied_errors = {tp: TOPIC_DENIED for tp in denied}
    if not allowed:
        return Admission(None, OffsetCommitResponse(denied_errors), None, tuple(check.denied))
    narrowed = dataclasses.replace(req, offsets={tp: offsets[tp] for tp in allowed})

    def finish(resp: Any) -> Any:
        return dataclasses.replace(resp, errors={**resp.errors, **denied_errors})

    return Admission(narrowed, None, finish, tuple(check.denied))


def _fetch_offsets(req: Any, check: _Check) -> Admission:
    if not check("DESCRIBE", "GROUP", _name(getattr(req, "group_id", None))):
        return _refuse("fetch_offsets", req, GROUP_DENIED, check.denied[0])
    partitions = getattr(req, "partitions", None)
    if partitions is None:  # every partition: the topics the principal may not DESCRIBE are left out

        def finish_all(resp: Any) -> Any:
            offsets = resp.offsets
            if all(check.quiet("DESCRIBE", "TOPIC", _topic(tp)) for tp in offsets):
                return resp
            kept = {tp: p for tp, p in offsets.items() if check.quiet("DESCRIBE", "TOPIC", _topic(tp))}
            return dataclasses.replace(resp, offsets=kept)

        return Admission(req, None, finish_all)
    split = _split_topics(partitions, check, "DESCRIBE")
    if split is None:
        return Admission(req)
    allowed, denied = split
    denied_offsets = {tp: OffsetFetchPartition(-1, "", -1, TOPIC_DENIED) for tp in denied}
    if not allowed:
        return Admission(None, OffsetFetchResponse(Errors.NONE, denied_offsets), None, tuple(check.denied))

    def finish(resp: Any) -> Any:
        if resp.error != Errors.NONE:
            return resp
        return dataclasses.replace(resp, offsets={**resp.offsets, **denied_offsets})

    return Admission(dataclasses.replace(req, partitions=allowed), None, finish, tuple(check.denied))


def _list_groups(req: Any, check: _Check) -> Admission:
    if check.quiet("DESCRIBE", "CLUSTER", CLUSTER_NAME):
        return Admission(req)

    def finish(resp: Any) -> Any:
        if type(resp) is list:  # rows (a partition's answer to the router's fan-out)
            return [row for row in resp if check.quiet("DESCRIBE", "GROUP", row[0])]
        groups = [g for g in resp.groups if check.quiet("DESCRIBE", "GROUP", g.group_id)]
        return ListGroupsResponse(resp.error, groups)

    return Admission(req, None, finish)


def _per_group(
    api: str, operation: str, build: Callable[[list[str], dict[str, Any]], Any], denied_item: Callable[[str], Any]
) -> Callable[[Any, _Check], Admission]:
    """A check of `operation` on each group of a request with `group_ids`; denied groups are answered by
    `denied_item`, the rest go to the shard and `build` puts the answer together in request order."""

    def check_groups(req: Any, check: _Check) -> Admission:
        ids = getattr(req, "group_ids", None)
        if not isinstance(ids, (list, tuple)):
            return Admission(req)
        denied = [g for g in ids if not check(operation, "GROUP", _name(g))]
        if not denied:
            return Admission(req)
        denied_set = set(denied)
        allowed = [g for g in ids if g not in denied_set]
        answers = {g: denied_item(g) for g in denied}
        if not allowed:
            return Admission(None, build(list(ids), answers), None, tuple(check.denied))

        def finish(resp: Any) -> Any:
            return build(list(ids), {**_items_of(api, resp), **answers})

        return Admission(dataclasses.replace(req, group_ids=allowed), None, finish, tuple(check.denied))

    return check_groups


def _items_of(api: str, resp: Any) -> dict[str, Any]:
    if api == "delete_groups":
        return dict(resp.results)
    if type(resp) is list:  # DescribeGroups answered as rows (a partition's answer to the router's fan-out)
        resp = describe_response_from_rows(resp)
    return {g.group_id: g for g in resp.groups}


def _delete_offsets(req: Any, check: _Check) -> Admission:
    if not check("DELETE", "GROUP", _name(getattr(req, "group_id", None))):
        return _refuse("delete_offsets", req, GROUP_DENIED, check.denied[0])
    partitions = getattr(req, "partitions", None)
    split = _split_topics(partitions, check, "READ") if isinstance(partitions, (list, tuple)) else None
    if split is None:
        return Admission(req)
    allowed, denied = split
    denied_errors = {tp: TOPIC_DENIED for tp in denied}
    if not allowed:
        return Admission(None, OffsetDeleteResponse(Errors.NONE, denied_errors), None, tuple(check.denied))

    def finish(resp: Any) -> Any:
        if resp.error != Errors.NONE:
            return resp
        return dataclasses.replace(resp, errors={**resp.errors, **denied_errors})

    return Admission(dataclasses.replace(req, partitions=allowed), None, finish, tuple(check.denied))


def _consumer_group_heartbeat(req: Any, check: _Check) -> Admission:
    if not check("READ", "GROUP", _name(getattr(req, "group_id", None))):
        return _refuse("consumer_group_heartbeat", req, GROUP_DENIED, check.denied[0])
    topics = getattr(req, "subscribed_topic_names", None)
    if not isinstance(topics, (list, tuple)):
        return Admission(req)
    denied = sorted({_name(t) for t in topics if not check("DESCRIBE", "TOPIC", _name(t))})
    if not denied:
        return Admission(req)
    message = f"The following topics are not authorized: {', '.join(denied)}"
    response = ConsumerGroupHeartbeatResponse(TOPIC_DENIED, message, None, 0, 0, None)
    return Admission(None, response, None, tuple(check.denied))


def _consumer_group_topics(group: DescribedConsumerGroup) -> set[str]:
    topics: set[str] = set()
    for m in group.members:
        topics.update(m.subscribed_topic_names)
        topics.update(tp[0] for tp in m.assignment)
        topics.update(tp[0] for tp in m.target_assignment)
    return topics


def _consumer_group_describe(req: Any, check: _Check) -> Admission:
    groups = _per_group(
        "consumer_group_describe",
        "DESCRIBE",
        lambda ids, items: ConsumerGroupDescribeResponse([items[g] for g in ids if g in items]),
        lambda g: DescribedConsumerGroup(GROUP_DENIED, g),
    )(req, check)
    if groups.request is None:
        return groups
    inner = groups.finish

    def finish(resp: Any) -> Any:
        resp = inner(resp) if inner is not None else resp
        out = []
        for g in resp.groups:
            if g.error == Errors.NONE and not all(
                check.quiet("DESCRIBE", "TOPIC", t) for t in _consumer_group_topics(g)
            ):
                g = DescribedConsumerGroup(TOPIC_DENIED, g.group_id, error_message="topics not authorized")
            out.append(g)
        return ConsumerGroupDescribeResponse(out)

    return Admission(groups.request, None, finish, groups.denied)


_HANDLERS: dict[str, Callable[[Any, _Check], Admission]] = {
    "join_group": _group_read("join_group"),
    "sync_group": _group_read("sync_group"),
    "heartbeat": _group_read("heartbeat"),
    "leave_group": _group_read("leave_group"),
    "commit_offsets": _commit_offsets,
    "fetch_offsets": _fetch_offsets,
    "list_groups": _list_groups,
    "describe_groups": _per_group(
        "describe_groups",
        "DESCRIBE",
        lambda ids, items: DescribeGroupsResponse([items[g] for g in ids if g in items]),
        lambda g: DescribedGroup(GROUP_DENIED, g, "", "", "", []),
    ),
    "delete_groups": _per_group(
        "delete_groups",
        "DELETE",
        lambda ids, items: DeleteGroupsResponse({g: items[g] for g in ids if g in items}),
        lambda g: GROUP_DENIED,
    ),
    "delete_offsets": _delete_offsets,
    "consumer_group_heartbeat": _consumer_group_heartbeat,
    "consumer_group_describe": _consumer_group_describe,
}


def cluster_or_topic(authz: Authorizer, principal: str, operation: str, topic: str) -> bool:
    """Kafka's CreateTopics rule: `operation` on the cluster, or else on the topic itself."""
    return authz.authorize(principal, operation, "CLUSTER", CLUSTER_NAME) or authz.authorize(
        principal, operation, "TOPIC", topic
    )


def cluster(authz: Authorizer, principal: str, operation: str) -> bool:
    """`operation` on the cluster resource (ACL and principal management, as Kafka's CreateAcls/DescribeAcls)."""
    return authz.authorize(principal, operation, "CLUSTER", CLUSTER_NAME)
