"""The rebalance of a classic group: preparing it, completing its join phase, and the member timers.

Follows the Java group coordinator (GroupMetadataManager's classic-group paths): a rebalance moves a
group from Stable or Empty to PreparingRebalance, waits for its members to rejoin (KIP-134's initial
delay for a new group), starts the next generation and then waits for the members to sync. The
session timers that remove silent members, and the pending-sync timer that removes members that
never fetch their assignment, live here too, since each expiry may start or complete a rebalance.
"""

from __future__ import annotations

import logging
from typing import Callable

from ..errors import Errors
from ..messages import SyncGroupResponse
from ..responses import join_error, join_response, sync_error
from .group import NO_SESSION_DEADLINE, ClassicGroup, Member, session_deadline
from .store import COMPLETING, DEAD, EMPTY, PREPARING, STABLE, GroupStore

log = logging.getLogger(__name__)


def _heartbeat_key(group_id: str, member_id: str) -> tuple:
    """The timer of a pending member id (KIP-394); members share their group's session timer."""
    return ("heartbeat", group_id, member_id)


def _session_key(group_id: str) -> tuple:
    return ("session", group_id)


class _PendingExpiry:
    """A pending member id's timer action: three references, where a closure took about 300 bytes."""

    __slots__ = ("group_id", "manager", "member_id")

    def __init__(self, manager: GroupRebalancer, group_id: str, member_id: str) -> None:
        self.manager, self.group_id, self.member_id = manager, group_id, member_id

    def __call__(self) -> None:
        self.manager._expire_pending(self.group_id, self.member_id)


class _SessionScan:
    """A group's session timer action: remove the members whose sessions have ended."""

    __slots__ = ("group_id", "manager")

    def __init__(self, manager: GroupRebalancer, group_id: str) -> None:
        self.manager, self.group_id = manager, group_id

    def __call__(self) -> None:
        self.manager._expire_sessions(self.group_id)


def _join_key(group_id: str) -> tuple:
    return ("join", group_id)


def _sync_key(group_id: str) -> tuple:
    return ("sync", group_id)


class GroupRebalancer(GroupStore):
    """The rebalance state machine of the shard's classic groups and the timers that drive it."""

    def refresh_session(self, group: ClassicGroup, member_id: str) -> None:
        """Restart a member's session, as a heartbeat does."""
        member = group.members.get(member_id)
        if member is not None:
            self._schedule_heartbeat(group, member, member.session_timeout_ms)

    def mark_dead(self, group: ClassicGroup) -> None:
        """Move a group to Dead and drop its timers, before its tombstone is appended."""
        group.transition_to(DEAD, self.rt.now())
        self._cancel_group_timers(group)

    def on_loaded(self) -> None:
        """After replaying a log: every member must heartbeat within its session; oversize groups rebalance."""
        for group in list(self.groups.values()):
            for member in group.members.values():
                self._schedule_heartbeat(group, member, member.session_timeout_ms)
            if len(group.members) > self.config.max_size:
                self._prepare_rebalance(group, "loaded group exceeds group.max.size")

    # --- rebalance machinery ---------------------------------------------------------------

    def _maybe_prepare_rebalance_or_complete_join(self, group: ClassicGroup, reason: str) -> None:
        if group.can_rebalance():
            self._prepare_rebalance(group, reason)
        else:
            self._maybe_complete_join_phase(group)

    def _maybe_complete_join_phase(self, group: ClassicGroup) -> None:
        """Complete the join phase early once everyone has joined (never during the initial delay)."""
        if group.in_state(PREPARING) and group.previous_state != EMPTY and group.has_all_members_joined():
            self._complete_join(group)

    def _prepare_rebalance(self, group: ClassicGroup, reason: str) -> None:
        if group.in_state(COMPLETING):
            self._reset_and_propagate_assignment(group, Errors.REBALANCE_IN_PROGRESS)
        group.pending_sync_members.clear()
        self.rt.timers.cancel(_sync_key(group.group_id))
        initial = group.in_state(EMPTY)
        group.transition_to(PREPARING, self.rt.now())
        self.rt.stats.rebalances += 1
        if group.rebalance_started_ms is None:
            group.rebalance_started_ms = self.rt.now()  # a restarted rebalance keeps its first start
        log.info("preparing to rebalance group %s (generation %d): %s", group.group_id, group.generation_id, reason,
                 extra={"group": group.group_id})
        group_id = group.group_id
        if initial:
            delay = self.config.initial_rebalance_delay_ms
            remaining = max(group.rebalance_timeout_ms() - delay, 0)
            self._schedule_initial_join(group_id, delay, remaining)
        elif group.has_all_members_joined():
            self._complete_join(group)
        else:
            self.rt.timers.schedule(
                _join_key(group_id),
                self.rt.deadline_in(group.rebalance_timeout_ms()),
                lambda: self._complete_join_by_id(group_id),
            )

    def _schedule_initial_join(self, group_id: str, delay: int, remaining: int) -> None:
        self.rt.timers.schedule(
            _join_key(group_id),
            self.rt.deadline_in(delay),
            lambda: self._initial_join_expired(group_id, delay, remaining),
        )

    def _initial_join_expired(self, group_id: str, delay: int, remaining: int) -> None:
        """KIP-134: wait while new members keep arriving, but never past the rebalance timeout."""
        group = self.groups.get(group_id)
        if group is None:
            return
        if group.new_member_added and remaining != 0:
            group.new_member_added = False
            new_delay = min(self.config.initial_rebalance_delay_ms, remaining)
            self._schedule_initial_join(group_id, new_delay, max(remaining - delay, 0))
        else:
            self._complete_join(group)

    def _complete_join_by_id(self, group_id: str) -> None:
        group = self.groups.get(group_id)
        if group is not None:
            self._complete_join(group)

    def _complete_join(self, group: ClassicGroup) -> None:
        """End the join phase: drop dynamic members that did not rejoin and start the next generation."""
        group_id = group.group_id
        self.rt.timers.cancel(_join_key(group_id))
        for m in group.not_yet_rejoined():
            if not m.is_static:
                self._drop_member(group, m, answer=Errors.UNKNOWN_MEMBER_ID)
        if group.in_state(DEAD) or group.state != PREPARING:
            return
        if not group.maybe_elect_new_joined_leader() and group.members:
            # Only static members that have not rejoined remain: wait another rebalance timeout.
            log.warning("group %s could not complete its rebalance: no member rejoined", group_id,
                        extra={"group": group_id})
            self.rt.timers.schedule(
                _join_key(group_id),
                self.rt.deadline_in(group.rebalance_timeout_ms()),
                lambda: self._complete_join_by_id(group_id),
            )
            return
        group.init_next_generation(self.rt.now())
        if group.in_state(EMPTY):
            group.rebalance_started_ms = None
            log.info("group %s with generation %d is now empty", group_id, group.generation_id,
                     extra={"group": group_id})
            self.rt.append([self.group_record(group)])
            return
        log.info(
            "stabilized group %s generation %d with %d members",
            group_id,
            group.generation_id,
            len(group.members),
            extra={"group": group_id},
        )
        for member in group.members.values():
            join = group.take_join(member)
            if join is not None:
                self.rt.complete(join, join_response(group, member))
            self._schedule_heartbeat(group, member, member.session_timeout_ms)
            member.is_new = False
            group.pending_sync_members.add(member.member_id)
        generation = group.generation_id
        self.rt.timers.schedule(
            _sync_key(group_id),
            self.rt.deadline_in(group.rebalance_timeout_ms()),
            lambda: self._expire_pending_sync(group_id, generation),
        )

    def synced(self, group: ClassicGroup, member_id: str) -> None:
        """The member has asked for its assignment. Once no member holds the sync phase open, the sync timer has
        nothing left to expire and is cancelled, as Kafka's removePendingSyncMember does: left armed, it fired a
        rebalance timeout after every rebalance and copied the group for nothing."""
        group.drop_pending_sync(member_id)
        if not group.pending_sync_members:
            self.rt.timers.cancel(_sync_key(group.group_id))

    def _expire_pending_sync(self, group_id: str, generation: int) -> None:
        group = self.groups.get(group_id)
        if group is None or group.generation_id != generation:
            return
        if group.in_state(COMPLETING, STABLE) and group.pending_sync_members:
            late = list(group.pending_sync_members)
            for member_id in late:
                member = group.members.get(member_id)
                if member is not None:
                    self._drop_member(group, member, answer=Errors.UNKNOWN_MEMBER_ID)
            log.info("group %s removed members that did not sync in time: %s", group_id, late,
                     extra={"group": group_id})
            self._prepare_rebalance(group, "pending sync expired")

    def _reset_and_propagate_assignment(self, group: ClassicGroup, error: Errors) -> None:
        for m in group.members.values():
            m.assignment = b""
        self._propagate_assignment(group, error)

    def _propagate_assignment(self, group: ClassicGroup, error: Errors) -> None:
        """Answer every parked SyncGroup; members that got an assignment restart their session."""
        for member in group.members.values():
            sync = group.take_sync(member)
            if sync is None:
                continue
            if error == Errors.NONE:
                response = SyncGroupResponse(Errors.NONE, group.protocol_type, group.protocol_name, member.assignment)
            else:
                response = SyncGroupResponse(error, None, None, member.assignment)
            self.rt.complete(sync, response)
            self._schedule_heartbeat(group, member, member.session_timeout_ms)

    def _drop_member(self, group: ClassicGroup, member: Member, answer: Errors) -> None:
        """Remove a member, answering its parked requests (its session goes with it)."""
        join = group.take_join(member)
        if join is not None:
            self.rt.complete(join, join_error(answer))
        sync = group.take_sync(member)
        if sync is not None:
            self.rt.complete(sync, sync_error(answer))
        group.remove(member.member_id)

    def _remove_member_and_update_group(self, group: ClassicGroup, member: Member, reason: str) -> None:
        self._drop_member(group, member, answer=Errors.UNKNOWN_MEMBER_ID)
        if group.in_state(STABLE, COMPLETING):
            self._maybe_prepare_rebalance_or_complete_join(group, reason)
        elif group.in_state(PREPARING) and group.has_all_members_joined():
            self._complete_join(group)

    # --- session timers --------------------------------------------------------------------
    # A member's session ends at its `session_deadline_ms`; one timer per group fires at the earliest
    # of them. A heartbeat moves only its member's deadline, so the timer may fire early: it then
    # removes no one and is armed again for the earliest deadline left.

    def _schedule_heartbeat(self, group: ClassicGroup, member: Member, timeout_ms: int) -> None:
        """(Re)start a member's session: it ends `timeout_ms` from now unless restarted again."""
        deadline = self.rt.deadline_in(timeout_ms)
        member.session_deadline_ms = deadline
        self._arm_session_timer(group.group_id, deadline)

    def _arm_session_timer(self, group_id: str, deadline: int) -> None:
        """Make the group's session timer fire no later than `deadline`."""
        key, timers = _session_key(group_id), self.rt.timers
        armed = timers.deadline(key)
        if armed is None or deadline < armed:
            timers.schedule(key, deadline, _SessionScan(self, group_id))

    def session_timer_early(self, group_id: str, scan: Callable[[], None]) -> bool:
        """Whether the group's session timer, firing now, found every session still running (heartbeats moved
        them on since it was armed): it is then armed again with `scan` for the earliest one, and nothing else
        runs. Most fires are early, and more so when members back off under a coordinator's throttle."""
        group = self.groups.get(group_id)
        if group is None or group.state is DEAD:
            return False
        earliest = min(map(session_deadline, group.members.values()), default=NO_SESSION_DEADLINE)
        if earliest == NO_SESSION_DEADLINE or earliest <= self.rt.due():
            return False
        self.rt.timers.schedule(_session_key(group_id), earliest, scan)
        return True

    def _expire_sessions(self, group_id: str) -> None:
        """Remove the members whose sessions have ended, in deadline order, and arm the timer for the next."""
        group = self.groups.get(group_id)
        if group is None or group.in_state(DEAD):
            return
        now = self.rt.due()
        earliest = min(map(session_deadline, group.members.values()), default=NO_SESSION_DEADLINE)
        if earliest <= now:
            self._end_sessions(group, now)
            if self.groups.get(group_id) is not group or group.in_state(DEAD):
                return
            earliest = min(map(session_deadline, group.members.values()), default=NO_SESSION_DEADLINE)
        if earliest != NO_SESSION_DEADLINE:
            self._arm_session_timer(group_id, earliest)

    def _end_sessions(self, group: ClassicGroup, now: int) -> None:
        """Remove the members whose sessions ended by `now`, in deadline order (a parked one is kept)."""
        ended = sorted((m for m in group.members.values() if m.session_deadline_ms <= now), key=session_deadline)
        for member in ended:
            # Removing an earlier member may have completed a join, which restarts the others' sessions.
            if group.members.get(member.member_id) is not member or member.session_deadline_ms > now:
                continue
            if member.has_satisfied_heartbeat():
                member.session_deadline_ms = NO_SESSION_DEADLINE  # parked: its answer restarts its session
                continue
            log.info("member %s of group %s failed its session; removing it", member.member_id, group.group_id,
                     extra={"group": group.group_id, "member": member.member_id})
            self.rt.stats.session_expirations += 1
            self._remove_member_and_update_group(group, member, f"session of {member.member_id} expired")

    def _schedule_pending(self, group_id: str, member_id: str, timeout_ms: int) -> None:
        """Give a pending member id `timeout_ms` to join with it before it is forgotten."""
        self.rt.timers.schedule(_heartbeat_key(group_id, member_id), self.rt.deadline_in(timeout_ms),
                                _PendingExpiry(self, group_id, member_id))

    def _cancel_pending(self, group_id: str, member_id: str) -> None:
        self.rt.timers.cancel(_heartbeat_key(group_id, member_id))

    def _expire_pending(self, group_id: str, member_id: str) -> None:
        group = self.groups.get(group_id)
        if group is None or group.in_state(DEAD) or not group.is_pending_member(member_id):
            return
        log.info("pending member %s of group %s expired", member_id, group_id,
                 extra={"group": group_id, "member": member_id})
        group.remove(member_id)
        if group.in_state(PREPARING) and group.has_all_members_joined():
            self._complete_join(group)

    def _cancel_group_timers(self, group: ClassicGroup) -> None:
        timers = self.rt.timers
        timers.cancel(_join_key(group.group_id))
        timers.cancel(_sync_key(group.group_id))
        timers.cancel(_session_key(group.group_id))
        for member_id in group.pending_members:
            timers.cancel(_heartbeat_key(group.group_id, member_id))
