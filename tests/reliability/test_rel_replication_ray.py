"""Replicated offsets partitions on a multi-node cluster: node losses with their disks, and a paused leader.

Members keep committing while a leader is paused (SIGSTOP, then SIGCONT once another replica
leads) and while a node hosting a leader is removed and its storage directory deleted. Afterwards
every acknowledged commit is returned, the deposed leader acknowledged nothing, and every group
ends Stable. The long run (>= 30 node losses) is `python -m benchmarks replication`.
"""

from __future__ import annotations

import pytest
from click.testing import CliRunner
from rel_replication import NodeChaos, replicated_cluster
from waiting import wait_for

from groupcoord.actors import ServiceError, start
from groupcoord.actors.tools.cli import main

NAMESPACE = "gc-rel-replication"
LOSSES = 3


def _commits(chaos: NodeChaos) -> int:
    return chaos.ledger.counts()["NONE"]


def _commit_more(chaos: NodeChaos, n: int = 30) -> None:
    target = _commits(chaos) + n
    wait_for(lambda: _commits(chaos) >= target, 120, f"{n} more acknowledged commits")


def test_rel_replication_survives_node_losses_and_a_paused_leader(tmp_path) -> None:
    """No acknowledged commit lost, no write acknowledged by a deposed leader, every group Stable."""
    with replicated_cluster(tmp_path, NAMESPACE, workers=3, num_partitions=2) as (cluster, svc, storage):
        described = svc.describe_partitions()
        assert [d.partition for d in described] == [0, 1]
        for d in described:
            assert len(set(d.replicas)) == 3 and d.leader in d.replicas and d.leader_epoch >= 1, d
        with pytest.raises(ServiceError, match="replication"):
            start(num_partitions=2, storage_path=storage, namespace="gc-too-many", replication_factor=9)

        chaos = NodeChaos(cluster, svc, storage, groups=3, members_per_group=2, topic_partitions=4, seed=5)
        try:
            chaos.settle()
            for m in chaos.members:
                m.committing.set()
            _commit_more(chaos)
            chaos.pause_leader(0)
            _commit_more(chaos)
            lost = []
            for _ in range(LOSSES):  # each time a node hosting a leader, with its disk; a fresh node joins
                lost.append(chaos.lose_node())
                cluster.add_node(num_cpus=1)
                _commit_more(chaos)
                chaos.wait_repaired()
            chaos.finish()
        finally:
            chaos.close()
        report = chaos.report
        assert not chaos.fatal_errors(), chaos.fatal_errors()
        assert chaos.node_losses == LOSSES and chaos.pauses == 1
        assert not chaos.zombie_acks, chaos.zombie_acks
        assert report.restart_partitions_checked > 0 and report.partitions_checked == 3 * 4
        assert report.final_restart_checked
        assert not report.lost, "acknowledged commits lost:\n" + "\n".join(report.lost)
        after = svc.describe_partitions()
        table = CliRunner().invoke(main, ["--namespace", NAMESPACE, "describe-partitions"], catch_exceptions=False)
        assert table.exit_code == 0 and all(d.leader[:12] in table.output for d in after), table.output
        for d in after:
            assert d.leader is not None and d.leader in d.in_sync and not set(d.replicas) & set(lost), d
            assert len(set(d.replicas)) == 3 and set(d.in_sync) == set(d.replicas), d
