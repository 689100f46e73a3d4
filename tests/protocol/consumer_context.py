"""A shard driven by a ManualClock for consumer group (KIP-848) tests, with members that behave like Kafka's client.

A `Client` keeps what a consumer keeps: its member id and epoch and the partitions it owns. On
each heartbeat it reports what it owns; when the coordinator's assignment drops partitions it
revokes them (at its next heartbeat, as a consumer does after its listener ran), and it takes
new ones at once.
"""

from __future__ import annotations

from dataclasses import dataclass, field

from shard_context import advance

from groupcoord.protocol import (
    ConsumerGroupDescribeRequest,
    ConsumerGroupHeartbeatRequest,
    ConsumerGroupHeartbeatResponse,
    DescribedConsumerGroup,
    Errors,
    GroupConfig,
    GroupCoordinator,
    ManualClock,
    MemoryLog,
    TopicPartition,
)

GROUP = "cg"
REBALANCE_MS = 30_000
START_MS = 1_000_000


def tps(topic: str, *partitions: int) -> set[TopicPartition]:
    """A set of partitions of one topic."""
    return {TopicPartition(topic, p) for p in partitions}


@dataclass
class Client:
    """One consumer-protocol member as the client side sees it."""

    member_id: str
    topics: tuple[str, ...]
    instance_id: str | None = None
    assignor: str | None = None
    epoch: int = 0
    owned: set[TopicPartition] = field(default_factory=set)
    last: ConsumerGroupHeartbeatResponse | None = None


class ConsumerContext:
    """One shard, a ManualClock, topics, and helpers to heartbeat as members."""

    def __init__(self, topics: dict[str, int] | None = None, log: MemoryLog | None = None, **config) -> None:
        self.config = GroupConfig(**config)
        self.clock = ManualClock(START_MS)
        self.log = log if log is not None else MemoryLog()
        self.coord = GroupCoordinator(self.config, self.clock, self.log)
        self.topics = dict(topics or {"t": 6})
        self.coord.update_topic_metadata(self.topics)

    def advance(self, ms: int) -> None:
        """Move the clock, stopping at every timer's deadline on the way."""
        advance(self.coord, self.clock, ms)

    def send(self, group_id: str = GROUP, **kw) -> ConsumerGroupHeartbeatResponse:
        """One heartbeat request; its (completed) response."""
        deferred = self.coord.consumer_group_heartbeat(ConsumerGroupHeartbeatRequest(group_id, **kw))
        if not deferred.done():  # a log on disk: make the records durable, as the partition actor would
            self.coord.on_durable(self.log.sync())
        return deferred.result()

    def join(self, member_id: str, topics=("t",), group_id: str = GROUP, **kw) -> Client:
        """A member joins with epoch 0 and takes what the first response assigns."""
        client = Client(member_id, tuple(topics), kw.get("instance_id"), kw.get("server_assignor"))
        resp = self.send(
            group_id,
            member_id=member_id,
            member_epoch=0,
            rebalance_timeout_ms=kw.pop("rebalance_timeout_ms", REBALANCE_MS),
            subscribed_topic_names=list(topics),
            topic_partitions=[],
            **kw,
        )
        assert resp.error == Errors.NONE, resp
        self._apply(client, resp)
        return client

    def heartbeat(self, client: Client, group_id: str = GROUP, **kw) -> ConsumerGroupHeartbeatResponse:
        """A regular heartbeat: the client reports what it owns, then applies the answer."""
        kw.setdefault("topic_partitions", sorted(client.owned))
        resp = self.send(
            group_id, member_id=client.member_id, member_epoch=client.epoch, instance_id=client.instance_id, **kw
        )
        if resp.error == Errors.NONE:
            self._apply(client, resp)
        return resp

    @staticmethod
    def _apply(client: Client, resp: ConsumerGroupHeartbeatResponse) -> None:
        client.last = resp
        client.epoch = resp.member_epoch
        if resp.assignment is not None:
            # Revoked partitions are given up (the listener runs); new ones are taken.
            client.owned = set(resp.assignment)

    def settle(self, clients: list[Client], rounds: int = 20, group_id: str = GROUP) -> int:
        """Heartbeat every client until the group is Stable; returns how many rounds it took."""
        for i in range(1, rounds + 1):
            for c in clients:
                self.heartbeat(c, group_id)
            if self.describe(group_id).group_state == "Stable":
                return i
        raise AssertionError(f"not stable after {rounds} rounds: {self.describe(group_id)}")

    def describe(self, group_id: str = GROUP) -> DescribedConsumerGroup:
        """ConsumerGroupDescribe of one group."""
        return self.coord.consumer_group_describe(ConsumerGroupDescribeRequest([group_id])).result().groups[0]

    def group(self, group_id: str = GROUP):
        """The shard's ConsumerGroup object."""
        return self.coord.consumer.groups[group_id]

    def restart(self) -> ConsumerContext:
        """A fresh shard on the same clock that has loaded this shard's records."""
        fresh = ConsumerContext.__new__(ConsumerContext)
        fresh.config, fresh.clock, fresh.topics = self.config, self.clock, self.topics
        fresh.log = MemoryLog()
        fresh.log.records.extend(self.log.records)
        fresh.coord = GroupCoordinator(self.config, self.clock, fresh.log)
        fresh.coord.load(list(self.log.records))
        fresh.coord.update_topic_metadata(self.topics)
        return fresh


def owners(clients: list[Client]) -> dict[TopicPartition, str]:
    """Who owns each partition; fails if two clients own the same one."""
    out: dict[TopicPartition, str] = {}
    for c in clients:
        for tp in c.owned:
            assert tp not in out, f"{tp} owned by {out[tp]} and {c.member_id}"
            out[tp] = c.member_id
    return out
