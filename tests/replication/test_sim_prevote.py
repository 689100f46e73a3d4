"""Scripted schedules of the simulator: an election deposes the leader only when a majority no longer hears it.

A follower that stops hearing a healthy leader, and a router whose ping of it times out (a busy machine), used to
start an election that the leader answered at once, deposing itself (the election storm of the 30-loss chaos runs).
KIP-996's pre-vote asks the replicas first.
"""

from __future__ import annotations

from sim_run import open_schedule


def test_a_leader_that_a_majority_still_hears_keeps_leading_when_one_follower_and_the_router_miss_it(tmp_path):
    with open_schedule(11, tmp_path) as s:
        w = s.world
        w.run_until(3.0)
        leader = s.leader()
        epoch, incarnation = leader.obj.rlog.epoch, leader.incarnation
        deaf = next(p for p in s.replicas() if p is not leader)
        # One follower stops hearing the leader; the router's calls to it take 0.3 s each way (its ping waits 0.2 s).
        w.partitions.add(frozenset((leader.name, deaf.name)))
        w.slow[frozenset(("router", leader.name))] = 0.3
        acks = s.checker.acks
        w.run_until(w.now + 5.0)
        assert s.leader() is leader and leader.incarnation == incarnation and leader.obj.rlog.epoch == epoch
        assert s.checker.acks > acks + 20  # it went on acknowledging commits, with the follower that hears it
        assert not s.checker.violations, s.checker.violations


def test_a_leader_that_no_follower_hears_is_replaced_though_the_router_still_reaches_it(tmp_path):
    with open_schedule(11, tmp_path) as s:
        w = s.world
        w.run_until(3.0)
        leader = s.leader()
        epoch = leader.obj.rlog.epoch
        for p in s.replicas():
            if p is not leader:
                w.partitions.add(frozenset((leader.name, p.name)))
        w.run_until(w.now + 5.0)
        new = s.leader()
        assert new is not leader and new.obj.rlog.epoch > epoch
        assert not s.checker.violations, s.checker.violations
