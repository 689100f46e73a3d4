"""Sticky assignors' previous assignment: from user data for the eager one, owned partitions for the cooperative."""

from __future__ import annotations

from shard_link import Shard, member, settle

from groupcoord.protocol import TopicPartition
from groupcoord.protocol.assignors import (
    CooperativeStickyAssignor,
    MemberSubscription,
    StickyAssignor,
    decode_sticky_user_data,
    encode_sticky_user_data,
)
from groupcoord.protocol.assignors.consumer_protocol import decode_subscription

T = [TopicPartition("t", p) for p in range(4)]


def test_eager_sticky_reads_the_previous_assignment_from_user_data_not_owned_partitions():
    subs = {
        # Owned partitions say the opposite of the user data; an eager member owns nothing when it joins.
        "a": MemberSubscription(["t"], [T[2], T[3]], 4, user_data=encode_sticky_user_data([T[0], T[1]], 4)),
        "b": MemberSubscription(["t"], [T[0], T[1]], 4, user_data=encode_sticky_user_data([T[2], T[3]], 4)),
    }
    assert StickyAssignor().assign({"t": 4}, subs) == {"a": [T[0], T[1]], "b": [T[2], T[3]]}


def test_cooperative_sticky_keeps_the_owned_partitions():
    subs = {
        "a": MemberSubscription(["t"], [T[2], T[3]], 4, user_data=encode_sticky_user_data([T[0], T[1]], 4)),
        "b": MemberSubscription(["t"], [T[0], T[1]], 4),
    }
    assert CooperativeStickyAssignor().assign({"t": 4}, subs) == {"a": [T[2], T[3]], "b": [T[0], T[1]]}


def test_an_eager_sticky_member_rejoins_with_its_last_assignment_in_its_user_data():
    shard = Shard()
    m, link = member(shard, assignors=("sticky",))
    revoked: list[set] = []
    m._on_revoked = revoked.append
    settle(shard, m)
    generation = m.generation
    m.request_rejoin(lost=False)
    settle(shard, m)
    assert revoked == [set(T)]  # eager: everything was revoked before the rejoin
    rejoin = [req for method, req in link.sent if method == "join_group"][-1]
    subscription = decode_subscription(dict(rejoin.protocols)["sticky"])
    assert list(subscription.owned_partitions) == []
    assert decode_sticky_user_data(subscription.user_data) == (T, generation)
