"""ListGroups' state and type filters over classic and consumer groups, as Kafka 4.x's GroupMetadataManager.listGroups.

A state filter (KIP-518) keeps a group whose own state name matches one of the names, compared
lower-cased and trimmed; each type has its own states (classic: Empty, PreparingRebalance,
CompletingRebalance, Stable; consumer, KIP-848: Empty, Assigning, Reconciling, Stable), so a name
of one type's states matches no group of the other, and an unknown name matches nothing. A type
filter (KIP-848) is compared lower-cased but not trimmed (Kafka's GroupType.parse): an unknown
type matches nothing. Both filters together keep the groups that pass each.
"""

from __future__ import annotations

from consumer_context import ConsumerContext

from groupcoord.protocol import (
    Errors,
    JoinGroupRequest,
    LeaveGroupRequest,
    ListGroupsRequest,
    MemberIdentity,
    MemoryLog,
    SyncGroupRequest,
)
from groupcoord.protocol.consumer.records import ConsumerGroupTargetAssignmentMemberKey

SESSION_MS = 10_000


def _join(ctx: ConsumerContext, group_id: str):
    return ctx.coord.join_group(
        JoinGroupRequest(group_id, SESSION_MS, protocols=[("range", b"")], require_known_member_id=False)
    )


def _sync(ctx: ConsumerContext, group_id: str, joined) -> None:
    resp = joined.result()
    assert resp.error == Errors.NONE
    ctx.coord.sync_group(SyncGroupRequest(group_id, resp.generation_id, resp.member_id,
                                          assignments={resp.member_id: b""}))


def mixed() -> ConsumerContext:
    """A shard with a classic group in each live classic state and consumer groups Empty, Reconciling, Stable."""
    ctx = ConsumerContext()
    stable, empty = _join(ctx, "c-stable"), _join(ctx, "c-empty")
    _join(ctx, "c-completing")  # never syncs: CompletingRebalance
    ctx.advance(3_000)  # the initial rebalance delay: all three complete their join phase
    _sync(ctx, "c-stable", stable)
    _sync(ctx, "c-empty", empty)
    ctx.coord.leave_group(LeaveGroupRequest("c-empty", [MemberIdentity(empty.result().member_id)]))
    _join(ctx, "c-preparing")  # waits out its initial rebalance delay: PreparingRebalance
    ctx.join("a", group_id="k-stable")
    ctx.join("a", group_id="k-reconciling")
    ctx.join("b", group_id="k-reconciling")  # a must revoke half of its partitions first
    gone = ctx.join("a", group_id="k-empty")
    ctx.send("k-empty", member_id=gone.member_id, member_epoch=-1)
    return ctx


def listed(ctx: ConsumerContext, states=(), types=()) -> dict[str, tuple[str, str]]:
    """group id -> (state, type) of a ListGroups with these filters."""
    resp = ctx.coord.list_groups(ListGroupsRequest(tuple(states), tuple(types))).result()
    assert resp.error == Errors.NONE
    return {g.group_id: (g.group_state, g.group_type) for g in resp.groups}


def test_without_filters_every_group_is_listed_with_its_own_types_state():
    assert listed(mixed()) == {
        "c-stable": ("Stable", "classic"),
        "c-empty": ("Empty", "classic"),
        "c-completing": ("CompletingRebalance", "classic"),
        "c-preparing": ("PreparingRebalance", "classic"),
        "k-stable": ("Stable", "consumer"),
        "k-reconciling": ("Reconciling", "consumer"),
        "k-empty": ("Empty", "consumer"),
    }


def test_states_both_types_have_match_groups_of_both():
    ctx = mixed()
    assert set(listed(ctx, states=["Stable"])) == {"c-stable", "k-stable"}
    assert set(listed(ctx, states=["Empty"])) == {"c-empty", "k-empty"}


def test_a_classic_state_matches_no_consumer_group_and_a_consumer_state_no_classic_group():
    ctx = mixed()
    assert set(listed(ctx, states=["PreparingRebalance", "CompletingRebalance"])) == {"c-preparing", "c-completing"}
    assert set(listed(ctx, states=["Reconciling", "Assigning"])) == {"k-reconciling"}


def test_state_names_are_compared_lower_cased_and_trimmed():
    ctx = mixed()
    assert set(listed(ctx, states=["  stable ", "RECONCILING"])) == {"c-stable", "k-stable", "k-reconciling"}
    assert set(listed(ctx, states=["preparingrebalance\t"])) == {"c-preparing"}


def test_unknown_and_blank_state_names_match_nothing():
    ctx = mixed()
    assert listed(ctx, states=["Rebalancing"]) == {}
    assert listed(ctx, states=["Unknown"]) == {}
    assert listed(ctx, states=[" "]) == {}
    assert set(listed(ctx, states=["Rebalancing", "stable"])) == {"c-stable", "k-stable"}  # the known one still counts


def test_dead_groups_are_never_listed_even_when_asked_for():
    ctx = mixed()
    assert listed(ctx, states=["Dead"]) == {}


def test_type_filter_is_case_insensitive_and_keeps_one_protocols_groups():
    ctx = mixed()
    assert set(listed(ctx, types=["Classic"])) == {"c-stable", "c-empty", "c-completing", "c-preparing"}
    assert set(listed(ctx, types=["CONSUMER"])) == {"k-stable", "k-reconciling", "k-empty"}
    assert len(listed(ctx, types=["classic", "consumer"])) == 7


def test_unknown_types_match_nothing_and_type_names_are_not_trimmed():
    ctx = mixed()
    assert listed(ctx, types=["share"]) == {}  # a type Kafka knows, but no group here is one
    assert listed(ctx, types=["streams", "unknown", ""]) == {}
    assert listed(ctx, types=[" consumer"]) == {}  # GroupType.parse lower-cases only: an unknown type


def test_state_and_type_filters_together_keep_groups_that_pass_both():
    ctx = mixed()
    assert listed(ctx, states=["Stable"], types=["consumer"]) == {"k-stable": ("Stable", "consumer")}
    assert listed(ctx, states=["Empty", "PreparingRebalance"], types=["classic"]) == {
        "c-empty": ("Empty", "classic"), "c-preparing": ("PreparingRebalance", "classic")}
    assert listed(ctx, states=["Reconciling"], types=["classic"]) == {}


def test_a_consumer_group_whose_target_assignment_is_behind_its_epoch_is_listed_as_assigning():
    ctx = ConsumerContext()
    ctx.join("a")
    # A log that ends after the group epoch was bumped and before its target assignment was written.
    log = MemoryLog()
    for record in ctx.log.records:
        if isinstance(record.key, ConsumerGroupTargetAssignmentMemberKey):
            break
        log.records.append(record)
    fresh = ConsumerContext(log=log)
    fresh.coord.load(list(log.records))
    assert listed(fresh) == {"cg": ("Assigning", "consumer")}
    assert listed(fresh, states=["assigning"]) == {"cg": ("Assigning", "consumer")}
    assert listed(fresh, states=["Stable", "Reconciling", "PreparingRebalance"]) == {}
