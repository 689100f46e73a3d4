"""SyncGroup of a classic group: members fetch their assignment, the leader's is stored first.

Follows the Java group coordinator: while the group is CompletingRebalance every SyncGroup parks;
the leader's assignment is appended as a GroupMetadata record, and once it is durable the group
becomes Stable and every parked SyncGroup gets its member's assignment.
"""

from __future__ import annotations

import logging

from ..errors import Errors
from ..messages import SyncGroupRequest, SyncGroupResponse
from ..responses import sync_error
from ..shard.deferred import Deferred
from ..shard.log import RecordBatchTooLarge
from .group import ClassicGroup
from .rebalance import GroupRebalancer
from .store import COMPLETING, PREPARING, STABLE

log = logging.getLogger(__name__)


class SyncGroupHandler(GroupRebalancer):
    """GroupMetadataManager's SyncGroup: hands out the current generation's assignments."""

    def sync_group(self, req: SyncGroupRequest) -> Deferred[SyncGroupResponse]:
        """Handle a SyncGroup: park until the leader's assignment is durable, or answer at once."""
        group = self.groups.get(req.group_id)
        if group is None:
            return self.rt.respond(sync_error(Errors.UNKNOWN_MEMBER_ID))
        error = self._validate_sync(group, req)
        if error != Errors.NONE:
            return self.rt.respond(sync_error(error))
        if group.in_state(PREPARING):
            return self.rt.respond(sync_error(Errors.REBALANCE_IN_PROGRESS))
        member = group.members[req.member_id]
        self.synced(group, req.member_id)
        if group.in_state(STABLE):
            return self.rt.respond(
                SyncGroupResponse(Errors.NONE, group.protocol_type, group.protocol_name, member.assignment)
            )
        # CompletingRebalance: park; the leader's assignment completes everyone once durable.
        result: Deferred[SyncGroupResponse] = Deferred()
        previous = member.awaiting_sync
        member.awaiting_sync = result
        if previous is not None:
            self.rt.complete(previous, sync_error(Errors.REBALANCE_IN_PROGRESS))
        if group.is_leader(req.member_id):
            assignments = {mid: bytes(req.assignments.get(mid, b"")) for mid in group.members}
            missing = [mid for mid in group.members if mid not in req.assignments]
            if missing:
                log.warning("leader of %s sent no assignment for %s; they get empty ones", group.group_id, missing,
                            extra={"group": group.group_id, "member": req.member_id})
            generation = group.generation_id
            try:
                self.rt.append([self.group_record(group, assignments)])
            except RecordBatchTooLarge:
                # Java: every parked SyncGroup gets the error, and the group rebalances; the shard answers this one.
                self._reset_and_propagate_assignment(group, Errors.UNKNOWN_SERVER_ERROR)
                self._maybe_prepare_rebalance_or_complete_join(group, "the group's assignment is too large to store")
                raise
            self.rt.when_durable(lambda: self._on_assignment_durable(group, generation, assignments))
        return result

    def _validate_sync(self, group: ClassicGroup, req: SyncGroupRequest) -> Errors:
        error = self._validate_generation(group, req)
        if error != Errors.NONE:
            return error
        if _inconsistent(req.protocol_type, group.protocol_type) or _inconsistent(
            req.protocol_name, group.protocol_name
        ):
            return Errors.INCONSISTENT_GROUP_PROTOCOL
        return Errors.NONE

    def _on_assignment_durable(self, group: ClassicGroup, generation: int, assignments: dict[str, bytes]) -> None:
        """The leader's assignment is on disk: hand it out and become Stable, if nothing changed since."""
        if self.groups.get(group.group_id) is not group:
            return
        if not group.in_state(COMPLETING) or group.generation_id != generation:
            return
        for mid, member in group.members.items():
            member.assignment = assignments.get(mid, b"")
        group.transition_to(STABLE, self.rt.now())
        self._record_completed_rebalance(group)
        self._propagate_assignment(group, Errors.NONE)

    def _record_completed_rebalance(self, group: ClassicGroup) -> None:
        """Count a rebalance that reached Stable, and how long it took from its first join."""
        stats = self.rt.stats
        stats.completed_rebalances += 1
        started = group.rebalance_started_ms
        if started is not None:
            stats.rebalance_durations_ms.append(max(0, self.rt.now() - started))
        group.rebalance_started_ms = None


def _inconsistent(requested: str | None, current: str | None) -> bool:
    return requested is not None and current is not None and requested != current
