"""The leader's side of a rebalance: running the assignor, and watching the topics it assigned from.

As Kafka's ConsumerCoordinator: the leader assigns from the partition counts it sees at the
rebalance, and rebalances again when it sees them change (checked every metadata.max.age.ms).
"""

from __future__ import annotations

import logging
import time
from typing import Any, Callable

from groupcoord.protocol.assignors import assign_metadata
from groupcoord.protocol.assignors.consumer_protocol import decode_subscription

log = logging.getLogger(__name__)


class LeaderMetadata:
    """The subscribed topics' partition counts the leader assigned from, and the check for changes."""

    def __init__(self, client: Any, group_id: str, max_age_s: float, clock: Callable[[], float] = time.monotonic):
        self.client = client
        self.group_id = group_id
        self.max_age_s = max_age_s
        self.clock = clock
        self.topics: set[str] = set()
        self.snapshot: dict[str, int] = {}
        self.checked = 0.0

    def assign(self, protocol_name: str, members: list) -> dict[str, bytes]:
        """Run the selected assignor over the members' subscriptions (JoinGroup members) and encode the result."""
        metadata = {m.member_id: m.metadata for m in members}
        topics = {t for meta in metadata.values() for t in decode_subscription(meta).topics}
        counts = self._counts(topics)
        missing = {t for t in topics if not counts.get(t)}
        if missing:
            log.warning("group %s subscribes to unknown topics %s; they get no partitions", self.group_id, missing)
        self.topics = topics
        self.snapshot = {t: counts.get(t, 0) for t in topics}
        self.checked = self.clock()
        instance_ids = {m.member_id: m.group_instance_id for m in members}
        return assign_metadata(protocol_name, {t: n for t, n in counts.items() if n}, metadata, instance_ids)

    def changed(self) -> bool:
        """Whether the partition counts moved since the assignment (looked up at most every max age)."""
        if self.clock() - self.checked < self.max_age_s:
            return False
        self.checked = self.clock()
        try:
            counts = self._counts(self.topics)
        except Exception as e:  # the router is restarting: look again next time
            log.debug("topic metadata of %s unavailable: %r", self.group_id, e)
            return False
        if counts == self.snapshot:
            return False
        log.info("leader of %s saw partition counts change %s -> %s; rebalancing", self.group_id, self.snapshot, counts)
        return True

    def _counts(self, topics: set[str]) -> dict[str, int]:
        described = self.client.describe_topics(sorted(topics))
        return {t: described.get(t, {}).get("partitions", 0) for t in topics}
