"""The node-loss benchmark's parts that can run quickly: the three-node cluster's settings, the committer that finds
the coordinator again after errors (against the session's broker), and which losses count."""

from __future__ import annotations

from benchmarks.kafka import cluster, load, node_loss
from benchmarks.kafka.broker import free_port


def test_every_node_shares_one_quorum_and_replicates_offsets_three_times():
    quorum = cluster.voters({2: 9002, 1: 9001, 3: 9003})
    assert quorum == "1@127.0.0.1:9001,2@127.0.0.1:9002,3@127.0.0.1:9003"
    nodes = [cluster.node_settings(n, quorum, {"broker.session.timeout.ms": "4000"}) for n in (1, 2, 3)]
    assert [s["node.id"] for s in nodes] == ["1", "2", "3"]
    for s in nodes:
        assert s["controller.quorum.voters"] == quorum
        assert (s["offsets.topic.replication.factor"], s["min.insync.replicas"]) == ("3", "2")
        assert s["broker.session.timeout.ms"] == "4000"  # the caller's settings win
        assert int(s["broker.heartbeat.interval.ms"]) < int(s["broker.session.timeout.ms"])


def test_the_committer_skips_a_dead_address_and_finds_the_coordinator_again(kafka_broker):
    load.create_topic(kafka_broker.bootstrap, "node-loss-topic", 1)  # Kafka 4.4 refuses commits of unknown topics
    dead = f"127.0.0.1:{free_port()}"
    committer = node_loss.Committer([dead, kafka_broker.bootstrap], "node-loss-test", topic="node-loss-topic")
    try:
        first = committer.until_acknowledged(timeout_s=60)
        assert (first.attempts, first.coordinator) == (1, 1)  # the dead bootstrap address cost no attempt
        committer._conn.close()  # the coordinator's connection breaks, as when its process is killed
        again = committer.until_acknowledged(timeout_s=60)
        assert again.attempts == 2 and again.errors == {"OffsetCommit: WireError": 1}
        assert again.coordinator == 1
    finally:
        committer.close()


def test_only_losses_that_hit_the_coordinator_count():
    losses = [{"seconds": 4.0, "counted": True}, {"seconds": 0.1, "counted": False},
              {"seconds": 2.0, "counted": True}, {"seconds": 3.0, "counted": True}]
    figures = node_loss.summary(losses)
    assert (figures["counted"], figures["attempted"]) == (3, 4)
    assert figures["values_s"] == [4.0, 2.0, 3.0]
    assert (figures["median_s"], figures["min_s"], figures["max_s"]) == (3.0, 2.0, 4.0)
    assert node_loss.summary([{"seconds": 1.0, "counted": False}])["median_s"] is None
