"""A copy of one classic group's in-memory state and timers, to put back when its records are refused.

Kafka's Java coordinator runtime appends an operation's records first and reverts the state the
operation touched if the append fails, so a failed operation leaves no trace. Membership changes
of a classic group are partly in memory only (parked requests, pending members, timers); this
snapshot is how the shard puts them back after the log refuses the records they lead to.
"""

from __future__ import annotations

import copy
from typing import Any, Callable, Hashable, MutableMapping

from ..shard.purgatory import Purgatory
from .group import ClassicGroup, Member


def group_timer_keys(group_id: str, pending_ids: list[str]) -> list[tuple]:
    """The purgatory keys of a group's timers: join, pending sync, sessions, and one per pending member id."""
    return [("join", group_id), ("sync", group_id), ("session", group_id),
            *(("heartbeat", group_id, m) for m in pending_ids)]


class GroupSnapshot:
    """The state of one group (or its absence) and of its timers at one moment."""

    def __init__(self, groups: MutableMapping[str, ClassicGroup], group_id: str, timers: Purgatory) -> None:
        self._groups = groups
        self._group_id = group_id
        self._timers = timers
        group = groups.get(group_id)
        self._group = group
        self._fields: dict[str, Any] | None = None
        self._members: dict[str, tuple[Member, dict[str, Any]]] = {}
        ids: list[str] = []
        if group is not None:
            self._fields = {k: copy.copy(v) for k, v in vars(group).items()}
            self._members = {mid: (m, {s: getattr(m, s) for s in Member.__slots__}) for mid, m in group.members.items()}
            ids = list(group.pending_members)
        self._timer_state = {k: timers.entry(k) for k in group_timer_keys(group_id, ids)}

    def restore(self) -> None:
        """Put the group and its timers back as they were when the snapshot was taken."""
        group = self._group
        current = self._groups.get(self._group_id)
        later_ids = list(current.pending_members) if current is not None else []
        if group is None:
            self._groups.pop(self._group_id, None)
        else:
            assert self._fields is not None
            vars(group).update(self._fields)
            group.members = {}
            for mid, (member, slots) in self._members.items():
                for name, value in slots.items():
                    setattr(member, name, value)
                group.members[mid] = member
            self._groups[self._group_id] = group
        for key in group_timer_keys(self._group_id, later_ids):
            if key not in self._timer_state:
                self._timers.cancel(key)
        for key, entry in self._timer_state.items():
            _restore_timer(self._timers, key, entry)


def _restore_timer(timers: Purgatory, key: Hashable, entry: tuple[int, Callable[[], None]] | None) -> None:
    if entry is None:
        timers.cancel(key)
    else:
        timers.cancel(key)
        timers.schedule(key, *entry)
