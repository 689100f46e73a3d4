"""ListGroups and DescribeGroups: read-only views of the shard's classic groups."""

from __future__ import annotations

from typing import Sequence

from ..errors import Errors
from ..messages import (
    DescribedGroup,
    DescribedRow,
    DescribeGroupsRequest,
    DescribeGroupsResponse,
    ListedGroup,
    ListGroupsRequest,
    ListGroupsResponse,
    described_group,
    described_member,
)
from ..shard.deferred import Deferred
from .store import DEAD, STABLE, GroupStore


class GroupListingHandler(GroupStore):
    """GroupMetadataManager's ListGroups and DescribeGroups."""

    def list_groups(self, req: ListGroupsRequest) -> Deferred[ListGroupsResponse]:
        """List this shard's groups, filtered by state and type (case-insensitive, as Java)."""
        states = {s.strip().lower() for s in req.states_filter}
        types = {t.lower() for t in req.types_filter}  # Kafka's GroupType.parse: lower-cased, not trimmed
        return self.rt.respond(ListGroupsResponse(Errors.NONE, self.listed(states, types)))

    def listed(self, states: set[str], types: set[str]) -> list[ListedGroup]:
        """ListGroups entries of the classic groups, filtered by lower-cased state and type names."""
        return [
            ListedGroup(g.group_id, g.protocol_type or "", g.state.value, "classic")
            for g in self.groups.values()
            if (not states or g.state.value.lower() in states) and (not types or "classic" in types)
        ]

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
        found = self.groups.get
        rows: list[DescribedRow] = []
        for group_id in group_ids:
            group = found(group_id)
            if group is None:
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
            rows.append((0, group_id, group.state.value, group.protocol_type or "", protocol, members))
        return rows
