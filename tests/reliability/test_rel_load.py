"""Load without false positives: a few hundred simulated members heartbeat and commit, and none is expired.

Members run in two SimHost actors (async loops calling the partition actors directly). Every
heartbeat must be answered NONE and every commit acknowledged; an expiry would be reported with
the client-side bound on how long the server went without that member's heartbeat. The long
run is `python -m benchmarks.soak --minutes N`.
"""

from __future__ import annotations

import pytest
from rel_chaos import spread_group_ids
from rel_sim import run_hosts
from services import running_service

from groupcoord.actors.client.admin import AdminClient

NAMESPACE = "gc-rel-load"
GROUPS, MEMBERS_PER_GROUP, HOSTS = 30, 10, 2
SESSION_MS, HEARTBEAT_MS, SECONDS = 3_000, 1_000, 25


@pytest.fixture(scope="module")
def svc(ray_local, tmp_path_factory):
    with running_service(tmp_path_factory, NAMESPACE, 4, initial_rebalance_delay_ms=500) as service:
        yield service


def test_rel_hundreds_of_members_see_no_spurious_expiry(svc) -> None:
    """300 members, 3 s sessions, 1 s heartbeats, commits every 3 s: zero expiries, all answers NONE."""
    groups = spread_group_ids(svc.num_partitions, -(-GROUPS // svc.num_partitions), prefix="load")[:GROUPS]
    stats = run_hosts(svc, groups, MEMBERS_PER_GROUP, HOSTS, SECONDS, SESSION_MS, HEARTBEAT_MS)
    print(f"load: {stats.summary()}")
    assert stats.members == GROUPS * MEMBERS_PER_GROUP
    assert not stats.spurious_expiries, stats.spurious_expiries[:10]
    assert stats.expiries == 0, f"{stats.expiries} expiries; longest heartbeat gap {stats.max_send_gap_ms:.0f} ms"
    assert set(stats.heartbeats) == {"NONE"}, stats.heartbeats
    assert set(stats.commits) == {"NONE"}, stats.commits
    described = AdminClient(svc).describe_groups(groups)
    assert all(d.group_state == "Stable" and len(d.members) == MEMBERS_PER_GROUP for d in described.values())
