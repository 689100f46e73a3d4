"""Turning a symbolic `Step` into a kio request for one target, given what that target answered so far.

`SlotState` is what a client remembers (member id, generation or member epoch, the members of its
last join, its assignment); `build(step, ...)` resolves the step's options against it; `absorb`
updates it from the answer. Topic ids are the target's own (`topic_ids`, name -> UUID).
"""

from __future__ import annotations

import struct
import uuid
from dataclasses import dataclass, field
from datetime import timedelta
from typing import Any

from benchmarks.kafka.sequences import ADMIN, TOPICS, Step
from benchmarks.kafka.wire import nested_class, request_class

BOGUS_MEMBER = "bogus-member-id"
SESSION_MS = {"ok": timedelta(milliseconds=10_000), "bad": timedelta(milliseconds=30)}  # 30 ms: below the minimum
REBALANCE_MS = timedelta(milliseconds=20_000)


def _str(s: str) -> bytes:
    raw = s.encode()
    return struct.pack(">h", len(raw)) + raw


def subscription_bytes(topics: tuple[str, ...]) -> bytes:
    """ConsumerProtocolSubscription v0: the topics, no user data."""
    return struct.pack(">hi", 0, len(topics)) + b"".join(_str(t) for t in topics) + struct.pack(">i", -1)


def assignment_bytes(assigned: dict[str, list[int]]) -> bytes:
    """ConsumerProtocolAssignment v0: topic -> partitions, no user data."""
    body = struct.pack(">hi", 0, len(assigned))
    for topic, parts in sorted(assigned.items()):
        body += _str(topic) + struct.pack(">i", len(parts)) + b"".join(struct.pack(">i", p) for p in parts)
    return body + struct.pack(">i", -1)


@dataclass
class SlotState:
    """What one member remembers of its target's answers."""

    slot: int
    consumer_member_id: str = ""
    member_id: str = ""
    generation: int = -1
    epoch: int = 0
    protocol_name: str | None = None
    join_members: tuple[str, ...] = ()
    leader: bool = False
    assignment: dict[str, tuple[int, ...]] = field(default_factory=dict)
    consumer_static: bool = False
    consumer_topics: tuple[str, ...] = ()

    def __post_init__(self) -> None:
        # The same id for a slot in every run (runs never share a group): Kafka's assignors break ties by
        # member order, so random ids would make two runs of one sequence assign differently.
        if not self.consumer_member_id:
            self.consumer_member_id = str(uuid.uuid5(uuid.NAMESPACE_OID, f"groupcoord-harness-slot-{self.slot}"))

    def instance_id(self, step: Step, run_tag: str) -> str | None:
        """The static member's group.instance.id (unique per run), or None for a dynamic member."""
        return f"{run_tag}-i{self.slot}" if step.opt("static") else None


def _group(step: Step, groups: tuple[str, str], key: str = "group") -> str:
    choice = step.opt(key, "own")
    return {"own": groups[0], "other": groups[1], "empty": "", "bad": ""}[choice]


def build(step: Step, state: SlotState | None, groups: tuple[str, str], topic_ids: dict[str, uuid.UUID],
          run_tag: str, member_labels: dict[str, int]) -> Any:
    """The kio request of `step` for one target (`member_labels`: member id -> slot, for assignments)."""
    a, v = step.action, step.opt("v")
    g = groups[0]
    if a == "join":
        cls = request_class("join_group", v)
        proto = nested_class(cls, "JoinGroupRequestProtocol")
        ptype = "connect" if step.opt("ptype") == "bad" else "consumer"
        kwargs: dict[str, Any] = dict(
            group_id=_group(step, groups), session_timeout=SESSION_MS[step.opt("session", "ok")],
            rebalance_timeout=REBALANCE_MS, member_id=BOGUS_MEMBER if step.opt("member") == "bad" else state.member_id,
            group_instance_id=state.instance_id(step, run_tag), protocol_type=ptype,
            protocols=(proto(name="range", metadata=subscription_bytes(step.opt("topics"))),))
        return cls(**kwargs)
    if a in ("sync", "heartbeat"):
        gen = {"bad": state.generation + 1, None: state.generation}[step.opt("gen")]
        member = BOGUS_MEMBER if step.opt("member") == "bad" else state.member_id
        instance = state.instance_id(step, run_tag) if state.join_members or state.member_id else None
        if a == "heartbeat":
            return request_class("heartbeat", v)(group_id=g, generation_id=gen, member_id=member,
                                                 group_instance_id=instance)
        cls = request_class("sync_group", v)
        assignments = ()
        if state.leader:
            item = nested_class(cls, "SyncGroupRequestAssignment")
            members = sorted(state.join_members, key=lambda m: (member_labels.get(m, 99), m))
            split: dict[str, dict[str, list[int]]] = {m: {} for m in members}
            for topic, n in TOPICS.items():
                for p in range(n):
                    split[members[p % len(members)]].setdefault(topic, []).append(p)
            assignments = tuple(item(member_id=m, assignment=assignment_bytes(split[m])) for m in members)
        kwargs = dict(group_id=g, generation_id=gen, member_id=member, group_instance_id=None,
                      assignments=assignments)
        if v >= 5:
            kwargs.update(protocol_type="consumer", protocol_name=state.protocol_name)
        return cls(**kwargs)
    if a == "leave":
        cls = request_class("leave_group", v)
        ident = nested_class(cls, "MemberIdentity")
        member = BOGUS_MEMBER if step.opt("member") == "bad" else state.member_id
        return cls(group_id=g, members=(ident(member_id=member, group_instance_id=None),))
    if a == "commit":
        return _commit(step, state, g)
    if a == "fetch":
        return _fetch(step, state, groups)
    if a == "offset_delete":
        cls = request_class("offset_delete", v)
        part, topic = nested_class(cls, "OffsetDeleteRequestPartition"), nested_class(cls, "OffsetDeleteRequestTopic")
        parts = tuple(part(partition_index=p) for p in step.opt("partitions"))
        return cls(group_id=g, topics=(topic(name=step.opt("topic"), partitions=parts),))
    if a == "describe":
        names = {"own": (g,), "both": (g, groups[1]), "empty": ("",)}[step.opt("groups")]
        return request_class("describe_groups", v)(groups=names, include_authorized_operations=False)
    if a == "list":
        states = (step.opt("states"),) if step.opt("states") else ()
        cls = request_class("list_groups", v)
        return cls(states_filter=states, types_filter=()) if v >= 5 else cls(states_filter=states)
    if a == "delete":
        return request_class("delete_groups", v)(groups_names=(_group(step, groups),))
    if a == "find":
        key = _group(step, groups)
        cls = request_class("find_coordinator", v)
        return cls(key=key, key_type=0) if v < 4 else cls(key_type=0, coordinator_keys=(key,))
    if a == "cg_describe":
        names = {"own": (g,), "both": (g, groups[1])}[step.opt("groups")]
        return request_class("consumer_group_describe", v)(group_ids=names, include_authorized_operations=False)
    if a.startswith("cg_"):
        return _consumer_heartbeat(step, state, g, topic_ids, run_tag)
    raise ValueError(f"unknown action {a!r}")


def _commit(step: Step, state: SlotState, g: str) -> Any:
    v = step.opt("v")
    cls = request_class("offset_commit", v)
    part, topic = nested_class(cls, "OffsetCommitRequestPartition"), nested_class(cls, "OffsetCommitRequestTopic")
    consumer = state.epoch > 0
    gen = state.epoch if consumer else state.generation
    member = state.consumer_member_id if consumer else state.member_id
    if step.opt("gen") == "none":
        gen, member = -1, ""
    elif step.opt("gen") == "bad":
        gen += 1
    elif step.opt("member") == "bad":
        member = BOGUS_MEMBER
    parts = tuple(part(partition_index=p, committed_offset=step.opt("offset") + p, committed_leader_epoch=-1,
                       committed_metadata=f"m{p}") for p in step.opt("partitions"))
    return cls(group_id=g, generation_id_or_member_epoch=gen, member_id=member, group_instance_id=None,
               topics=(topic(name=step.opt("topic"), partitions=parts),))


def _fetch(step: Step, state: SlotState | None, groups: tuple[str, str]) -> Any:
    v = step.opt("v")
    cls = request_class("offset_fetch", v)
    group = _group(step, groups)
    topics_opt = step.opt("topics")
    if v < 8:
        tcls = nested_class(cls, "OffsetFetchRequestTopic")
        topics = None if topics_opt == "all" else tuple(
            tcls(name=t, partition_indexes=tuple(range(TOPICS[t]))) for t in
            (("conf-a",) if topics_opt == "conf-a" else tuple(TOPICS)))
        return cls(group_id=group, topics=topics, require_stable=False)
    gcls, tcls = nested_class(cls, "OffsetFetchRequestGroup"), nested_class(cls, "OffsetFetchRequestTopics")
    topics = None if topics_opt == "all" else tuple(
        tcls(name=t, partition_indexes=tuple(range(TOPICS[t]))) for t in
        (("conf-a",) if topics_opt == "conf-a" else tuple(TOPICS)))
    kwargs: dict[str, Any] = dict(group_id=group, topics=topics)
    if v >= 9 and state is not None and step.opt("member") == "current" and state.epoch > 0:
        kwargs.update(member_id=state.consumer_member_id, member_epoch=state.epoch)
    return cls(groups=(gcls(**kwargs),), require_stable=False)


def _consumer_heartbeat(step: Step, state: SlotState, g: str, topic_ids: dict[str, uuid.UUID], run_tag: str) -> Any:
    v = step.opt("v")
    cls = request_class("consumer_group_heartbeat", v)
    tp = nested_class(cls, "TopicPartitions")
    member = BOGUS_MEMBER if step.opt("member") == "bad" else state.consumer_member_id
    if step.action == "cg_join":
        topics = step.opt("topics")
        if step.opt("topics") == "bad":
            topics = ()
        assignor = "no-such-assignor" if step.opt("assignor") == "bad" else step.opt("assignor")
        return cls(group_id=g, member_id=member, member_epoch=0, instance_id=state.instance_id(step, run_tag),
                   rack_id=None, rebalance_timeout=REBALANCE_MS, subscribed_topic_names=tuple(topics),
                   subscribed_topic_regex=None, server_assignor=assignor, topic_partitions=())
    if step.action == "cg_leave":
        static = state.consumer_static
        return cls(group_id=g, member_id=member, member_epoch=-2 if static else -1,
                   instance_id=f"{run_tag}-i{state.slot}" if static else None, topic_partitions=None)
    epoch = state.epoch + 1 if step.opt("epoch") == "bad" else state.epoch
    owned = tuple(tp(topic_id=topic_ids[t], partitions=tuple(ps)) for t, ps in sorted(state.assignment.items()))
    if step.opt("full"):
        return cls(group_id=g, member_id=member, member_epoch=epoch,
                   instance_id=f"{run_tag}-i{state.slot}" if state.consumer_static else None,
                   rebalance_timeout=REBALANCE_MS, subscribed_topic_names=state.consumer_topics,
                   topic_partitions=owned)
    return cls(group_id=g, member_id=member, member_epoch=epoch, topic_partitions=owned)


def absorb(step: Step, state: SlotState | None, response: Any, topic_names: dict[uuid.UUID, str]) -> None:
    """Remember what a client would from `response` to `step`."""
    if state is None or step.slot == ADMIN:
        return
    a = step.action
    code = int(getattr(response, "error_code", 0))
    if a == "join":
        if response.member_id:
            state.member_id = response.member_id
        if code == 0:
            state.generation = int(response.generation_id)
            state.protocol_name = response.protocol_name
            state.leader = response.leader == response.member_id
            state.join_members = tuple(m.member_id for m in response.members)
    elif a == "leave" and code == 0 and step.opt("member") != "bad":
        state.member_id, state.generation, state.leader = "", -1, False
    elif a.startswith("cg_") and a != "cg_describe":
        if a == "cg_join":
            state.consumer_static = bool(step.opt("static"))
            state.consumer_topics = tuple(step.opt("topics")) if step.opt("topics") != "bad" else ()
        if code == 0:
            state.epoch = int(response.member_epoch)
            if response.assignment is not None:
                state.assignment = {topic_names.get(t.topic_id, str(t.topic_id)): tuple(sorted(t.partitions))
                                    for t in response.assignment.topic_partitions}
            if state.epoch < 0:
                state.epoch, state.assignment = 0, {}
