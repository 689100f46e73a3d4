"""groupcoord's Kafka listener against Kafka 4.4: random sequences, and the divergences kept on record.

Every kind of divergence the differential run finds must be one of `KEPT` (docs/conformance.md says
why each is kept); each is also pinned by its shortest sequence, so a fix shows up here as a test to
update, not as silence.
"""

from __future__ import annotations

import pytest
from services import running_service

from benchmarks.kafka.conformance import run_many
from benchmarks.kafka.differential import compare, prepare_target
from benchmarks.kafka.sequences import step

NAMESPACE = "gc-test-oracle"

# signature of the divergence -> its shortest sequence (docs/conformance.md, "Kept divergences")
KEPT = {
    "cg_join: member_epoch": (step("cg_join", 0, v=1, static=False, topics=("conf-a", "conf-b"), assignor=None),),
    "cg_describe: groups[].assignment_epoch, groups[].group_epoch": (step("cg_describe", v=1, groups="own"),),
    "sync: error_code": (step("sync", 0, v=5),),
    "find: coordinators[].error_message": (step("find", v=6, group="own"),),
    "find: error_message": (step("find", v=3, group="own"),),
    "cg_join: assignment, error_code, error_message, heartbeat_interval, member_epoch, member_id": (
        step("cg_join", 1, v=1, static=True, topics="bad", assignor=None),),
}



def _fields(signature: str) -> tuple[str, set[str]]:
    action, _, fields = signature.partition(": ")
    return action, {f.split("[")[0].split(".")[0] for f in fields.split(", ")}


def kafka_own_choice(signature: str) -> bool:
    """Kinds Kafka 4.4 also shows against itself (docs/conformance.md): which member leads a classic group
    (keyed by the random member ids Kafka generates), hence the assignment the leader sends; and
    assignor ties with a classic member in a consumer group."""
    action, names = _fields(signature)
    return (action == "sync" and names == {"assignment"}) or (action == "join" and names <= {"leader", "members"}) \
        or (action.startswith("cg_") and names == {"assignment"})


def explained(signature: str) -> bool:
    """A kind is explained when each field that differs is one a kept kind of the same request differs in, or
    one Kafka differs in against itself (a step can show both at once, e.g. the first epoch and a tie)."""
    if signature in KEPT or kafka_own_choice(signature):
        return True
    action, names = _fields(signature)
    allowed = set().union(*(f for a, f in map(_fields, KEPT) if a == action))
    allowed |= {"assignment"} if action == "sync" or action.startswith("cg_") else set()
    allowed |= {"leader", "members"} if action == "join" else set()
    return names <= allowed


@pytest.fixture(scope="module")
def targets(ray_local, tmp_path_factory, kafka_broker):
    with running_service(tmp_path_factory, NAMESPACE, 4, initial_rebalance_delay_ms=0, kafka_listener="127.0.0.1:0",
                         max_session_timeout_ms=60_000, consumer_session_timeout_ms=10_000,
                         consumer_heartbeat_interval_ms=1000) as service:
        yield prepare_target("kafka", kafka_broker.bootstrap), prepare_target("groupcoord", service.kafka_bootstrap)


@pytest.mark.parametrize("signature", sorted(KEPT))
def test_kept_divergence_still_shows(targets, signature):
    kafka, groupcoord = targets
    found = compare(KEPT[signature], kafka, groupcoord)
    assert found is not None and found.signature() == signature, found and found.report("kafka", "groupcoord")


def test_random_sequences_diverge_only_in_kept_ways(targets):
    kafka, groupcoord = targets
    report = run_many(kafka, groupcoord, range(100_000, 100_060), workers=8, shrink=False)
    assert report.sequences == 60
    unexpected = {kind for kind in report.kinds if not explained(kind)}
    assert unexpected == set(), [d.report("kafka", "groupcoord") for _, d in report.divergences
                                 if d.signature() in unexpected]


def test_a_kind_is_explained_only_by_fields_kept_or_kafkas_own_choice():
    assert explained("cg_join: assignment, member_epoch")  # the kept first epoch and an assignor tie at once
    assert not explained("cg_heartbeat: member_epoch")
    assert not explained("commit: topics[].partitions[].error_code")
