"""ConsumerGroupHeartbeat (API key 68): join, heartbeat, reconcile and leave, as Kafka's GroupMetadataManager.

One heartbeat, as Kafka handles it: (1) update the member's subscription, and bump the group
epoch if the subscribed topics changed; (2) if the group epoch is ahead of the target
assignment, compute a new target with the group's server assignor; (3) move the member one step
towards its target (reconciliation revokes before it assigns). All of it is decided first and
written as one batch of records, which the shard then replays; the response waits until they
are durable. Sessions and revocations are bounded by timers (on the monotonic clock) that fence
the member; they are armed or cancelled only once the log took the records, so a refused batch
leaves no trace.
"""

from __future__ import annotations

import dataclasses
import logging
import uuid
from typing import Any, Callable

from ..errors import Errors
from ..records import Record
from ..shard.deferred import Deferred
from ..values import GroupType
from .assignors import MemberSpec, PartitionAssignorError, server_assignor
from .group import ConsumerGroup, ConsumerGroupMember, MemberState, resolve_regex
from .heartbeat_checks import HeartbeatError, check_epoch, check_request, check_static, heartbeat_error
from .messages import (
    JOIN_GROUP_MEMBER_EPOCH,
    LEAVE_GROUP_MEMBER_EPOCH,
    LEAVE_GROUP_STATIC_MEMBER_EPOCH,
    ConsumerGroupHeartbeatRequest,
    ConsumerGroupHeartbeatResponse,
)
from .reconciliation import FencedMemberError, reconcile
from .store import (
    ConsumerGroupStore,
    current_assignment_record,
    epoch_record,
    member_tombstones,
    subscription_metadata_record,
    subscription_record,
    target_epoch_record,
    target_member_record,
)

log = logging.getLogger(__name__)


class ConsumerHeartbeatHandler(ConsumerGroupStore):
    """The consumer group manager's heartbeat, leave, fencing and timers."""

    def consumer_group_heartbeat(self, req: ConsumerGroupHeartbeatRequest) -> Deferred[ConsumerGroupHeartbeatResponse]:
        """Handle one heartbeat; errors are answered with Kafka's code and message and change nothing."""
        after: list[Callable[[], None]] = []  # timer changes, made only once the log took the records
        try:
            check_request(req, self.config.consumer_assignors)
            if req.member_epoch in (LEAVE_GROUP_MEMBER_EPOCH, LEAVE_GROUP_STATIC_MEMBER_EPOCH):
                records, response = self._leave(req, after)
            else:
                records, response = self._heartbeat(req, after)
        except HeartbeatError as e:
            log.debug(
                "group %s member %s: heartbeat refused: %s %s", req.group_id, req.member_id, e.error.name, e.message
            )
            return self.rt.respond(heartbeat_error(e.error, e.message))
        self.rt.append(records)  # a refused batch raises before `after` runs: nothing changed
        for action in after:
            action()
        return self.rt.respond(response)

    # --- the group and the member --------------------------------------------------------------------

    def _group_for(self, group_id: str, create: bool, records: list[Record]) -> ConsumerGroup:
        """Kafka's getOrMaybeCreateConsumerGroup, without online upgrade of a non-empty classic group."""
        group = self.groups.get(group_id)
        if group is not None:
            return group
        if group_id in self.registry:
            # A group of the other protocol: only an empty one becomes a consumer group, on a join.
            conversion = self.registry.conversion_records(group_id, GroupType.CONSUMER) if create else None
            if conversion is None:
                raise HeartbeatError(Errors.GROUP_ID_NOT_FOUND, f"Group {group_id} is not a consumer group.")
            records.extend(conversion)
        elif not create:
            raise HeartbeatError(Errors.GROUP_ID_NOT_FOUND, f"Consumer group {group_id} not found.")
        return ConsumerGroup(group_id)

    def _member_for(
        self, group: ConsumerGroup, req: ConsumerGroupHeartbeatRequest, records: list[Record]
    ) -> tuple[ConsumerGroupMember, str]:
        """The member the heartbeat is from: existing (epoch checked), new, or a static member's new incarnation;
        and the id its target assignment is kept under (the departed incarnation's, for a new one)."""
        member_id = req.member_id
        joining = req.member_epoch == JOIN_GROUP_MEMBER_EPOCH
        if req.instance_id is None:
            member = group.members.get(member_id)
            if member is None:
                if not joining:
                    raise HeartbeatError(
                        Errors.UNKNOWN_MEMBER_ID, f"Member {member_id} is not a member of group {group.group_id}."
                    )
                log.info("group %s: member %s joins", group.group_id, member_id)
                return ConsumerGroupMember(member_id), member_id
            check_epoch(member, req)
            return member, member_id
        existing = group.static_member(req.instance_id)
        if joining:
            if existing is None:
                log.info("group %s: static member %s (%s) joins", group.group_id, member_id, req.instance_id)
                return ConsumerGroupMember(member_id, instance_id=req.instance_id), member_id
            if existing.member_epoch != LEAVE_GROUP_STATIC_MEMBER_EPOCH:
                raise HeartbeatError(
                    Errors.UNRELEASED_INSTANCE_ID,
                    f"Static member {member_id} with instance id {req.instance_id} cannot join the group because "
                    f"the instance id is owned by {existing.member_id} member.",
                )
            # The new incarnation takes over the departed one's assignment under its own member id.
            new = dataclasses.replace(existing, member_id=member_id, member_epoch=0, previous_member_epoch=0)
            records.extend(member_tombstones(group.group_id, existing.member_id))
            records.append(subscription_record(group.group_id, new))
            records.append(target_member_record(group.group_id, member_id, group.target_of(existing.member_id)))
            records.append(current_assignment_record(group.group_id, new))
            return new, existing.member_id
        member = check_static(existing, req)
        check_epoch(member, req)
        return member, member.member_id

    # --- heartbeat -------------------------------------------------------------------------------

    def _heartbeat(
        self, req: ConsumerGroupHeartbeatRequest, after: list[Callable[[], None]]
    ) -> tuple[list[Record], ConsumerGroupHeartbeatResponse]:
        records: list[Record] = []
        joining = req.member_epoch == JOIN_GROUP_MEMBER_EPOCH
        group = self._group_for(req.group_id, joining, records)
        if len(group.members) >= self.config.consumer_max_size and (
            req.member_id == "" or req.member_id not in group.members
        ):
            raise HeartbeatError(
                Errors.GROUP_MAX_SIZE_REACHED,
                f"The consumer group has reached its maximum capacity of {self.config.consumer_max_size} members.",
            )
        if req.member_id == "":
            req = dataclasses.replace(req, member_id=str(uuid.uuid4()))
        replacing = len(records)
        member, target_id = self._member_for(group, req, records)
        group_id = group.group_id
        # New to the group (a static member's new incarnation is not: _member_for wrote its records).
        new = member.member_id not in group.members and len(records) == replacing

        # 1. The subscription: a change of topics, or of the group's preferred assignor, bumps the group epoch
        # (a new member with an empty subscription does not: it takes the current target assignment).
        updated = _with_subscription(member, req)
        bump = False
        if updated != member or new:
            records.append(subscription_record(group_id, updated))
            bump = (
                updated.subscribed_topic_names != member.subscribed_topic_names
                or updated.subscribed_topic_regex != member.subscribed_topic_regex
                or (
                    updated.server_assignor != member.server_assignor
                    and self._preferred(group, updated, target_id) != self._preferred(group)
                )
            )
        group_epoch = group.group_epoch
        metadata = group.subscription_metadata
        if bump or group.metadata_refresh_needed:
            metadata = self._subscription_metadata(group, updated)
            if metadata != group.subscription_metadata:
                records.append(subscription_metadata_record(group_id, metadata))
                bump = True
            after.append(lambda: self._refreshed(group_id))
        if bump:
            group_epoch += 1
            records.append(epoch_record(group_id, group_epoch))
            log.info("group %s: group epoch bumped to %d", group_id, group_epoch)

        # 2. The target assignment, if the group epoch moved past it.
        if group_epoch > group.assignment_epoch:
            target = self._new_target(group, group_epoch, updated, target_id, metadata, records)
            target_epoch = group_epoch
        else:
            target = group.target_of(target_id)
            target_epoch = group.assignment_epoch

        # 3. One step of reconciliation.
        reconciled = updated
        if not updated.is_reconciled_to(target_epoch):
            try:
                reconciled = reconcile(updated, target_epoch, target, group.partition_epoch, req.topic_partitions)
            except FencedMemberError as e:
                raise HeartbeatError(Errors.FENCED_MEMBER_EPOCH, str(e)) from e
        if reconciled != updated or new:
            records.append(current_assignment_record(group_id, reconciled))
        if reconciled != updated:
            if reconciled.state is MemberState.UNREVOKED_PARTITIONS:
                after.append(lambda: self._schedule_rebalance_timeout(group_id, reconciled))
            else:
                after.append(lambda: self.rt.timers.cancel(("consumer-rebalance", group_id, reconciled.member_id)))
        after.append(lambda: self._schedule_session_timeout(group_id, reconciled.member_id))

        full = joining or (
            req.rebalance_timeout_ms != -1
            and req.subscribed_topic_names is not None
            and req.topic_partitions is not None
        )
        changed = reconciled.assigned_partitions != member.assigned_partitions
        response = ConsumerGroupHeartbeatResponse(
            Errors.NONE,
            None,
            reconciled.member_id,
            reconciled.member_epoch,
            self.config.consumer_heartbeat_interval_ms,
            reconciled.owned_partitions() if full or changed else None,
        )
        return records, response

    def _subscription_metadata(
        self, group: ConsumerGroup, updated: ConsumerGroupMember | None, removed: str = ""
    ) -> dict[str, int]:
        """Partition counts of the topics the group would subscribe to with `updated` in (and `removed` out)."""
        others = [
            m for mid, m in group.members.items() if mid != removed and (updated is None or mid != updated.member_id)
        ]
        members = others + ([updated] if updated is not None else [])
        # A topic the group knew but the shard has not heard of (yet: say, after a restart whose topic
        # metadata has not come) keeps its count; topics are never deleted, so it cannot be gone.
        known = {**group.subscription_metadata, **self.topics}
        topics: set[str] = set()
        for m in members:
            topics.update(m.subscribed_topic_names)
            if m.subscribed_topic_regex is not None:
                topics.update(resolve_regex(m.subscribed_topic_regex, known))
        return {t: known[t] for t in sorted(topics) if t in known}

    def _new_target(
        self,
        group: ConsumerGroup,
        epoch: int,
        updated: ConsumerGroupMember,
        target_id: str,
        metadata: dict[str, int],
        records: list[Record],
    ) -> Any:
        """Kafka's TargetAssignmentBuilder: run the group's assignor, write the members whose target changed."""
        members = dict(group.members)
        members.pop(target_id, None)  # a static member's departed incarnation, replaced by `updated`
        members[updated.member_id] = updated
        previous = dict(group.target_assignment)
        previous[updated.member_id] = group.target_of(target_id)
        specs = {
            mid: MemberSpec(self._topics_of(m, metadata), m.instance_id, previous.get(mid, {}))
            for mid, m in members.items()
        }
        name = preferred_assignor(members.values(), self.config.consumer_assignors)
        try:
            new = server_assignor(name).assign(specs, metadata)
        except PartitionAssignorError as e:
            message = f"Failed to compute a new target assignment for epoch {epoch}: {e}."
            log.error("group %s: %s", group.group_id, message)
            raise HeartbeatError(Errors.UNKNOWN_SERVER_ERROR, message) from e
        for mid in members:
            assignment = new.get(mid, {})
            if mid not in group.target_assignment or assignment != group.target_of(mid):
                records.append(target_member_record(group.group_id, mid, assignment))
        records.append(target_epoch_record(group.group_id, epoch))
        log.info("group %s: new target assignment for epoch %d with the %s assignor", group.group_id, epoch, name)
        return new.get(updated.member_id, {})

    def _preferred(self, group: ConsumerGroup, updated: ConsumerGroupMember | None = None, replaced: str = "") -> str:
        """The group's preferred server assignor, or what it would be with `updated` in (in place of `replaced`)."""
        members = group.members
        if updated is not None:
            members = {mid: m for mid, m in members.items() if mid != replaced}
            members[updated.member_id] = updated
        return preferred_assignor(members.values(), self.config.consumer_assignors)

    def _topics_of(self, member: ConsumerGroupMember, metadata: dict[str, int]) -> frozenset[str]:
        topics = {t for t in member.subscribed_topic_names if t in metadata}
        if member.subscribed_topic_regex is not None:
            topics.update(resolve_regex(member.subscribed_topic_regex, metadata))
        return frozenset(topics)

    # --- leaving and fencing ----------------------------------------------------------------------

    def _refreshed(self, group_id: str) -> None:
        group = self.groups.get(group_id)
        if group is not None:
            group.metadata_refresh_needed = False

    def _leave(
        self, req: ConsumerGroupHeartbeatRequest, after: list[Callable[[], None]]
    ) -> tuple[list[Record], ConsumerGroupHeartbeatResponse]:
        group = self._group_for(req.group_id, False, [])
        if req.instance_id is None:
            member = group.members.get(req.member_id)
            if member is None:
                raise HeartbeatError(
                    Errors.UNKNOWN_MEMBER_ID, f"Member {req.member_id} is not a member of group {group.group_id}."
                )
        else:
            member = check_static(group.static_member(req.instance_id), req)
            if req.member_epoch == LEAVE_GROUP_STATIC_MEMBER_EPOCH:
                log.info(
                    "group %s: static member %s (%s) leaves for now", group.group_id, req.member_id, req.instance_id
                )
                leaving = dataclasses.replace(
                    member, member_epoch=LEAVE_GROUP_STATIC_MEMBER_EPOCH, partitions_pending_revocation={}
                )
                response = ConsumerGroupHeartbeatResponse(
                    Errors.NONE, None, req.member_id, LEAVE_GROUP_STATIC_MEMBER_EPOCH, 0, None
                )
                return [current_assignment_record(group.group_id, leaving)], response
        log.info("group %s: member %s leaves", group.group_id, req.member_id)
        response = ConsumerGroupHeartbeatResponse(Errors.NONE, None, req.member_id, req.member_epoch, 0, None)
        member_id = member.member_id
        after.append(lambda: self._cancel_timers(group.group_id, member_id))
        return self.fence_records(group, member_id), response

    def fence_records(self, group: ConsumerGroup, member_id: str) -> list[Record]:
        """Remove a member: its tombstones, new subscription metadata if it changes, and a group epoch bump
        (with the target assignment epoch too when the group is left empty, as Kafka's consumerGroupFenceMembers)."""
        records = member_tombstones(group.group_id, member_id)
        metadata = self._subscription_metadata(group, None, removed=member_id)
        if metadata != group.subscription_metadata:
            records.append(subscription_metadata_record(group.group_id, metadata))
        epoch = group.group_epoch + 1
        records.append(epoch_record(group.group_id, epoch))
        if group.members.keys() <= {member_id}:  # the last member: Kafka's (empty) target assignment follows
            records.append(target_epoch_record(group.group_id, epoch))
        return records

    def _cancel_timers(self, group_id: str, member_id: str) -> None:
        self.rt.timers.cancel(("consumer-session", group_id, member_id))
        self.rt.timers.cancel(("consumer-rebalance", group_id, member_id))

    def _fence(self, group_id: str, member_id: str, reason: str, epoch: int | None = None) -> None:
        group = self.groups.get(group_id)
        member = group.members.get(member_id) if group is not None else None
        if group is None or member is None or (epoch is not None and member.member_epoch != epoch):
            return
        log.info("group %s: member %s fenced because %s", group_id, member_id, reason)
        # A refused batch raises to the shard's timer runner, which retries this timer later.
        self.rt.append(self.fence_records(group, member_id))
        self._cancel_timers(group_id, member_id)

    def _schedule_session_timeout(self, group_id: str, member_id: str) -> None:
        self.rt.timers.schedule(
            ("consumer-session", group_id, member_id),
            self.rt.deadline_in(self.config.consumer_session_timeout_ms),
            lambda: self._fence(group_id, member_id, "its session expired"),
        )

    def _schedule_rebalance_timeout(self, group_id: str, member: ConsumerGroupMember) -> None:
        member_id, epoch, timeout = member.member_id, member.member_epoch, member.rebalance_timeout_ms
        self.rt.timers.schedule(
            ("consumer-rebalance", group_id, member_id),
            self.rt.deadline_in(timeout),
            lambda: self._fence(group_id, member_id, f"it did not revoke within {timeout} ms", epoch),
        )


def _with_subscription(member: ConsumerGroupMember, req: ConsumerGroupHeartbeatRequest) -> ConsumerGroupMember:
    """The member with what the request changes (None and -1 leave a field as it was)."""
    changes: dict[str, Any] = {"client_id": req.client_id, "client_host": req.client_host}
    if req.instance_id is not None:
        changes["instance_id"] = req.instance_id
    if req.rack_id is not None:
        changes["rack_id"] = req.rack_id
    if req.rebalance_timeout_ms != -1:
        changes["rebalance_timeout_ms"] = req.rebalance_timeout_ms
    if req.server_assignor is not None:
        changes["server_assignor"] = req.server_assignor
    if req.subscribed_topic_names is not None:
        changes["subscribed_topic_names"] = tuple(sorted(set(req.subscribed_topic_names)))
    if req.subscribed_topic_regex is not None:
        changes["subscribed_topic_regex"] = req.subscribed_topic_regex or None
    return dataclasses.replace(member, **changes)


def preferred_assignor(members: Any, assignors: tuple[str, ...] | list[str]) -> str:
    """The assignor most members ask for (Kafka's computePreferredServerAssignor), else the first of `assignors`.

    A tie goes to the assignor listed first in `assignors` (group.consumer.assignors). Kafka breaks a tie by
    the iteration order of its hash tables, which is not stable (docs/conformance.md, "Kept").
    """
    counts: dict[str, int] = {}
    for m in members:
        if m.server_assignor is not None:
            counts[m.server_assignor] = counts.get(m.server_assignor, 0) + 1
    if not counts:
        return assignors[0]
    rank = {name: i for i, name in enumerate(assignors)}
    return min(counts, key=lambda name: (-counts[name], rank.get(name, len(rank)), name))
