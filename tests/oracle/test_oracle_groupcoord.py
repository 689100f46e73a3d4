"""groupcoord's Kafka listener against Kafka 4.4: the divergences fixed, those kept on record, and random sequences.

Every divergence the differential runs found is either fixed (its sequence is in `FIXED` and must
now agree) or kept with its reason in docs/conformance.md (its sequence is in `KEPT` and must still
show exactly that difference, so that a change shows up here as a test to update, not as silence).
"""

from __future__ import annotations

import re

import pytest
from services import running_service

from benchmarks.kafka.conformance import run_many
from benchmarks.kafka.differential import CONFIRM_SETTLE_S, compare, prepare_target
from benchmarks.kafka.sequences import generate, step

NAMESPACE = "gc-test-oracle"


def _cg_join(slot: int, topics=("conf-a",), **opts):
    return step("cg_join", slot, v=1, static=opts.pop("static", False), topics=topics,
                assignor=opts.pop("assignor", None), **opts)


# Sequences that diverged once and agree now (docs/conformance.md, "Fixed").
FIXED = {
    # 1. a new consumer group starts at epoch 1 and its first subscribing member bumps it to 2
    "first member epoch 2": (_cg_join(0, topics=("conf-a", "conf-b")), step("cg_describe", v=1, groups="own")),
    # 2. ConsumerGroupDescribe of an unknown group: epochs 0 (Kafka's defaults)
    "describe of an unknown group": (step("cg_describe", v=1, groups="own"),),
    # 3. SyncGroup v5 without protocol type and name: INCONSISTENT_GROUP_PROTOCOL before the member is checked
    "sync v5 before join": (step("sync", 0, v=5),),
    # 4. FindCoordinator's error message of error 0 is "NONE"
    "find coordinator message": (step("find", v=6, group="own"), step("find", v=3, group="own")),
    # 5. an empty subscription joins (at the current epoch, with nothing assigned)
    "empty subscription": (_cg_join(1, topics="bad", static=True), step("cg_describe", v=1, groups="own")),
    # found by the long runs:
    "commit below v9 from a KIP-848 member": (_cg_join(0),
                                              step("commit", 0, v=7, topic="conf-a", partitions=(0,), offset=5)),
    "offset delete while a new member joins": (
        step("join", 0, v=7, static=False, topics=("conf-a",)), step("join", 0, v=7, static=False, topics=("conf-a",)),
        step("sync", 0, v=5), step("join", 1, v=9, static=False, topics=("conf-b",)),
        step("join", 1, v=9, static=False, topics=("conf-b",)),
        step("offset_delete", 0, v=0, topic="conf-b", partitions=(0,))),
    "rejoin under the same member id": (_cg_join(0), _cg_join(0)),
    "offset fetch v9 as a member that is not one": (
        _cg_join(1, member="bad"), step("fetch", 1, v=9, group="own", member="current", topics="all")),
    "commit v9 with a generation to no group": (
        step("commit", 0, v=9, gen="bad", topic="conf-a", partitions=(0,), offset=5),),
    "the last member leaves": (_cg_join(0, assignor="range", topics=("conf-a", "conf-b")),
                               step("cg_heartbeat", 0, v=1, epoch="bad", full=False), step("cg_leave", 0, v=1),
                               step("cg_describe", v=1, groups="own")),
    # a 0 ms rebalance timer (no member left) ran up to 0.1 s late while coordinator time lagged (CI, seed 100065)
    "the last member leaves while a member id is pending": (
        step("join", 1, v=7, static=False, topics=("conf-a",)), step("join", 1, v=7, static=False, topics=("conf-a",)),
        step("sync", 1, v=5), step("join", 0, v=5, static=False, topics=("conf-a",)), step("leave", 1, v=5),
        step("join", 1, v=9, static=False, topics=("conf-a",)), step("join", 1, v=9, static=False, topics=("conf-a",))),
    "join with a bad session timeout into a consumer group": (
        _cg_join(1), step("join", 0, v=9, session="bad", static=False, topics=("conf-a",))),
}

# Kept differences: signature -> its shortest sequence (docs/conformance.md, "Kept").
KEPT = {
    # A Kafka bug: with as many members asking for "uniform" as for "range", Kafka compares the preferred
    # assignor computed from two hash tables iterated in different orders, so a heartbeat that changes
    # nothing bumps the group epoch (and starts a rebalance); groupcoord bumps only on a real change.
    "cg_heartbeat: member_epoch": (_cg_join(0, assignor="uniform"), _cg_join(1, assignor="range"),
                                   step("cg_heartbeat", 0, v=1, full=False), step("cg_heartbeat", 1, v=1, full=False)),
    # Our choice (not implemented): no migration of a non-empty group between the protocols. groupcoord
    # answers as Kafka with group.consumer.migration.policy=disabled (checked against such a broker).
    "join: error_code, member_id": (_cg_join(1), step("join", 0, v=9, static=False, topics=("conf-a",))),
    "cg_join: error_code, error_message, heartbeat_interval, member_epoch, member_id": (
        step("join", 1, v=7, static=True, topics=("conf-a",)), _cg_join(0, topics=("conf-b",))),
}


def kafka_own_choice(signature: str) -> bool:
    """Kinds Kafka 4.4 also shows against itself or against another broker (docs/conformance.md): which member
    leads a classic group (keyed by the random member ids Kafka generates), hence the assignment the leader
    sends; and which partitions the uniform assignor moves (it iterates topics by their random topic ids)."""
    action, _, fields = signature.partition(": ")
    paths = [re.split(r"[\[\].]+", f) for f in fields.split(", ")]
    names = {p[0] for p in paths}
    return (action == "sync" and names == {"assignment"}) or (action == "join" and names <= {"leader", "members"}) \
        or (action.startswith("cg_") and all({"assignment", "target_assignment"} & set(p) for p in paths))


def _names(signature: str) -> tuple[str, set[str]]:
    action, _, fields = signature.partition(": ")
    return action, {re.split(r"[\[\].]+", f)[0] for f in fields.split(", ")}


def explained(signature: str) -> bool:
    """A kind is explained when each field that differs is one a kept kind of the same request differs in, or one
    Kafka differs in against itself (a step can show both at once, e.g. the assignor-tie epoch and a tie's
    assignment)."""
    if signature in KEPT or kafka_own_choice(signature):
        return True
    action, names = _names(signature)
    allowed = set().union(*(f for a, f in map(_names, KEPT) if a == action))
    allowed |= {"assignment", "target_assignment"} if action == "sync" or action.startswith("cg_") else set()
    allowed |= {"leader", "members"} if action == "join" else set()
    return names <= allowed


def mixes_protocols(seed: int) -> bool:
    """Whether a generated sequence has classic and consumer-protocol members (Kafka would migrate the group)."""
    steps = generate(seed)
    return any(s.action == "join" for s in steps) and any(s.action in ("cg_join", "cg_heartbeat") for s in steps)


@pytest.fixture(scope="module")
def targets(ray_local, tmp_path_factory, kafka_broker):
    with running_service(tmp_path_factory, NAMESPACE, 4, initial_rebalance_delay_ms=0, kafka_listener="127.0.0.1:0",
                         max_session_timeout_ms=60_000, consumer_session_timeout_ms=10_000,
                         consumer_heartbeat_interval_ms=1000) as service:
        yield prepare_target("kafka", kafka_broker.bootstrap), prepare_target("groupcoord", service.kafka_bootstrap)


@pytest.mark.parametrize("name", sorted(FIXED))
def test_fixed_divergence_agrees_now(targets, name):
    kafka, groupcoord = targets
    found = compare(FIXED[name], kafka, groupcoord)
    if found is not None:
        found = compare(FIXED[name], kafka, groupcoord, settle=CONFIRM_SETTLE_S)  # as confirmed_divergence confirms
    assert found is None, found.report("kafka", "groupcoord")


@pytest.mark.parametrize("signature", sorted(KEPT))
def test_kept_divergence_still_shows(targets, signature):
    kafka, groupcoord = targets
    found = compare(KEPT[signature], kafka, groupcoord)
    assert found is not None and found.signature() == signature, found and found.report("kafka", "groupcoord")


def test_random_sequences_diverge_only_in_kept_ways(targets):
    kafka, groupcoord = targets
    # Sequences mixing the protocols are the migration difference (kept above); the others are compared.
    seeds = [s for s in range(100_000, 100_030) if not mixes_protocols(s)]
    report = run_many(kafka, groupcoord, seeds, workers=8, shrink=False)
    assert report.sequences == len(seeds) >= 25
    unexpected = {kind for kind in report.kinds if not explained(kind)}
    assert unexpected == set(), [d.report("kafka", "groupcoord") for _, d in report.divergences
                                 if d.signature() in unexpected]


def test_a_kind_is_explained_only_by_fields_kept_or_kafkas_own_choice():
    assert explained("cg_heartbeat: assignment, member_epoch")  # the kept tie bump and a tie's assignment at once
    assert not explained("cg_heartbeat: error_code")
    assert not explained("commit: topics[].partitions[].error_code")
