"""A shard with its groups already formed, for the bad-input tests (in memory or over a log).

Groups: "stable" (two dynamic members and static member "inst-a", consumer protocol, committed
offsets), "empty" (a simple group with committed offsets), "opaque" (Stable, but its members'
metadata is not a consumer subscription) and, if asked, "full" (Stable at group.max.size).
`ids` maps the placeholders "@m0", "@m1" and "@static" to the real member ids.
"""

from __future__ import annotations

from typing import Any

from rel_inputs import ASSIGNMENT, SUBSCRIPTION

from groupcoord.protocol import (
    ConsumerGroupDescribeRequest,
    DescribeGroupsRequest,
    Errors,
    GroupConfig,
    GroupCoordinator,
    JoinGroupRequest,
    ListGroupsRequest,
    ManualClock,
    MemoryLog,
    OffsetAndMetadata,
    OffsetCommitRequest,
    OffsetFetchRequest,
    SyncGroupRequest,
    TopicPartition,
)
from groupcoord.protocol.shard.log import RecordBatchTooLarge

CONFIG = GroupConfig(
    min_session_timeout_ms=10,
    max_session_timeout_ms=600_000,
    initial_rebalance_delay_ms=100,
    max_size=4,
    new_member_join_timeout_ms=5_000,
)
SESSION_MS, REBALANCE_MS = 10_000, 30_000
PREBUILT_GROUPS = ("stable", "empty", "opaque")


class LogThatRefuses(MemoryLog):
    """A MemoryLog that refuses appends (as a log refuses an oversized batch) while `refusing` is set."""

    refusing = False

    def append(self, records) -> int:
        if not self.refusing:
            return super().append(records)
        raise RecordBatchTooLarge(f"refused {len(records)} records")


class Shard:
    """A GroupCoordinator over `log` (a MemoryLog by default) holding the three prebuilt groups."""

    def __init__(self, config: GroupConfig = CONFIG, log: Any = None, session_ms: int = SESSION_MS,
                 rebalance_ms: int = REBALANCE_MS, now_ms: int = 1_000_000, full_group: bool = False) -> None:
        self.clock = ManualClock(now_ms)
        self.log = log if log is not None else MemoryLog()
        self.coord = GroupCoordinator(config, self.clock, self.log)
        self.session_ms, self.rebalance_ms = session_ms, rebalance_ms
        self.ids: dict[str, str] = {}
        stable = self._form("stable", SUBSCRIPTION, static=True)
        self.ids.update({"@m0": stable[0], "@m1": stable[1], "@static": stable[2]})
        self._form("opaque", b"\xffnot a subscription", static=False)
        if full_group:  # as many members as group.max.size allows
            self._form("full", SUBSCRIPTION, static=False, count=config.max_size)
        tps = {TopicPartition("t", p): OffsetAndMetadata(10 + p, "meta") for p in range(2)}
        tps[TopicPartition("u", 0)] = OffsetAndMetadata(7)
        resp = self.settle(self.coord.commit_offsets(OffsetCommitRequest("stable", tps, 1, stable[0]))).result()
        assert set(resp.errors.values()) == {Errors.NONE}, resp
        resp = self.settle(self.coord.commit_offsets(OffsetCommitRequest("empty", tps))).result()
        assert set(resp.errors.values()) == {Errors.NONE}, resp

    def settle(self, deferred: Any = None) -> Any:
        """Make what was appended durable (for a real log) and return `deferred`."""
        flush = getattr(self.log, "flush", None)
        if flush is not None:
            self.coord.on_durable(flush())
        return deferred

    def _form(self, group: str, metadata: bytes, static: bool, count: int = 2) -> list[str]:
        c = self.coord
        protocols = [("range", metadata)]

        def join(member_id: str = "", instance: str | None = None):
            req = JoinGroupRequest(
                group, self.session_ms, self.rebalance_ms, member_id, instance, "consumer", protocols
            )
            return self.settle(c.join_group(req))

        ids = [join().result().member_id for _ in range(count)]
        parked = [join(m) for m in ids]
        if static:
            parked.append(join(instance="inst-a"))
        while not all(d.done() for d in parked):  # the initial delay grows with each join
            self.clock.advance(c.config.initial_rebalance_delay_ms)
            c.tick()
            self.settle()
        joins = [d.result() for d in parked]
        assert all(j.error == Errors.NONE for j in joins), joins
        members = [j.member_id for j in joins]
        leader = joins[0].leader
        assignments = {m: ASSIGNMENT for m in members}
        syncs = [
            c.sync_group(
                SyncGroupRequest(group, 1, m, "inst-a" if m.startswith("inst-a") else None, "consumer", "range",
                                 assignments if m == leader else {})
            )
            for m in members
        ]
        self.settle()
        assert all(s.result().error == Errors.NONE for s in syncs)
        return members

    def snapshot(self) -> tuple:
        """Everything a client can see: log length, classic and consumer groups listed, described, their offsets."""
        c = self.coord
        groups = sorted(c.groups.groups)
        consumer_groups = sorted(c.consumer.groups)
        described = c.describe_groups(DescribeGroupsRequest(groups)).result()
        described_consumer = c.consumer_group_describe(ConsumerGroupDescribeRequest(consumer_groups)).result()
        offsets = {g: c.fetch_offsets(OffsetFetchRequest(g)).result() for g in groups + consumer_groups}
        listed = c.list_groups(ListGroupsRequest()).result()
        return len(self.log.records), groups, described, described_consumer, offsets, listed

    def answer(self, api: str, req: Any) -> tuple[Any, bool]:
        """Send `req`; return its answer and whether it came at once (parked ones wait on the clock)."""
        deferred = getattr(self.coord, api)(req)
        if deferred.done():
            return deferred.result(), True
        for _ in range(200):  # up to 1000 s of manual time, in 5 s steps
            self.clock.advance(5_000)
            self.coord.tick()
            if deferred.done():
                return deferred.result(), False
        raise AssertionError(f"{api} never answered {req!r:.300}")
