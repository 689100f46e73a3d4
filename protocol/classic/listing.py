"""ListGroups and DescribeGroups: read-only views of the shard's classic groups."""

from __future__ import annotations

from typing import Sequence

from ..errors import Errors
from ..messages import (
    DescribedGroup,
    DescribedRow,
    DescribeGroupsRequest,
    DescribeGroupsResponse,
    ListedRow,
    described_group,
    described_member,
)
from ..shard.deferred import Deferred
from .group import ClassicGroup, GroupState
from .store import DEAD, STABLE, GroupStore

_STATE_NAMES = {s: s.value for s in GroupState}  # Enum's .value is a descriptor call: a listing reads it per group


class GroupListingHandler(GroupStore):
    """GroupMetadataManager's ListGroups and DescribeGroups."""

    def listed_rows(self, states: set[str], types: set[str]) -> list[ListedRow]:
        """ListGroups entries of the classic groups as rows (group id, protocol type, state, "classic"), filtered by
        lower-cased state and type names."""
        if types and "classic" not in types:
            return []
        names = _STATE_NAMES
        wanted = {s for s, name in names.items() if not states or name.lower() in states}
        return [(g.group_id, g.protocol_type or "", names[g.state], "classic")
                for g in self.groups.values() if g.state in wanted]

    def describe_groups(self, req: DescribeGroupsRequest) -> Deferred[DescribeGroupsResponse]:
        """Describe groups in request order; an unknown group is NONE with state "Dead"."""
        return self.rt.respond(DescribeGroupsResponse([self.describe(gid) for gid in req.group_ids]))

    def describe(self, group_id: str) -> DescribedGroup:
        """One group's description (Stable: with member metadata; otherwise assignments only)."""
        _, _, state, protocol_type, protocol_data, members = self.described_rows((group_id,))[0]
        return described_group(Errors.NONE, group_id, state, protocol_type, protocol_data,
                               [described_member(*m) for m in members])

    def describe_groups_rows(self, req: DescribeGroupsRequest) -> Deferred[list[DescribedRow]]:
        """describe_groups answered as the flat rows its response pickles to, for a fan-out that passes them on."""
        return self.rt.respond(self.described_rows(req.group_ids))

    def described_rows(self, group_ids: Sequence[str]) -> list[DescribedRow]:
        """The descriptions of `group_ids` as the flat rows they cross Ray in, built without the objects: (error
        code, group id, state, protocol type, protocol, members), each member (id, instance id, client id, host,
        metadata of the chosen protocol when Stable, assignment). One loop, as DescribeGroups of 100,000 groups
        spends most of its time here."""
        found, names = self.registry.get, _STATE_NAMES
        rows: list[DescribedRow] = []
        for group_id in group_ids:
            group = found(group_id)
            if type(group) is not ClassicGroup:  # none, or a consumer group: Dead to the classic API
                rows.append((0, group_id, DEAD.value, "", "", []))
                continue
            if group.state is STABLE:
                protocol = group.protocol_name or ""
                members = [(m.member_id, m.group_instance_id, m.client_id, m.client_host, m.metadata(protocol),
                            m.assignment) for m in group.members.values()]
            else:
                protocol = ""
                members = [(m.member_id, m.group_instance_id, m.client_id, m.client_host, b"", m.assignment)
                           for m in group.members.values()]
            rows.append((0, group_id, names[group.state], group.protocol_type or "", protocol, members))
        return rows
