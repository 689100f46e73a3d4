"""Heartbeat and LeaveGroup of a classic group: a member says it is alive, or that it is going.

A heartbeat restarts the member's session timer and tells it whether a rebalance is under way; a
leave removes members (KIP-345 batch leave, by member id or static instance id) and rebalances
the rest. Expiry of a session that sees no heartbeat is rebalance.py's.
"""

from __future__ import annotations

from ..errors import Errors
from ..messages import (
    HeartbeatRequest,
    HeartbeatResponse,
    LeaveGroupRequest,
    LeaveGroupResponse,
    LeaveMemberResponse,
)
from ..shard.deferred import Deferred
from .group import ClassicGroup
from .rebalance import GroupRebalancer
from .store import COMPLETING, DEAD, EMPTY, PREPARING, STABLE

# One answer per error, shared (they are frozen): a batch of heartbeats pickles its NONEs as one object.
_HEARTBEAT_RESPONSES = {e: HeartbeatResponse(e) for e in Errors}


class HeartbeatLeaveHandler(GroupRebalancer):
    """GroupMetadataManager's Heartbeat and LeaveGroup."""

    def heartbeat(self, req: HeartbeatRequest) -> Deferred[HeartbeatResponse]:
        """Handle a Heartbeat: refresh the member's session and tell it whether to rejoin."""
        return self.rt.respond(_HEARTBEAT_RESPONSES[self._heartbeat(req)])

    def _heartbeat(self, req: HeartbeatRequest) -> Errors:
        group = self.groups.get(req.group_id)
        if group is None:
            return Errors.UNKNOWN_MEMBER_ID
        error = self._validate_generation(group, req)
        if error != Errors.NONE:
            return error
        if group.state is EMPTY:
            return Errors.UNKNOWN_MEMBER_ID
        self.refresh_session(group, req.member_id)
        return Errors.REBALANCE_IN_PROGRESS if group.state is PREPARING else Errors.NONE

    # --- LeaveGroup ------------------------------------------------------------------------

    def leave_group(self, req: LeaveGroupRequest) -> Deferred[LeaveGroupResponse]:
        """Handle a (batch) LeaveGroup by member id and/or static instance id."""
        group = self.groups.get(req.group_id)
        if group is None:
            responses = [
                LeaveMemberResponse(m.member_id, m.group_instance_id, Errors.UNKNOWN_MEMBER_ID) for m in req.members
            ]
            return self.rt.respond(LeaveGroupResponse(Errors.NONE, responses))
        if group.in_state(DEAD):
            return self.rt.respond(LeaveGroupResponse(Errors.COORDINATOR_NOT_AVAILABLE, []))
        responses = []
        removed = []
        for identity in req.members:
            error = self._leave_one(group, identity.member_id, identity.group_instance_id)
            responses.append(LeaveMemberResponse(identity.member_id, identity.group_instance_id, error))
            if error == Errors.NONE:
                removed.append(identity.member_id or identity.group_instance_id)
        if removed:
            reason = f"members left: {removed}"
            if group.in_state(STABLE, COMPLETING):
                self._maybe_prepare_rebalance_or_complete_join(group, reason)
            else:
                # Java: a leave never cuts the initial rebalance delay short (unlike an expiry).
                self._maybe_complete_join_phase(group)
        return self.rt.respond(LeaveGroupResponse(Errors.NONE, responses))

    def _leave_one(self, group: ClassicGroup, member_id: str, instance_id: str | None) -> Errors:
        if member_id == "":
            existing = group.static_member_id(instance_id)
            if existing is None:
                return Errors.UNKNOWN_MEMBER_ID
            self._drop_member(group, group.members[existing], answer=Errors.UNKNOWN_MEMBER_ID)
            return Errors.NONE
        if group.is_pending_member(member_id):
            group.remove(member_id)
            self._cancel_pending(group.group_id, member_id)
            return Errors.NONE
        error = self.validate_member(group, member_id, instance_id)
        if error == Errors.NONE:
            self._drop_member(group, group.members[member_id], answer=Errors.UNKNOWN_MEMBER_ID)
        return error
