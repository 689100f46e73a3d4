"""The classic group state machine: Kafka's valid-previous-states table."""

import itertools

import pytest

from groupcoord.protocol.classic.group import (
    VALID_PREVIOUS_STATES,
    ClassicGroup,
    GroupState,
    IllegalStateTransition,
)

E, P, C, S, D = (
    GroupState.EMPTY,
    GroupState.PREPARING_REBALANCE,
    GroupState.COMPLETING_REBALANCE,
    GroupState.STABLE,
    GroupState.DEAD,
)

KAFKA_TABLE = {
    E: {P},
    P: {S, C, E},
    C: {P},
    S: {C},
    D: {S, P, C, E, D},
}

ALL_PAIRS = list(itertools.product(GroupState, GroupState))
LEGAL = [(a, b) for a, b in ALL_PAIRS if a in KAFKA_TABLE[b]]
ILLEGAL = [(a, b) for a, b in ALL_PAIRS if a not in KAFKA_TABLE[b]]


def _group_in(state):
    group = ClassicGroup("g", 0)
    group.state = state
    return group


def test_state_names_are_kafkas():
    assert [s.value for s in GroupState] == [
        "Empty",
        "PreparingRebalance",
        "CompletingRebalance",
        "Stable",
        "Dead",
    ]


def test_valid_previous_states_match_kafka():
    assert {k: set(v) for k, v in VALID_PREVIOUS_STATES.items()} == KAFKA_TABLE


@pytest.mark.parametrize(("source", "target"), LEGAL, ids=lambda s: s.value)
def test_legal_transition(source, target):
    group = _group_in(source)
    group.transition_to(target, 1234)
    assert (group.state, group.previous_state, group.state_timestamp_ms) == (target, source, 1234)


@pytest.mark.parametrize(("source", "target"), ILLEGAL, ids=lambda s: s.value)
def test_illegal_transition_raises(source, target):
    group = _group_in(source)
    with pytest.raises(IllegalStateTransition):
        group.transition_to(target, 1234)
    assert group.state == source


def test_every_transition_is_covered():
    assert len(LEGAL) + len(ILLEGAL) == 25
    assert len(LEGAL) == 11


def test_new_group_is_empty_at_generation_zero():
    group = ClassicGroup("g", 42)
    assert (group.state, group.generation_id, group.protocol_type, group.protocol_name, group.leader_id) == (
        E,
        0,
        None,
        None,
        None,
    )
    assert group.state_timestamp_ms == 42


@pytest.mark.parametrize(("state", "expected"), [(E, True), (P, False), (C, True), (S, True), (D, False)])
def test_can_rebalance(state, expected):
    assert _group_in(state).can_rebalance() is expected
