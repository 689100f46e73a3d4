"""ConsumerGroupHeartbeat: request validation, epochs, joining, leaving and static members (Kafka's
GroupMetadataManagerTest for consumer groups, in our words)."""

from __future__ import annotations

import pytest
from consumer_context import GROUP, REBALANCE_MS, ConsumerContext, owners, tps

from groupcoord.protocol import Errors, TopicPartition


@pytest.mark.parametrize(
    ("kw", "message"),
    [
        ({"group_id": "", "member_epoch": 0}, "GroupId can't be empty."),
        # Kafka trims ids as Java's String.trim(): one made only of spaces (or tabs, newlines) is empty too.
        ({"group_id": "   ", "member_epoch": 0}, "GroupId can't be empty."),
        ({"group_id": " \t\n", "member_id": "m", "member_epoch": 1}, "GroupId can't be empty."),
        ({"member_id": "  ", "member_epoch": 5}, "MemberId can't be empty."),
        ({"member_epoch": 5}, "MemberId can't be empty."),
        ({"member_epoch": -1}, "MemberId can't be empty."),
        ({"member_epoch": 0, "subscribed_topic_names": ["t"], "topic_partitions": []}, "RebalanceTimeoutMs must be"),
        ({"member_epoch": 0, "rebalance_timeout_ms": 1, "subscribed_topic_names": ["t"]}, "TopicPartitions must be"),
        (
            {
                "member_epoch": 0,
                "rebalance_timeout_ms": 1,
                "subscribed_topic_names": ["t"],
                "topic_partitions": [("t", 0)],
            },
            "TopicPartitions must be empty",
        ),
        ({"member_epoch": 0, "rebalance_timeout_ms": 1, "topic_partitions": []}, "Either SubscribedTopicNames or"),
        ({"member_id": "m", "member_epoch": -2}, "InstanceId can't be null."),
        ({"member_id": "m", "member_epoch": -3}, "MemberEpoch is invalid."),
        ({"member_id": "m", "member_epoch": 1, "instance_id": ""}, "InstanceId can't be empty."),
        ({"member_id": "m", "member_epoch": 1, "rack_id": ""}, "RackId can't be empty."),
        ({"member_id": "m", "member_epoch": 1, "instance_id": " "}, "InstanceId can't be empty."),
        ({"member_id": "m", "member_epoch": 1, "subscribed_topic_regex": "("}, "SubscribedTopicRegex"),
    ],
)
def test_invalid_requests_get_invalid_request_with_kafkas_message(kw, message):
    ctx = ConsumerContext()
    group_id = kw.pop("group_id", GROUP)
    resp = ctx.send(group_id, **kw)
    assert resp.error == Errors.INVALID_REQUEST
    assert resp.error_message.startswith(message)
    assert ctx.coord.consumer.groups == {}


def test_unknown_server_assignor_is_unsupported_assignor():
    ctx = ConsumerContext()
    resp = ctx.send(
        member_epoch=0, rebalance_timeout_ms=1, subscribed_topic_names=["t"], topic_partitions=[], server_assignor="x"
    )
    assert resp.error == Errors.UNSUPPORTED_ASSIGNOR
    assert "Supported assignors: uniform, range." in resp.error_message


def test_first_member_gets_every_partition_and_epoch_two():
    # As Kafka 4.4: a new group starts at epoch 1, and the first member's subscription bumps it to 2.
    ctx = ConsumerContext()
    a = ctx.join("a")
    assert a.epoch == 2 and a.owned == tps("t", *range(6))
    assert a.last.heartbeat_interval_ms == ctx.config.consumer_heartbeat_interval_ms
    d = ctx.describe()
    assert (d.group_state, d.group_epoch, d.assignment_epoch, d.assignor_name) == ("Stable", 2, 2, "uniform")


def test_a_member_with_an_empty_subscription_joins_at_the_current_epoch_without_a_bump():
    # Kafka accepts an empty (not null) subscription: nothing to assign, so no new group epoch.
    ctx = ConsumerContext()
    resp = ctx.send(member_id="e", member_epoch=0, rebalance_timeout_ms=1, subscribed_topic_names=[],
                    topic_partitions=[])  # fmt: skip
    assert (resp.error, resp.member_epoch, resp.assignment) == (Errors.NONE, 1, [])
    d = ctx.describe()
    assert (d.group_state, d.group_epoch, d.assignment_epoch) == ("Stable", 1, 1)
    a = ctx.join("a")  # a subscription bumps the epoch; the empty member gets nothing
    assert a.epoch == 2 and a.owned == tps("t", *range(6)) and ctx.describe().group_epoch == 2


def test_a_change_of_the_preferred_assignor_bumps_the_group_epoch():
    ctx = ConsumerContext()
    a = ctx.join("a")
    assert ctx.describe().group_epoch == 2
    ctx.heartbeat(a, server_assignor="range")  # same topics, another assignor: a new target assignment
    d = ctx.describe()
    assert (d.group_epoch, d.assignor_name) == (3, "range")
    ctx.heartbeat(a, server_assignor="range")  # unchanged: no bump
    assert ctx.describe().group_epoch == 3


def test_an_assignor_tie_goes_to_the_first_configured_assignor():
    # Kafka breaks a tie by its HashMap's order, which puts "uniform" first, as group.consumer.assignors does.
    ctx = ConsumerContext()
    ctx.join("a", server_assignor="range")
    ctx.join("b", server_assignor="uniform")
    assert ctx.describe().assignor_name == "uniform"


def test_member_id_is_generated_when_empty():
    ctx = ConsumerContext()
    resp = ctx.send(member_epoch=0, rebalance_timeout_ms=1, subscribed_topic_names=["t"], topic_partitions=[])
    assert resp.error == Errors.NONE and len(resp.member_id) == 36
    assert resp.member_id in ctx.group().members


def test_heartbeat_to_unknown_group_or_member():
    ctx = ConsumerContext()
    assert ctx.send(member_id="m", member_epoch=1).error == Errors.GROUP_ID_NOT_FOUND
    ctx.join("a")
    resp = ctx.send(member_id="nobody", member_epoch=1)
    assert resp.error == Errors.UNKNOWN_MEMBER_ID
    assert resp.error_message == f"Member nobody is not a member of group {GROUP}."


def test_member_epoch_ahead_or_behind_is_fenced_but_the_previous_epoch_with_a_subset_is_accepted():
    ctx = ConsumerContext()
    a = ctx.join("a")
    b = ctx.join("b")
    ctx.settle([a, b])
    assert a.epoch == b.epoch == 3
    ahead = ctx.send(member_id="a", member_epoch=4, topic_partitions=[])
    assert ahead.error == Errors.FENCED_MEMBER_EPOCH and "greater member epoch (4)" in ahead.error_message
    # Rejoining with epoch 0 under the same member id is not fenced (Kafka 4.x): the member keeps its epoch
    # and its assignment, which the answer carries in full.
    rejoin = ctx.send(
        member_id="a", member_epoch=0, rebalance_timeout_ms=1, subscribed_topic_names=["t"], topic_partitions=[]
    )
    assert (rejoin.error, rejoin.member_epoch, set(rejoin.assignment)) == (Errors.NONE, 3, a.owned)
    # The response that moved `a` to epoch 3 was lost: epoch 2 with a subset of its partitions is fine.
    lost = ctx.send(member_id="a", member_epoch=2, topic_partitions=sorted(a.owned))
    assert lost.error == Errors.NONE and lost.member_epoch == 3
    # ...but not with partitions it does not hold.
    other = ctx.send(member_id="a", member_epoch=2, topic_partitions=sorted(b.owned))
    assert other.error == Errors.FENCED_MEMBER_EPOCH


def test_group_max_size_rejects_new_members_only():
    ctx = ConsumerContext(consumer_max_size=1)
    a = ctx.join("a")
    resp = ctx.send(
        member_id="b", member_epoch=0, rebalance_timeout_ms=1, subscribed_topic_names=["t"], topic_partitions=[]
    )
    assert resp.error == Errors.GROUP_MAX_SIZE_REACHED
    assert ctx.heartbeat(a).error == Errors.NONE


def test_leaving_with_epoch_minus_one_removes_the_member_and_bumps_the_group_epoch():
    ctx = ConsumerContext()
    a, b = ctx.join("a"), ctx.join("b")
    ctx.settle([a, b])
    resp = ctx.send(member_id="b", member_epoch=-1)
    assert (resp.error, resp.member_id, resp.member_epoch) == (Errors.NONE, "b", -1)
    assert set(ctx.group().members) == {"a"}
    assert ctx.describe().group_epoch == 4
    # The leaver's partitions are free at once: the next heartbeat gives them to `a`.
    ctx.heartbeat(a)
    assert a.owned == tps("t", *range(6)) and a.epoch == 4
    assert ctx.send(member_id="b", member_epoch=-1).error == Errors.UNKNOWN_MEMBER_ID


def test_when_the_last_member_leaves_the_assignment_epoch_follows_the_group_epoch():
    ctx = ConsumerContext()
    a = ctx.join("a")
    assert ctx.describe().assignment_epoch == a.epoch == 2
    ctx.send(member_id="a", member_epoch=-1)
    d = ctx.describe()
    assert (d.group_state, d.group_epoch, d.assignment_epoch) == ("Empty", 3, 3)


def test_a_static_member_leaving_with_minus_two_keeps_its_partitions_for_its_next_incarnation():
    ctx = ConsumerContext()
    a = ctx.join("a1", instance_id="i-a")
    b = ctx.join("b")
    ctx.settle([a, b])
    held = set(a.owned)
    resp = ctx.send(member_id="a1", member_epoch=-2, instance_id="i-a")
    assert (resp.error, resp.member_epoch) == (Errors.NONE, -2)
    epoch = ctx.describe().group_epoch
    # No rebalance: b keeps its half, a's half waits for the instance to come back.
    ctx.heartbeat(b)
    assert ctx.describe().group_epoch == epoch and not (b.owned & held)
    a2 = ctx.join("a2", instance_id="i-a")
    assert a2.owned == held and a2.epoch == epoch
    assert set(ctx.group().members) == {"a2", "b"}
    owners([a2, b])


def test_a_static_member_cannot_join_while_its_instance_id_is_held():
    ctx = ConsumerContext()
    ctx.join("a1", instance_id="i-a")
    resp = ctx.send(
        member_id="a2", member_epoch=0, instance_id="i-a", rebalance_timeout_ms=1, subscribed_topic_names=["t"],
        topic_partitions=[],
    )  # fmt: skip
    assert resp.error == Errors.UNRELEASED_INSTANCE_ID
    assert "cannot join the group because the instance id is owned by a1 member" in resp.error_message


def test_a_static_member_heartbeating_with_another_members_instance_id_is_fenced():
    ctx = ConsumerContext()
    a = ctx.join("a1", instance_id="i-a")
    ctx.join("b", instance_id="i-b")
    resp = ctx.send(member_id="b", member_epoch=a.epoch, instance_id="i-a", topic_partitions=[])
    assert resp.error == Errors.FENCED_INSTANCE_ID
    assert ctx.send(member_id="a1", member_epoch=a.epoch, instance_id="i-x").error == Errors.UNKNOWN_MEMBER_ID


def test_the_assignment_is_sent_only_when_it_changes_or_on_a_full_request():
    ctx = ConsumerContext()
    a = ctx.join("a")
    quiet = ctx.heartbeat(a, topic_partitions=None)
    assert quiet.assignment is None
    full = ctx.heartbeat(a, rebalance_timeout_ms=REBALANCE_MS, subscribed_topic_names=["t"])
    assert set(full.assignment) == tps("t", *range(6))


def test_changing_the_subscription_bumps_the_epoch_and_moves_the_assignment():
    ctx = ConsumerContext(topics={"t": 2, "u": 2})
    a = ctx.join("a")
    assert ctx.describe().group_epoch == 2
    ctx.heartbeat(a, subscribed_topic_names=["u"])
    assert ctx.describe().group_epoch == 3
    ctx.settle([a])
    assert a.owned == tps("u", 0, 1)


def test_regex_subscriptions_follow_new_topics():
    ctx = ConsumerContext(topics={"orders-eu": 2, "other": 1})
    resp = ctx.send(
        member_id="a", member_epoch=0, rebalance_timeout_ms=1, subscribed_topic_regex="orders-.*", topic_partitions=[]
    )
    assert set(resp.assignment) == tps("orders-eu", 0, 1)
    ctx.coord.update_topic_metadata({"orders-us": 1})
    resp = ctx.send(member_id="a", member_epoch=resp.member_epoch, topic_partitions=resp.assignment)
    assert TopicPartition("orders-us", 0) in resp.assignment


def test_adding_partitions_to_a_subscribed_topic_reassigns():
    ctx = ConsumerContext(topics={"t": 2})
    a = ctx.join("a")
    ctx.coord.update_topic_metadata({"t": 4})
    ctx.heartbeat(a)
    assert a.owned == tps("t", 0, 1, 2, 3) and ctx.describe().group_epoch == 3


def test_a_group_id_with_spaces_around_a_name_is_not_blank():
    ctx = ConsumerContext()
    ctx.join("a", group_id=" g ")
    assert " g " in ctx.coord.consumer.groups
