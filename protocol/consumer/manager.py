"""The consumer groups (KIP-848) of one shard: heartbeat and describe, topic metadata, and what the classic side asks.

`ConsumerGroupManager` = the store (records and replay) + the heartbeat handler + the views
(ConsumerGroupDescribe, ListGroups entries), the checks the offset manager runs on a commit
from a consumer-group member, and the topic metadata the service feeds in.
"""

from __future__ import annotations

import logging
from typing import Mapping

from ..errors import Errors
from ..messages import ListedRow, OffsetCommitRequest
from ..shard.deferred import Deferred
from ..values import TopicPartition
from .group import ConsumerGroup, ConsumerGroupState, MemberState
from .heartbeat import ConsumerHeartbeatHandler, preferred_assignor
from .messages import (
    ConsumerGroupDescribeRequest,
    ConsumerGroupDescribeResponse,
    DescribedConsumerGroup,
    DescribedConsumerGroupMember,
)

log = logging.getLogger(__name__)


def _partitions(assignment: Mapping[str, frozenset[int]]) -> list[TopicPartition]:
    return [TopicPartition(t, p) for t, ps in sorted(assignment.items()) for p in sorted(ps)]


class ConsumerGroupManager(ConsumerHeartbeatHandler):
    """Owns the consumer groups of one shard and the requests that read or change them."""

    # --- topic metadata --------------------------------------------------------------------------

    def update_topic_metadata(self, partitions: Mapping[str, int]) -> None:
        """Learn partition counts (topic -> count); groups on a changed topic refresh at their next heartbeat."""
        changed = {t for t, n in partitions.items() if self.topics.get(t) != n}
        if not changed:
            return
        self.topics.update(partitions)
        for group in self.groups.values():
            if group.subscribed_topics(self.topics) & changed or changed & set(group.subscription_metadata):
                group.metadata_refresh_needed = True

    # --- recovery --------------------------------------------------------------------------------

    def on_loaded(self) -> None:
        """After replay: every member must heartbeat within its session; revocations get their timeout again."""
        for group in self.groups.values():
            group.metadata_refresh_needed = True
            for member in group.members.values():
                self._schedule_session_timeout(group.group_id, member.member_id)
                if member.state is MemberState.UNREVOKED_PARTITIONS:
                    self._schedule_rebalance_timeout(group.group_id, member)

    # --- ConsumerGroupDescribe and ListGroups -------------------------------------------------------

    def consumer_group_describe(self, req: ConsumerGroupDescribeRequest) -> Deferred[ConsumerGroupDescribeResponse]:
        """Describe consumer groups in request order; GROUP_ID_NOT_FOUND for others and unknown ids."""
        return self.rt.respond(ConsumerGroupDescribeResponse([self.describe(g) for g in req.group_ids]))

    def describe(self, group_id: str) -> DescribedConsumerGroup:
        """One consumer group as ConsumerGroupDescribe shows it."""
        group = self.groups.get(group_id)
        if group is None:
            message = (
                f"Group {group_id} is not a consumer group."
                if group_id in self.registry
                else f"Group {group_id} not found."
            )
            return DescribedConsumerGroup(Errors.GROUP_ID_NOT_FOUND, group_id, error_message=message)
        members = [
            DescribedConsumerGroupMember(
                m.member_id,
                m.instance_id,
                m.rack_id,
                m.member_epoch,
                m.client_id,
                m.client_host,
                list(m.subscribed_topic_names),
                m.subscribed_topic_regex or "",  # Kafka describes a member without a regex with ""
                _partitions(m.assigned_partitions),
                _partitions(group.target_of(m.member_id)),
            )
            for m in group.members.values()
        ]
        return DescribedConsumerGroup(
            Errors.NONE,
            group_id,
            group.state.value,
            group.group_epoch,
            group.assignment_epoch,
            preferred_assignor(group.members.values(), self.config.consumer_assignors),
            members,
        )

    def listed_rows(self, states: set[str], types: set[str]) -> list[ListedRow]:
        """ListGroups entries of the consumer groups as rows (group id, "consumer", state, "consumer"), filtered by
        lower-cased state and type names."""
        if types and "consumer" not in types:
            return []
        out = []
        for group in self.groups.values():
            state = group.state.value
            if not states or state.lower() in states:
                out.append((group.group_id, "consumer", state, "consumer"))
        return out

    # --- what the offset manager asks ----------------------------------------------------------------

    def commit_error(self, group: ConsumerGroup, req: OffsetCommitRequest) -> Errors:
        """Kafka's ConsumerGroup.validateOffsetCommit: the member must exist and send its current member epoch."""
        if req.generation_id < 0 and group.is_empty():
            return Errors.NONE
        member = group.members.get(req.member_id)
        if member is None:
            return Errors.UNKNOWN_MEMBER_ID
        if req.api_version is not None and req.api_version < 9:  # a KIP-848 member commits with v9 or later
            return Errors.UNSUPPORTED_VERSION
        if req.generation_id != member.member_epoch:
            return Errors.STALE_MEMBER_EPOCH
        return Errors.NONE

    def fetch_error(self, group: ConsumerGroup, member_id: str | None, member_epoch: int) -> Errors:
        """Kafka's ConsumerGroup.validateOffsetFetch for a fetch sent as a member: it must exist, at its epoch."""
        member = group.members.get(member_id) if member_id is not None else None
        if member is None:
            return Errors.UNKNOWN_MEMBER_ID
        if member_epoch != member.member_epoch:
            return Errors.STALE_MEMBER_EPOCH
        return Errors.NONE

    def subscribed(self, group: ConsumerGroup) -> set[str]:
        """The topics a consumer group's members subscribe to (their offsets neither expire nor may be deleted)."""
        return group.subscribed_topics(self.topics)

    def can_delete(self, group: ConsumerGroup) -> bool:
        """Whether DeleteGroups may delete the group (only an Empty one)."""
        return group.state is ConsumerGroupState.EMPTY
