"""Scripted schedules of the simulator: a lost replica is replaced while the clients go on committing.

Under steady commits a learner is always a flush or two behind the high watermark. The router used to
promote it only when a repair pass happened to find it exactly at the watermark, which could take
tens of seconds on a busy cluster. A learner now becomes a voter once the new set of voters holds every
acknowledged write on enough replicas (Raft's rule for learners); the second schedule is the overlap
that rule exists for, and the break 'learner-votes-early' of the mutation table, which 10,000 random
schedules did not catch, fails it. The last two are learners that lose their storage: one whose disk
was full as it started (its first epoch checkpoint failed, so it came back without storage and refused
every record: the repair waited for it forever; found while adding the disk-full and wiped-directory faults
to the Ray-level chaos of issue 27), and one whose directory was wiped while it caught up.
"""

from __future__ import annotations

from sim_mutants import MUTATIONS
from sim_run import open_schedule


def _replica_ids(schedule) -> list[str]:
    [rs] = schedule.world.procs["router"].obj.replication.sets
    return sorted(r.replica_id for r in rs.replicas)


def _leader_and_follower_to_lose(s):
    """After 3 simulated seconds of commits: the leader, and a live follower on neither its node nor the router's."""
    s.world.run_until(3.0)
    leader = s.leader()
    return leader, next(p for p in s.replicas() if p.node not in (leader.node, "n0") and p.alive)  # n0: the router


def test_a_follower_lost_with_its_node_is_replaced_within_two_seconds_under_steady_commits(tmp_path):
    with open_schedule(11, tmp_path) as s:
        w = s.world
        leader, lost = _leader_and_follower_to_lose(s)
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


def _learner_promoted_then_leader_lost(s) -> list[str]:
    """Overlapping faults around a repair; the checker's violations.

    One follower is paused (the other then holds every new acknowledged write with the leader), that other
    follower's node is lost, the learner replacing it sits behind a slow link, and the leader dies the moment
    the router makes the learner a voter. The surviving voters must hold every acknowledged write."""
    w = s.world
    w.run_until(3.0)
    leader = s.leader()
    others = [p for p in s.replicas() if p is not leader and p.alive]
    lost = next(p for p in others if p.node != "n0")  # n0: the router
    paused = next(p for p in others if p is not lost)
    w.pause(paused.name, 60.0)
    w.run_until(w.now + 1.0)  # acknowledged on the leader and `lost` only
    lost_id = lost.obj.replica_id
    w.lose_node(lost.node)
    [rs] = w.procs["router"].obj.replication.sets
    w.run_until(w.now + 5.0, stop=lambda: rs.learner is not None)  # a repair pass waits 2 s for the paused one
    assert rs.learner is not None, "no learner was started"
    w.slow[frozenset((leader.name, rs.learner[1].handle.name))] = 3.0  # longer than a repair pass
    w.run_until(w.now + 30.0, stop=lambda: lost_id not in _replica_ids(s))
    assert lost_id not in _replica_ids(s), "the learner never became a voter"
    w.crash(leader.name, restart=False)
    w.resume(paused.name)
    w.slow.clear()
    # Every key is read as soon as a new leader serves: the clients' later commits would hide a lost one.
    w.run_until(w.now + 10.0, stop=lambda: any(p.alive and p.obj is not None and p.obj.runtime is not None
                                               for p in s.replicas()))
    s.final_reads()
    w.run_until(w.now + 10.0)
    s.final_reads()
    s.check_logs()
    return s.checker.violations


def test_a_learner_votes_only_once_no_acknowledged_write_depends_on_the_replica_it_replaces(tmp_path):
    with open_schedule(11, tmp_path / "real") as s:
        assert s.checker.acks == 0
        violations = _learner_promoted_then_leader_lost(s)
        assert s.checker.acks > 50 and not violations, violations
    with MUTATIONS["learner-votes-early"][1](), open_schedule(11, tmp_path / "mutated") as s:
        violations = _learner_promoted_then_leader_lost(s)
    assert violations, "a learner voting before the new voters hold the watermark went unnoticed"


def _repair_with_a_lost_learner(s, wipe: bool) -> tuple[list[str], list[str], set[str]]:
    """A follower's node lost; the learner replacing it loses its storage (its disk full as it starts, or with
    `wipe` its directory wiped once it holds records). Returns the voters before and after 20 simulated seconds
    and the ids of the replicas that answered as lost."""
    w = s.world
    w.run_until(3.0)
    leader = s.leader()
    lost = next(p for p in s.replicas() if p.node not in (leader.node, "n0") and p.alive)  # n0: the router
    spare = [n for n in w.nodes if n != "client" and all(p.node != n for p in s.replicas())]
    before = _replica_ids(s)
    w.lose_node(lost.node)
    [rs] = w.procs["router"].obj.replication.sets
    if not wipe:
        for n in spare:
            w.nodes[n].files.full = True
    w.run_until(w.now + 5.0, stop=lambda: rs.learner is not None)
    assert rs.learner is not None, "no learner was started"
    learner = w.procs[rs.learner[1].handle.name]
    if wipe:
        w.run_until(w.now + 5.0, stop=lambda: learner.obj is not None and learner.obj.end > 0)
        w.nodes[learner.node].files.wipe()
    else:
        w.run_until(w.now + 0.5)
        for n in spare:
            w.nodes[n].files.full = False
    lost_ids: set[str] = set()
    voters_lost: list[str] = []

    def watch(proc) -> None:
        if proc.obj is not None and getattr(proc.obj, "lost", False):
            lost_ids.add(proc.obj.replica_id)
        voters_lost.extend(sorted(lost_ids & set(_replica_ids(s))))

    w.after_step = watch
    w.run_until(w.now + 20.0)
    # A learner wiped after it acknowledged records may be promoted on those acks before its leader hears that it
    # lost them (a voter's disk failing just after its ack); one that never held anything must never be.
    assert wipe or not voters_lost, f"replicas without their storage became voters: {sorted(set(voters_lost))}"
    return before, _replica_ids(s), lost_ids


def test_a_learner_that_lost_its_storage_is_replaced_and_never_votes(tmp_path):
    for wipe in (False, True):
        with open_schedule(11, tmp_path / str(wipe)) as s:
            before, after, lost_ids = _repair_with_a_lost_learner(s, wipe)
            [rs] = s.world.procs["router"].obj.replication.sets
            assert lost_ids, "the learner did not lose its storage"
            assert rs.learner is None and len(after) == 3 and not set(after) & lost_ids, (before, after, lost_ids)
            assert len(set(after) - set(before)) == 1, (before, after)  # the lost follower's slot, filled anew
            assert {p.obj.replica_id for p in s.replicas() if p.alive and p.obj is not None} >= set(after)
            s.final_reads()
            s.check_logs()
            assert not s.checker.violations, s.checker.violations


def test_a_learner_whose_record_could_not_be_saved_is_planned_again_once_the_disk_has_room(tmp_path):
    # Seed 320805's product fault: the router's disk refused the placement record of a planned learner, and
    # the repair kept that learner, which has no actor, and waited for it forever.
    with open_schedule(11, tmp_path) as s:
        w = s.world
        _, lost = _leader_and_follower_to_lose(s)
        lost_id = lost.obj.replica_id
        [rs] = w.procs["router"].obj.replication.sets
        w.nodes["n0"].files.full = True
        w.lose_node(lost.node)
        w.run_until(w.now + 2.0)
        assert rs.learner is None or rs.learner[1].handle is not None, "a planned learner without an actor"
        assert lost_id in _replica_ids(s)
        w.nodes["n0"].files.full = False
        w.run_until(w.now + 5.0, stop=lambda: lost_id not in _replica_ids(s))
        assert lost_id not in _replica_ids(s) and len(_replica_ids(s)) == 3
        w.run_until(w.now + 1.0)
        assert not s.checker.violations, s.checker.violations


def test_a_leader_refuses_a_learner_without_an_actor_and_goes_on_leading(tmp_path):
    with open_schedule(11, tmp_path) as s:
        w = s.world
        w.run_until(3.0)
        leader = s.leader()
        incarnation, acks = leader.incarnation, s.checker.acks
        ref = w.send(("n0-test", 0), leader.name, "add_learner", ("0-9.9", None))
        w.run_until(w.now + 1.0, stop=lambda: ref.done)
        assert isinstance(ref.error, ValueError) and "no actor handle" in str(ref.error)
        w.run_until(w.now + 1.0)
        assert s.leader() is leader and leader.alive and leader.incarnation == incarnation
        assert s.checker.acks > acks and not s.checker.violations
