"""What the consumer groups see of the shard's classic groups, with which they share Kafka's group-id space.

The shard passes its classic manager where these are expected, so `consumer/` never imports `classic/`.
"""

from __future__ import annotations

from typing import Any, MutableMapping, Protocol

from ..records import Record
from ..values import GroupState


class ClassicGroupView(Protocol):
    """A classic group, as far as a consumer group needs to know it."""

    def in_state(self, state: GroupState) -> bool:
        """Whether the group is in `state`."""
        ...


class ClassicGroups(Protocol):
    """The shard's classic groups by id, and the record that deletes one."""

    @property
    def groups(self) -> MutableMapping[str, Any]:
        """The classic groups by id."""
        ...

    def get_group(self, group_id: str) -> ClassicGroupView | None:
        """The classic group with this id, or None."""
        ...

    def group_tombstone(self, group_id: str) -> Record:
        """The record that deletes a classic group."""
        ...
