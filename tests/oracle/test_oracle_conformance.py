"""The differential harness against Kafka 4.4 itself: 120 random sequences agree with themselves, and a real
difference between two targets is found, confirmed and shrunk to the step that shows it. The long run of Kafka
against itself (10,000 sequences) is `python -m benchmarks conformance`."""

from __future__ import annotations

import dataclasses

import pytest

from benchmarks.kafka.conformance import run_many
from benchmarks.kafka.differential import compare, confirmed_divergence, normalise, prepare_target, run_sequence, shrink
from benchmarks.kafka.sequences import generate, step


@pytest.fixture(scope="module")
def kafka(kafka_broker):
    return prepare_target("kafka", kafka_broker.bootstrap)


def test_kafka_agrees_with_itself_on_120_sequences(kafka):
    report = run_many(kafka, kafka, range(120), workers=16)
    assert report.sequences == 120 and report.steps > 900
    assert [d.report() for _, d in report.divergences] == []


def test_generated_names_are_normalised_by_slot(kafka):
    steps = (step("join", 0, v=9, static=False, topics=("conf-a",)),
             step("join", 0, v=9, static=False, topics=("conf-a",)),
             step("join", 1, v=9, static=True, topics=("conf-a",)),
             step("describe", v=5, groups="own"))
    outcomes = normalise(run_sequence(kafka, steps), kafka)
    assert outcomes[0]["error_code"] == "member_id_required" and outcomes[0]["member_id"] == "s0#1"
    assert outcomes[1]["error_code"] == "none" and outcomes[1]["leader"] == "s0#1"
    assert outcomes[2] == "no answer"  # the static member waits for s0 to rejoin the rebalance
    (group,) = outcomes[3]["groups"]
    assert group["group_id"] == "G" and group["group_state"] == "PreparingRebalance"
    # s1 never got its answer, so its id is named by first appearance
    assert sorted(m["member_id"] for m in group["members"]) == ["?1", "s0#1"]
    assert [m["group_instance_id"] for m in group["members"] if m["member_id"] == "?1"] == ["I1"]


def test_a_real_difference_is_found_and_shrunk(kafka):
    # The same broker seen through swapped topic ids: its KIP-848 assignments name the other topic.
    swapped = dataclasses.replace(kafka, name="swapped", topic_ids={"conf-a": kafka.topic_ids["conf-b"],
                                                                     "conf-b": kafka.topic_ids["conf-a"]})
    steps = (step("describe", v=5, groups="own"),
             step("cg_join", 0, v=1, static=False, topics=("conf-a",), assignor=None),
             step("list", v=5, states=""),
             step("cg_heartbeat", 0, v=1, full=False))
    assert compare(steps, kafka, kafka) is None
    found = confirmed_divergence(steps, kafka, swapped)
    assert found is not None
    assert [s.action for s in found.steps] == ["cg_join"]
    assert "conf-a" in str(found.left) and "conf-b" in str(found.right)
    assert "divergence at step 0 of 1" in found.report()


def test_shrink_deletes_every_step_the_divergence_does_not_need():
    steps = generate(7)
    needed = {steps[2], steps[5]}
    smallest = shrink(steps, lambda candidate: needed <= set(candidate))
    assert set(smallest) == needed and len(smallest) == 2



def test_a_mixed_group_split_by_kafkas_hash_order_is_not_a_divergence(kafka):
    # CI found Kafka disagreeing with itself here (1 run in 8 locally): the uniform assignor gives the
    # extra partitions to whichever member its HashMap yields first, and the classic member's id is a
    # random UUID the broker made.
    steps = (step("join", 1, v=5, static=False, topics=("conf-a", "conf-b")),
             step("cg_join", 0, v=1, static=True, topics=("conf-a", "conf-b"), assignor="bad"),
             step("join", 1, v=5, static=False, topics=("conf-a", "conf-b")),
             step("commit", 1, v=8, offset=17, partitions=(0, 1, 2), topic="conf-a"),
             step("cg_heartbeat", 0, v=1, full=True),
             step("describe", v=5, groups="both"))
    run = run_sequence(kafka, steps)
    assert run.mixed
    heartbeat = normalise(run, kafka)[4]
    assert heartbeat["error_code"] == "none" and heartbeat["assignment"] == "<order-dependent>"
    assert [compare(steps, kafka, kafka) for _ in range(8)] == [None] * 8
