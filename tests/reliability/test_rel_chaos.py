"""Chaos under load (short run): partition actors killed at random while members heartbeat and commit.

Afterwards no acknowledged commit is lost (also across one more restart of every partition), no
member that kept heartbeating was expired by a restart, and every group ends Stable. The long
run is `python -m benchmarks.chaos --minutes N`.
"""

from __future__ import annotations

import pytest
from rel_chaos import Chaos
from services import running_service

NAMESPACE = "gc-rel-chaos"
ROUNDS = 4  # kill rounds, one or two partitions each; `python -m benchmarks.chaos` is the long run
ACKS_BETWEEN = 25  # acknowledged commits before each round: every kill lands under load


@pytest.fixture(scope="module")
def svc(ray_local, tmp_path_factory):
    with running_service(tmp_path_factory, NAMESPACE, 4) as service:
        yield service


def test_rel_chaos_loses_no_acked_commit_and_expires_no_live_member(svc) -> None:
    """Random ray.kill / hard exits of partition actors under load: zero lost commits, zero expiries, all Stable."""
    chaos = Chaos(svc, groups=4, members_per_group=2, topic_partitions=6, seed=7)
    try:
        report = chaos.run(rounds=ROUNDS, acks_between=ACKS_BETWEEN)
    finally:
        chaos.close()
    print(report.summary())
    assert not chaos.fatal_errors(), chaos.fatal_errors()
    assert report.rounds == ROUNDS and sum(report.kills.values()) >= ROUNDS, report.kills
    assert report.attempts["NONE"] >= ROUNDS * ACKS_BETWEEN, report.attempts
    assert report.restart_partitions_checked > 0
    assert not report.lost, "acknowledged commits lost:\n" + "\n".join(report.lost)
    assert report.final_restart_checked
    assert report.identity_changes == 0, "a member that kept heartbeating lost its member id (was expired)"
    assert report.heartbeats["UNKNOWN_MEMBER_ID"] == 0, report.heartbeats


def test_rel_duplicate_static_members_fence_the_older_one_with_a_typed_error(svc) -> None:
    """Two members with one group.instance.id: the newer takes over, the older gets FencedInstanceIdError."""
    from rel_chaos import ChaosMember, Ledger, wait_for

    from groupcoord.actors.client.admin import AdminClient

    options = {"session_timeout_ms": 10_000, "heartbeat_interval_ms": 200, "group_instance_id": "dup"}
    ledger = Ledger()
    older = ChaosMember(svc, "dup-static", "older", ledger, 1, **options)
    newer = None
    try:
        wait_for(older.settled, 60, "the first member to join")
        newer = ChaosMember(svc, "dup-static", "newer", ledger, 2, **options)
        wait_for(lambda: older.poll_errors["FencedInstanceIdError"] > 0, 60, "the older member to be fenced")
        wait_for(newer.settled, 60, "the newer member to take over")
        described = AdminClient(svc).describe_groups(["dup-static"])["dup-static"]
        assert [(m.group_instance_id, m.member_id) for m in described.members] == [("dup", newer.member.member_id)]
        assert not older.fatal and not newer.fatal, (older.fatal, newer.fatal)
    finally:  # closed, not only stopped: a member left heartbeating outlives this module's Ray
        for m in (older, newer):
            if m is not None:
                m.close()
