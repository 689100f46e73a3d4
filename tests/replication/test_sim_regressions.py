"""Each deliberate break of the mutation table, kept with the seed that caught it: the seed passes on the real
code and fails with the break applied (by monkeypatching in this process, never in the product code).

These are the issue's bug classes turned around: with the break, the simulator finds the bug at that seed;
without it (the fix), the same schedule holds every property.
"""

from __future__ import annotations

import pytest
from sim_mutants import MUTATIONS
from sim_run import run_schedule

# mutation -> the first seed that caught it (python -m benchmarks sim-mutations; README, "Replication")
CAUGHT = {
    "follower-unsynced-end": 2,
    "compaction-past-hw": 47,
    "truncation-skipped": 27,
    "acks-one": 15,
    "promise-before-fsync": 4,
    "least-up-to-date-leader": 2,
    "failed-log-acknowledges": 134,
    "wiped-replica-votes": 580,
    "truncation-one-round": 599,
    "no-lease": 1105,
    "stale-epoch-accepted": 2077,
    "own-epoch-marker-rule-removed": 2664,
}

# Seeds where the simulator found a bug in the real code (see docs/replication.md): they pass since its fix.
FOUND = {
    101571: "a leader that promised a newer epoch went on acknowledging for the 50 ms before its exit",
    600: "a router restarted during a repair reopened a wiped replica, which a lost incarnation had given an empty "
         "directory, as a voter",
    320805: "a router paused, then restarted while paused: the election requests queued at it were never answered "
            "(the simulator dropped them; Ray fails them), and a repair kept a planned learner after its save failed",
    96849: "(the checker's) a commit the network delivered twice was refused by one copy and applied by the other; "
           "the refusal was taken for the commit's fate",
}


@pytest.mark.parametrize(("mutation", "seed"), sorted(CAUGHT.items()))
def test_the_seed_that_caught_a_break_passes_without_it_and_fails_with_it(mutation, seed):
    assert run_schedule(seed).ok
    _, apply = MUTATIONS[mutation]
    with apply():
        result = run_schedule(seed)
    assert not result.ok, f"{mutation} is no longer caught by seed {seed}"


@pytest.mark.parametrize("seed", sorted(FOUND))
def test_a_seed_that_found_a_bug_holds_every_property_since_its_fix(seed):
    result = run_schedule(seed)
    assert result.ok, f"{FOUND[seed]}:\n{result.report()}"
