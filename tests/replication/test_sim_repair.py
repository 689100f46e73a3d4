"""Scripted schedules of the simulator: a lost replica is replaced while the clients go on committing.

Under steady commits a learner is always a flush or two behind the high watermark. The router used to
promote it only when a repair pass happened to find it exactly at the watermark, which could take
tens of seconds on a busy cluster; the leader now finishes the catch-up inside `promote`.
"""

from __future__ import annotations

from sim_run import open_schedule


def _replica_ids(schedule) -> list[str]:
    [rs] = schedule.world.procs["router"].obj.replication.sets
    return sorted(r.replica_id for r in rs.replicas)


def test_a_follower_lost_with_its_node_is_replaced_within_two_seconds_under_steady_commits(tmp_path):
    with open_schedule(11, tmp_path) as s:
        w = s.world
        w.run_until(3.0)
        leader = s.leader()
        lost = next(p for p in s.replicas() if p.node not in (leader.node, "n0") and p.alive)  # n0: the router
        lost_id = lost.obj.replica_id
        before = _replica_ids(s)
        acks, lost_at = s.checker.acks, w.now
        w.lose_node(lost.node)
        [rs] = w.procs["router"].obj.replication.sets
        w.run_until(w.now + 2.0, stop=lambda: rs.learner is not None)
        assert rs.learner is not None, "no learner was started"
        # The learner's link is a busy machine's (40 ms each way): it is always a few commits behind.
        w.slow[frozenset((leader.name, rs.learner[1].handle.name))] = 0.04
        w.run_until(w.now + 10.0, stop=lambda: lost_id not in _replica_ids(s))
        after = _replica_ids(s)
        assert lost_id in before and lost_id not in after and len(after) == 3, (before, after)
        assert w.now - lost_at < 2.0, f"the repair took {w.now - lost_at:.2f} simulated s"
        assert s.checker.acks > acks + 20  # the clients went on committing throughout
        assert s.leader() is leader
        w.run_until(w.now + 1.0)
        assert not s.checker.violations, s.checker.violations
