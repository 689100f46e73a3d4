"""Replicated offsets partitions on a multi-node cluster: node losses with their disks, overlapping pauses.

Members keep committing while a node hosting a leader is removed and its storage directory
deleted: once while a deposed leader is paused (SIGSTOP, then SIGCONT once another replica
leads), once while a follower of the lost leader is paused (no majority until it resumes) and, during
the repair that follows, the router is restarted. Afterwards every acknowledged commit is returned, the
deposed leader acknowledged nothing, no offset fetch went back, the replicas agree below their high
watermarks, the voters agree after each repair, and every group stayed Stable throughout: its members
kept heartbeating through each leader change (each far shorter than their session timeout), so none
was expired and no generation changed. The long run (>= 30 node losses, with wiped directories and
full disks too) is `python -m benchmarks replication-chaos`.
"""

from __future__ import annotations

import pytest
from click.testing import CliRunner
from rel_replication import NodeChaos, metrics_ports, replicated_cluster
from scrape import scrape_nodes
from waiting import wait_for

from groupcoord.actors import ServiceError, start
from groupcoord.actors.tools.cli import main

NAMESPACE = "gc-rel-replication"
LOSSES = 2  # the short form, both overlapped; `python -m benchmarks replication-chaos` is the long run (>= 30)
SESSION_TIMEOUT_MS = 30_000  # far above any failover: a leader change must not look like a dead member


def _commits(chaos: NodeChaos) -> int:
    return chaos.ledger.counts()["NONE"]


def _commit_more(chaos: NodeChaos, n: int = 30) -> None:
    target = _commits(chaos) + n
    wait_for(lambda: _commits(chaos) >= target, 120, f"{n} more acknowledged commits")


def _generations(chaos: NodeChaos) -> dict:
    """Every group's members as the coordinator describes them (all Stable), and every member's generation."""
    described = chaos.admin.describe_groups(chaos.group_ids)
    assert all(d.group_state == "Stable" for d in described.values()), described
    return {"members": {g: sorted(m.member_id for m in d.members) for g, d in described.items()},
            "generations": {m.name: m.member.generation_id for m in chaos.members}}


def _all_in_sync(svc) -> list | None:
    """describe_partitions() once every partition's leader and replicas are all in sync, else None."""
    described = svc.describe_partitions()
    return described if all(d.leader in d.in_sync and set(d.in_sync) == set(d.replicas) for d in described) else None


def _leaders_series(samples: list, partition: int) -> dict[str, list]:
    """The replication samples of a partition's current leader: the worker exporting its highest leader epoch
    (a former leader's process keeps its last values in Ray's exporter, as the dashboard's queries expect)."""
    epochs = [(v, lab["WorkerId"]) for n, lab, v in samples
              if n == "ray_groupcoord_leader_epoch" and lab.get("partition") == str(partition)]
    worker = max(epochs)[1] if epochs else None
    out: dict[str, list] = {}
    for n, lab, v in samples:
        if lab.get("WorkerId") == worker and lab.get("partition") == str(partition):
            out.setdefault(n, []).append((lab.get("replica"), v))
    return out


def _check_replication_metrics(described: list) -> None:
    """Scraped from every node: each leader's epoch, a full in-sync set, its followers caught up, its election."""
    def as_described() -> list | None:
        samples = scrape_nodes(metrics_ports())
        leaders = [_leaders_series(samples, d.partition) for d in described]
        for d, m in zip(described, leaders, strict=True):
            if m.get("ray_groupcoord_leader_epoch") != [(None, d.leader_epoch)]:
                return None
            if m.get("ray_groupcoord_in_sync_replicas") != [(None, 3)] or \
                    m.get("ray_groupcoord_replicas") != [(None, 3)]:
                return None
            if sorted(v for _, v in m.get("ray_groupcoord_follower_lag_records", [])) != [0, 0]:
                return None
        return leaders

    leaders = wait_for(as_described, 60, "the scraped replication metrics to match describe_partitions", 0.5)
    for m in leaders:
        assert m["ray_groupcoord_leader_elections_total"] == [(None, 1)]


def test_rel_replication_survives_node_losses_and_a_paused_leader(tmp_path) -> None:
    """No acknowledged commit lost, no write acknowledged by a deposed leader, every group Stable."""
    with replicated_cluster(tmp_path, NAMESPACE, workers=3, num_partitions=2) as (cluster, svc, storage):
        described = svc.describe_partitions()
        assert [d.partition for d in described] == [0, 1]
        for d in described:
            assert len(set(d.replicas)) == 3 and d.leader in d.replicas and d.leader_epoch >= 1, d
        with pytest.raises(ServiceError, match="replication"):
            start(num_partitions=2, storage_path=storage, namespace="gc-too-many", replication_factor=9)

        chaos = NodeChaos(cluster, svc, storage, groups=3, members_per_group=2, topic_partitions=4, seed=5,
                          session_timeout_ms=SESSION_TIMEOUT_MS)
        try:
            chaos.settle()
            settled = _generations(chaos)
            for m in chaos.members:
                m.committing.set()
            _commit_more(chaos)
            # Overlapping faults, each time with a node hosting a leader lost with its disk (a fresh node joins):
            # first while a deposed leader is still paused, then while a follower of the lost leader is paused,
            # with the router restarted during the repair that loss starts.
            lost = []
            for overlapped in (chaos.pause_and_lose, lambda: chaos.restart_router_during_repair(
                    chaos.pause_follower_and_lose_leader)):
                lost.append(overlapped())
                cluster.add_node(num_cpus=1)
                _commit_more(chaos)
                chaos.check_replicas()
            chaos.finish()
            final = _generations(chaos)
            chaos.check_replicas(full=True)
        finally:
            chaos.close()
        report = chaos.report
        assert not chaos.fatal_errors(), chaos.fatal_errors()
        # Each loss hit a leader: its partitions got a higher epoch and a leader elsewhere (a pause moved a leader
        # off the head node first when the head led everything, hence pauses >= 1).
        # The overlapped loss may have hit only followers (when the head node led everything else).
        assert chaos.overlaps == 2 and chaos.pauses >= 1 and chaos.paused_followers == 1
        assert chaos.node_losses + chaos.follower_losses == LOSSES and chaos.follower_losses <= 1
        assert chaos.real_failovers(), chaos.failovers
        assert len(chaos.failover_s) + len(chaos.overlapped_s) == chaos.node_losses
        assert {f["lost_node"] for f in chaos.failovers} <= set(lost) and len(set(lost)) == LOSSES
        assert not chaos.zombie_acks, chaos.zombie_acks
        assert not chaos.minority_leaders, chaos.minority_leaders
        assert sum(chaos.router_restarts.values()) == 1, chaos.router_restarts
        assert not chaos.voter_problems, chaos.voter_problems
        assert not chaos.logs.disagreements, chaos.logs.disagreements
        assert chaos.logs.records_compared > 0 and chaos.logs.replica_checks >= 3 * 2, chaos.logs.records_compared
        assert not chaos.reads.went_back, chaos.reads.went_back
        assert chaos.reads.reads > 0
        assert report.restart_partitions_checked > 0 and report.partitions_checked == 3 * 4
        assert report.final_restart_checked
        assert final == settled, "a group rebalanced during a failover"
        assert not any(m.identity_changes for m in chaos.members)
        assert all(m.generations == [settled["generations"][m.name]] for m in chaos.members)
        assert not report.lost, "acknowledged commits lost:\n" + "\n".join(report.lost)
        # Quiet now (the members left): every follower catches up with its leader's last records.
        after = wait_for(lambda: _all_in_sync(svc), 60, "every partition's replicas to be in sync")
        _check_replication_metrics(after)
        table = CliRunner().invoke(main, ["--namespace", NAMESPACE, "describe-partitions"], catch_exceptions=False)
        assert table.exit_code == 0 and all(d.leader[:12] in table.output for d in after), table.output
        for d in after:
            assert d.leader is not None and d.leader in d.in_sync and not set(d.replicas) & set(lost), d
            assert len(set(d.replicas)) == 3 and set(d.in_sync) == set(d.replicas), d
