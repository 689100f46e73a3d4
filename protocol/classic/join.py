"""JoinGroup of a classic group: the two-phase join of a new member, rejoins, and static members.

Follows the Java group coordinator (GroupMetadataManager's classic-group join paths, KIP-394's
member id round trip and KIP-345's static membership). Every join parks until the join phase of
the rebalance completes (rebalance.py), except the answers it can give at once.
"""

from __future__ import annotations

import logging

from ..errors import Errors
from ..messages import JoinGroupRequest, JoinGroupResponse
from ..responses import join_error, join_response, sync_error
from ..shard.deferred import Deferred
from ..shard.log import RecordBatchTooLarge
from .group import ClassicGroup, Member, generate_member_id
from .rebalance import GroupRebalancer
from .store import COMPLETING, DEAD, EMPTY, PREPARING, STABLE

log = logging.getLogger(__name__)


class JoinGroupHandler(GroupRebalancer):
    """GroupMetadataManager's JoinGroup: admits, adds, updates or replaces members, then rebalances."""

    def join_group(self, req: JoinGroupRequest) -> Deferred[JoinGroupResponse]:
        """Handle a JoinGroup: the first or second phase of a join, or a rejoin."""
        cfg = self.config
        if not cfg.min_session_timeout_ms <= req.session_timeout_ms <= cfg.max_session_timeout_ms:
            return self.rt.respond(join_error(Errors.INVALID_SESSION_TIMEOUT, req.member_id))
        group = self.groups.get(req.group_id)
        if group is None:
            if req.member_id:
                return self.rt.respond(join_error(Errors.UNKNOWN_MEMBER_ID, req.member_id))
            group = ClassicGroup(req.group_id, self.rt.now())
            # Java writes an empty group record so that a new group survives a restart.
            self.rt.append([self.group_record(group)])
            group = self.groups[req.group_id]
        result: Deferred[JoinGroupResponse] = Deferred()
        if not self._accept_joining_member(group, req.member_id):
            group.remove(req.member_id)
            self.rt.complete(result, join_error(Errors.GROUP_MAX_SIZE_REACHED))
        elif req.member_id == "":
            self._join_new_member(group, req, result)
        else:
            self._join_existing_member(group, req, result)
        return result

    def _accept_joining_member(self, group: ClassicGroup, member_id: str) -> bool:
        max_size = self.config.max_size
        if group.in_state(EMPTY, DEAD):
            return True
        member = group.members.get(member_id)
        if group.in_state(PREPARING):
            return (member is not None and member.is_awaiting_join) or group.num_awaiting_join < max_size
        return member is not None or len(group.members) < max_size

    def _join_new_member(self, group: ClassicGroup, req: JoinGroupRequest, result: Deferred) -> None:
        if group.in_state(DEAD):
            return self.rt.complete(result, join_error(Errors.COORDINATOR_NOT_AVAILABLE))
        if not group.supports_protocols(req.protocol_type, (n for n, _ in req.protocols)):
            return self.rt.complete(result, join_error(Errors.INCONSISTENT_GROUP_PROTOCOL))
        new_id = generate_member_id(req.client_id, req.group_instance_id)
        if req.group_instance_id is not None:
            existing = group.static_member_id(req.group_instance_id)
            if existing is not None:
                return self._replace_static_member(group, req, existing, new_id, result)
            return self._add_member_and_rebalance(group, req, new_id, result)
        if req.require_known_member_id:
            group.pending_members.add(new_id)
            self._schedule_pending(group.group_id, new_id, req.session_timeout_ms)
            return self.rt.complete(result, join_error(Errors.MEMBER_ID_REQUIRED, new_id))
        return self._add_member_and_rebalance(group, req, new_id, result)

    def _join_existing_member(self, group: ClassicGroup, req: JoinGroupRequest, result: Deferred) -> None:
        member_id = req.member_id
        if group.in_state(DEAD):
            return self.rt.complete(result, join_error(Errors.COORDINATOR_NOT_AVAILABLE, member_id))
        if not group.supports_protocols(req.protocol_type, (n for n, _ in req.protocols)):
            return self.rt.complete(result, join_error(Errors.INCONSISTENT_GROUP_PROTOCOL, member_id))
        if group.is_pending_member(member_id):
            if req.group_instance_id is not None:
                # A pending member id was handed out to a dynamic member; a static one cannot use it.
                return self.rt.complete(result, join_error(Errors.UNKNOWN_MEMBER_ID, member_id))
            self._cancel_pending(group.group_id, member_id)
            return self._add_member_and_rebalance(group, req, member_id, result)
        error = self.validate_member(group, member_id, req.group_instance_id)
        if error != Errors.NONE:
            return self.rt.complete(result, join_error(error, member_id))
        member = group.members[member_id]
        if group.in_state(PREPARING):
            return self._update_member_and_rebalance(group, member, req, result)
        if group.in_state(COMPLETING):
            if member.matches(req.protocols):
                return self.rt.complete(result, join_response(group, member))
            return self._update_member_and_rebalance(group, member, req, result)
        if group.in_state(STABLE):
            if group.is_leader(member_id) or not member.matches(req.protocols):
                return self._update_member_and_rebalance(group, member, req, result)
            return self.rt.complete(result, join_response(group, member))
        return self.rt.complete(result, join_error(Errors.UNKNOWN_MEMBER_ID, member_id))

    @staticmethod
    def _rebalance_timeout(req: JoinGroupRequest) -> int:
        return req.session_timeout_ms if req.rebalance_timeout_ms == -1 else req.rebalance_timeout_ms

    def _add_member_and_rebalance(
        self, group: ClassicGroup, req: JoinGroupRequest, member_id: str, result: Deferred
    ) -> None:
        member = Member(
            member_id,
            req.group_instance_id,
            req.client_id,
            req.client_host,
            self._rebalance_timeout(req),
            req.session_timeout_ms,
            req.protocol_type,
            group.shared_protocols(req.protocols),
        )
        member.is_new = True
        if group.in_state(PREPARING) and group.previous_state == EMPTY:
            group.new_member_added = True
        group.add(member, result)
        # New members cannot heartbeat while parked, so they get the new-member join timeout.
        self._schedule_heartbeat(group, member, self.config.new_member_join_timeout_ms)
        self._maybe_prepare_rebalance_or_complete_join(group, f"adding new member {member_id}")

    def _update_member_and_rebalance(
        self, group: ClassicGroup, member: Member, req: JoinGroupRequest, result: Deferred
    ) -> None:
        replaced = group.update_member(
            member,
            group.shared_protocols(req.protocols),
            self._rebalance_timeout(req),
            req.session_timeout_ms,
            result,
        )
        if replaced is not None:
            # Kafka drops the earlier parked JoinGroup unanswered; a Ray caller would hang on it.
            self.rt.complete(replaced, join_error(Errors.REBALANCE_IN_PROGRESS, member.member_id))
        self._maybe_prepare_rebalance_or_complete_join(group, f"member {member.member_id} rejoined")

    def _replace_static_member(
        self, group: ClassicGroup, req: JoinGroupRequest, old_id: str, new_id: str, result: Deferred
    ) -> None:
        instance_id = req.group_instance_id
        assert instance_id is not None
        old, member = group.replace_static_member(instance_id, old_id, new_id)
        self._fence(group, old)
        self._schedule_heartbeat(group, member, member.session_timeout_ms)
        group.update_member(
            member,
            group.shared_protocols(req.protocols),
            self._rebalance_timeout(req),
            req.session_timeout_ms,
            result,
        )
        if group.in_state(STABLE):
            if group.protocol_name == group.select_protocol():
                # The group's protocol does not change: persist the new member id, no rebalance.
                assignments = {m.member_id: m.assignment for m in group.members.values()}
                try:
                    self.rt.append([self.group_record(group, assignments)])
                except RecordBatchTooLarge as e:
                    log.error("group %s: static member %s cannot be stored: %s", group.group_id, instance_id, e,
                              extra={"group": group.group_id, "member": member.member_id})
                    self._revert_static_replacement(group, instance_id, old, member, Errors.UNKNOWN_SERVER_ERROR)
                    return
                self.rt.when_durable(lambda: self._complete_static_rejoin(group, member))
            else:
                self._maybe_prepare_rebalance_or_complete_join(group, f"static member {instance_id} changed")
        elif group.in_state(COMPLETING):
            # The leader may be assigning for the old member id: rebalance again.
            self._prepare_rebalance(group, f"static member {instance_id} rejoined during sync")
        else:
            self._maybe_complete_join_phase(group)

    def _revert_static_replacement(
        self, group: ClassicGroup, instance_id: str, old: Member, member: Member, error: Errors
    ) -> None:
        """The replacement could not be stored: the old member id is valid again (Java's revert)."""
        join = group.update_member(member, old.protocols, old.rebalance_timeout_ms, old.session_timeout_ms, None)
        _, restored = group.replace_static_member(instance_id, member.member_id, old.member_id)
        self._schedule_heartbeat(group, restored, restored.session_timeout_ms)
        if join is not None:
            response = JoinGroupResponse(
                error, group.generation_id, group.protocol_type, group.protocol_name, group.leader_id or "", "", []
            )
            self.rt.complete(join, response)

    def _complete_static_rejoin(self, group: ClassicGroup, member: Member) -> None:
        if self.groups.get(group.group_id) is not group or group.members.get(member.member_id) is not member:
            return
        join = group.take_join(member)
        if join is None:
            return
        join.complete(join_response(group, member, skip=group.is_leader(member.member_id)))

    def _fence(self, group: ClassicGroup, old: Member) -> None:
        """Answer the parked requests of a replaced static member with FENCED_INSTANCE_ID."""
        join = group.take_join(old)
        if join is not None:
            self.rt.complete(join, join_error(Errors.FENCED_INSTANCE_ID, old.member_id))
        sync = group.take_sync(old)
        if sync is not None:
            self.rt.complete(sync, sync_error(Errors.FENCED_INSTANCE_ID))
