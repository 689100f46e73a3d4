"""A client's link to a pure GroupCoordinator shard in this process, standing in for CoordinatorClient.

Membership talks to its coordinator only through its client (submit, call_once, describe_topics,
rediscover, sleep_backoff); this link hands those requests to a real shard driven by a ManualClock,
so the client's rebalance code runs against Kafka's server logic with every interleaving under the
test's control. `before_answer[method]` runs just before a request's answer is handed back.
"""

from __future__ import annotations

from typing import Any, Callable

from groupcoord.actors.client.membership import Membership
from groupcoord.protocol import GroupConfig, GroupCoordinator, ManualClock, MemoryLog

TOPICS = {"t": {"partitions": 4}}


class FakeMonotonic:
    """The client's monotonic clock, moved by the test."""

    def __init__(self) -> None:
        self.now = 100.0

    def __call__(self) -> float:
        return self.now


class Pending:
    """A request the shard has taken; its answer once the shard completed it (TimeoutError before)."""

    def __init__(self, link: "ShardLink", method: str, deferred: Any) -> None:
        self.link, self.method, self.deferred = link, method, deferred

    def result(self, timeout_s: float) -> Any:
        if self.link.unanswered or not self.deferred.done():
            raise TimeoutError(f"{self.method}: no answer yet")
        hook = self.link.before_answer.pop(self.method, None)
        if hook is not None:
            hook()
        return self.deferred.result()


class ShardLink:
    """CoordinatorClient's interface over one in-process shard (several links may share a shard)."""

    request_timeout_s = 5.0

    def __init__(self, shard: "Shard") -> None:
        self.shard = shard
        self.sent: list[tuple[str, Any]] = []
        self.before_answer: dict[str, Callable[[], None]] = {}
        self.unanswered = False  # a coordinator that takes requests and never answers

    def submit(self, method: str, request: Any) -> Pending:
        self.sent.append((method, request))
        return Pending(self, method, getattr(self.shard.coord, method)(request))

    def call_once(self, method: str, request: Any, timeout_s: float | None = None) -> Any:
        return self.submit(method, request).result(timeout_s or self.request_timeout_s)

    call = call_once

    def describe_topics(self, topics: list[str]) -> dict[str, dict]:
        return {t: TOPICS[t] for t in topics if t in TOPICS}

    def rediscover(self) -> None:
        pass

    def sleep_backoff(self, attempt: int, deadline: float) -> None:
        pass


class Shard:
    """A pure shard with test-sized timeouts and a ManualClock."""

    def __init__(self) -> None:
        self.clock = ManualClock(1_000_000)
        config = GroupConfig(min_session_timeout_ms=10, initial_rebalance_delay_ms=100)
        self.coord = GroupCoordinator(config, self.clock, MemoryLog())

    def advance(self, ms: int) -> None:
        self.clock.advance(ms)
        self.coord.tick()


def member(shard: Shard, assignors: tuple[str, ...] = ("range",), **kw: Any) -> tuple[Membership, ShardLink]:
    """A Membership of group "g" subscribed to "t", linked to `shard`, on a FakeMonotonic clock."""
    link = ShardLink(shard)
    kw.setdefault("clock", FakeMonotonic())
    m = Membership(
        None,  # type: ignore[arg-type]  # the service handle is only the link's business
        "g",
        client_id="c",
        client_host="h",
        group_instance_id=None,
        session_timeout_ms=10_000,
        rebalance_timeout_ms=kw.pop("rebalance_timeout_ms", 20_000),
        assignors=assignors,
        listener=None,
        on_revoked=kw.pop("on_revoked", None),
        on_assigned=None,
        client=link,  # type: ignore[arg-type]
        metadata_max_age_ms=300_000,
        **kw,
    )
    m.set_topics(["t"])
    return m, link


def settle(shard: Shard, *members: Membership, rounds: int = 50) -> None:
    """Poll every member (deadline now) and move the shard's clock until all are Stable."""
    for _ in range(rounds):
        done = [m.ensure_active(m.clock()) for m in members]
        if all(done):
            return
        shard.advance(100)
    raise AssertionError("the members never became Stable")
