"""One registry of a shard's groups, classic and consumer (KIP-848) alike: they share Kafka's group-id space.

A group id names at most one group, of either protocol. Each manager sees its own kind through a typed
view (`registry.of_type(ClassicGroup)`), which reads and writes the one dict underneath; turning an empty
group of one protocol into a group of the other is `conversion_records`, whose rules the coordinator
provides in one place (shard/conversions.py), so neither manager needs to know the other's groups.
"""

from __future__ import annotations

import logging
from typing import Any, Callable, Generic, Iterator, MutableMapping, TypeVar

from ..records import Record
from ..values import GroupType

log = logging.getLogger(__name__)


G = TypeVar("G")

# (the group now under the id, the type it is to become) -> the records that convert it, or None if it cannot be.
Converter = Callable[[Any, GroupType], "list[Record] | None"]


class GroupRegistry:
    """Every group of one shard by id, whichever its protocol."""

    def __init__(self) -> None:
        self._groups: dict[str, Any] = {}
        self._converter: Converter | None = None

    def get(self, group_id: str) -> Any:
        """The group with this id (of either protocol), or None."""
        return self._groups.get(group_id)

    def __contains__(self, group_id: object) -> bool:
        return group_id in self._groups

    def __len__(self) -> int:
        return len(self._groups)

    def __iter__(self) -> Iterator[str]:
        return iter(self._groups)

    def values(self) -> list[Any]:
        """Every group, as a list (a snapshot)."""
        return list(self._groups.values())

    def of_type(self, kind: type[G]) -> TypedGroups[G]:
        """The groups of one class (ClassicGroup or ConsumerGroup) as a mapping backed by this registry."""
        return TypedGroups(self._groups, kind)

    def claim(self, group_id: str, kind: type[G], factory: Callable[[], G]) -> G:
        """The `kind` group with this id, made by `factory` if there is none; replay's conversion.

        A record of one protocol for an id that another protocol's group holds means the log moved the id
        over (the conversion's tombstone may have been compacted away): the new group replaces the old one.
        """
        group = self._groups.get(group_id)
        if isinstance(group, kind):
            return group
        if group is not None and not group.is_empty():
            log.warning("group %s: a %s record replaces a %s group that has members", group_id, kind.__name__,
                        group.group_type)
        new = self._groups[group_id] = factory()
        return new

    # --- conversion between the protocols ------------------------------------------------------------

    def set_converter(self, converter: Converter) -> None:
        """Install the rules by which a group of one protocol becomes one of the other (the coordinator's)."""
        self._converter = converter

    def conversion_records(self, group_id: str, to: GroupType) -> list[Record] | None:
        """The records that turn the group `group_id` into an empty group of type `to`, or None if it cannot be.

        None also when no converter is installed, or when there is no group under the id.
        """
        group = self._groups.get(group_id)
        if group is None or self._converter is None:
            return None
        return self._converter(group, to)


class TypedGroups(MutableMapping[str, G], Generic[G]):
    """The groups of one class, as a mapping over the registry's one dict (writes go to that dict)."""

    __slots__ = ("_groups", "_kind")

    def __init__(self, groups: dict[str, Any], kind: type[G]) -> None:
        self._groups = groups
        self._kind = kind

    def get(self, group_id: str, default: Any = None) -> Any:  # one lookup, not the mixin's two
        group = self._groups.get(group_id)
        return group if isinstance(group, self._kind) else default

    def __getitem__(self, group_id: str) -> G:
        group = self._groups[group_id]
        if not isinstance(group, self._kind):
            raise KeyError(group_id)
        return group

    def __setitem__(self, group_id: str, group: G) -> None:
        self._groups[group_id] = group

    def __delitem__(self, group_id: str) -> None:
        self[group_id]  # KeyError unless it is one of ours
        del self._groups[group_id]

    def pop(self, group_id: str, default: Any = None) -> Any:
        group = self._groups.get(group_id)
        if not isinstance(group, self._kind):
            return default
        del self._groups[group_id]
        return group

    def __contains__(self, group_id: object) -> bool:
        return isinstance(group_id, str) and isinstance(self._groups.get(group_id), self._kind)

    def __iter__(self) -> Iterator[str]:
        kind = self._kind
        return iter([gid for gid, g in self._groups.items() if isinstance(g, kind)])

    def __len__(self) -> int:
        kind = self._kind
        return sum(1 for g in self._groups.values() if isinstance(g, kind))

    def values(self) -> list[G]:  # type: ignore[override]  # a list, not a view: callers change groups as they go
        """The groups of this class, as a list (a snapshot)."""
        kind = self._kind
        return [g for g in self._groups.values() if isinstance(g, kind)]

    def items(self) -> list[tuple[str, G]]:  # type: ignore[override]  # a list, not a view (as values)
        """(id, group) of this class, as a list (a snapshot)."""
        kind = self._kind
        return [(gid, g) for gid, g in self._groups.items() if isinstance(g, kind)]
