"""ListGroups and DescribeGroups: read-only views of the shard's classic groups."""

from __future__ import annotations

from typing import Sequence

from ..errors import Errors
from ..messages import (
    DescribedRow,
    DescribeGroupsRequest,
    DescribeGroupsResponse,
    ListedGroup,
    ListGroupsRequest,
    ListGroupsResponse,
    describe_response_from_rows,
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
        return self.rt.respond(describe_response_from_rows(self.described_rows(req.group_ids)))

    def described_rows(self, group_ids: Sequence[str]) -> list[DescribedRow]:
        """The descriptions of `group_ids` as the flat rows they cross Ray in, built straight from the groups
        (Stable: with each member's metadata of the chosen protocol; otherwise assignments only)."""
        groups = self.groups
        rows: list[DescribedRow] = []
        for group_id in group_ids:
            group = groups.get(group_id)
            if group is None:
                rows.append((0, group_id, DEAD.value, "", "", []))
                continue
            stable = group.state is STABLE
            protocol = group.protocol_name or ""
            members = [
                (m.member_id, m.group_instance_id, m.client_id, m.client_host,
                 m.metadata(protocol) if stable else b"", m.assignment)
                for m in group.members.values()
            ]
            rows.append((0, group_id, group.state.value, group.protocol_type or "", protocol if stable else "",
                         members))
        return rows
