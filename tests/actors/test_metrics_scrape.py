"""A real Prometheus scrape: Ray started with a metrics export port, known traffic, values read back over HTTP.

This module runs its own Ray (the suite's shared one has no metrics port): it shuts a running one
down first and its own down at the end, so the next module's `ray_local` starts the shared one again.
"""

from __future__ import annotations

import itertools
import json
from pathlib import Path

import pytest
import ray
from ray_helpers import form_group
from scrape import free_port, scrape, total
from waiting import wait_for

from groupcoord.actors import AdminClient, Observability, start, stop
from groupcoord.actors.service.metrics import PROMETHEUS_PREFIX, exported_names
from groupcoord.protocol import Errors, GroupConfig, OffsetAndMetadata, TopicPartition
from groupcoord.protocol.messages import OffsetCommitRequest

NAMESPACE = "gc-test-metrics"
GROUP = "scraped"
MEMBERS = 3
COMMITS = 7  # OffsetCommit requests of the group's members
PER_COMMIT = 4  # partitions in each
SETTLE_S = 60.0  # how long the scrape may take to show the values (Ray exports every report interval)


@pytest.fixture(scope="module")
def metrics_port():
    """Ray with a metrics export port and a short report interval, for this module only."""
    if ray.is_initialized():
        ray.shutdown()
    port = free_port()
    ray.init(address="local", num_cpus=2, include_dashboard=False, log_to_driver=False, namespace="groupcoord-tests",
             _metrics_export_port=port, _system_config={"metrics_report_interval_ms": 500})
    yield port
    ray.shutdown()  # the next module's ray_local starts the shared instance again


@pytest.fixture(scope="module")
def svc(metrics_port, tmp_path_factory):
    service = start(
        num_partitions=2,
        storage_path=str(tmp_path_factory.mktemp("metrics")),
        namespace=NAMESPACE,
        config=GroupConfig(min_session_timeout_ms=100, initial_rebalance_delay_ms=300),
        observability=Observability(interval_s=0.2, lag_interval_s=0.2, log_format="json"),
    )
    yield service
    stop(NAMESPACE)


def test_scraped_counters_and_gauges_match_the_traffic(svc, metrics_port):
    p, handle = svc.find_coordinator(GROUP)
    generation, ids, _ = form_group(handle, GROUP, MEMBERS)
    last = {}
    for i in range(COMMITS):
        offsets = {TopicPartition("orders", q): OffsetAndMetadata(100 * i + q) for q in range(PER_COMMIT)}
        req = OffsetCommitRequest(GROUP, offsets, generation_id=generation, member_id=ids[i % MEMBERS])
        assert set(ray.get(handle.commit_offsets.remote(req)).errors.values()) == {Errors.NONE}
        last = {tp: o.offset for tp, o in offsets.items()}
    admin = AdminClient(svc)
    admin.create_topic("orders", PER_COMMIT)
    ends = {q: last[TopicPartition("orders", q)] + 10 * (q + 1) for q in range(PER_COMMIT)}
    admin.report_end_offsets("orders", ends)
    part = str(p)

    def settled():
        s = scrape(metrics_port)
        wanted = (
            total(s, "ray_groupcoord_offset_commits_total", partition=part) == COMMITS * PER_COMMIT
            and total(s, "ray_groupcoord_members", partition=part) == MEMBERS
            and total(s, "ray_groupcoord_consumer_lag", group=GROUP, topic="orders", partition="3") == 40
        )
        return s if wanted else None

    samples = wait_for(settled, SETTLE_S, "the scraped values reaching the traffic's", 0.25, lambda: sorted(
        (n, lab.get("partition"), v) for n, lab, v in scrape(metrics_port) if "commits" in n or "members" in n))
    # The request histogram counted every commit, by API and error code, on the group's partition only.
    assert total(samples, "ray_groupcoord_request_latency_seconds_count", partition=part, api="commit_offsets",
                 error="NONE") == COMMITS
    other = str(1 - p)
    assert total(samples, "ray_groupcoord_offset_commits_total", partition=other) == 0
    assert total(samples, "ray_groupcoord_request_latency_seconds_count", partition=part, api="join_group",
                 error="MEMBER_ID_REQUIRED") == MEMBERS
    # Its buckets are cumulative up to +Inf, which holds every commit, and its sum is their latencies' (> 0).
    buckets = sorted((float(lab["le"]), v) for n, lab, v in samples
                     if n == "ray_groupcoord_request_latency_seconds_bucket" and lab.get("partition") == part
                     and lab.get("api") == "commit_offsets" and lab.get("error") == "NONE")
    assert [le for le, _ in buckets][-1] == float("inf") and buckets[-1][1] == COMMITS
    assert all(a[1] <= b[1] for a, b in itertools.pairwise(buckets))
    assert total(samples, "ray_groupcoord_request_latency_seconds_sum", partition=part, api="commit_offsets") > 0
    # Gauges of the shard: one Stable group, the committed offsets, one completed rebalance with its duration.
    assert total(samples, "ray_groupcoord_groups", partition=part, state="Stable") == 1
    assert total(samples, "ray_groupcoord_offsets", partition=part) == PER_COMMIT
    assert total(samples, "ray_groupcoord_completed_rebalances_total", partition=part) == 1
    assert total(samples, "ray_groupcoord_rebalance_duration_seconds_count", partition=part) == 1
    # One session timer for the group's members; no member id is pending any more.
    assert total(samples, "ray_groupcoord_purgatory_size", partition=part, kind="session") == 1
    assert total(samples, "ray_groupcoord_purgatory_size", partition=part, kind="heartbeat") == 0
    # The log: each commit was one append of its records; flushes made them durable (Ray exports a
    # histogram's _sum from bucket midpoints, so only its _count is exact).
    assert total(samples, "ray_groupcoord_log_appends_total", partition=part) > COMMITS
    assert total(samples, "ray_groupcoord_log_appended_records_total", partition=part) > COMMITS * PER_COMMIT
    flushes = total(samples, "ray_groupcoord_log_flush_seconds_count", partition=part)
    assert 1 <= flushes == total(samples, "ray_groupcoord_log_flush_records_count", partition=part)
    assert total(samples, "ray_groupcoord_partition_loaded") == 2
    # Consumer lag per topic partition: end offset minus the last committed offset.
    for q in range(PER_COMMIT):
        assert total(samples, "ray_groupcoord_consumer_lag", group=GROUP, topic="orders", partition=str(q)) == \
            10 * (q + 1)
    assert total(samples, "ray_groupcoord_consumer_group_max_lag", group=GROUP) == 10 * PER_COMMIT
    # Whatever Ray exported under our prefix is a name the catalog (and so the dashboard test) knows.
    ours = {n for n, _, _ in samples if n.startswith(PROMETHEUS_PREFIX + "groupcoord_")}
    assert ours <= exported_names(), ours - exported_names()


def test_partition_actor_log_lines_are_json_with_partition_and_group(svc):
    """The actors' own log files (Ray's worker logs) hold JSON lines carrying partition, group and member."""
    p, _ = svc.find_coordinator(GROUP)
    logs_dir = Path(ray._private.worker._global_node.get_logs_dir_path())

    def lines_about_the_group():
        found = []
        for path in logs_dir.glob("worker-*"):
            for line in path.read_text(errors="replace").splitlines():
                if line.startswith("{") and f'"{GROUP}"' in line:
                    found.append(json.loads(line))
        return found if any("stabilized group" in doc["message"] for doc in found) else None

    found = wait_for(lines_about_the_group, SETTLE_S, "JSON log lines about the group", 0.25)
    assert all(doc["partition"] == p and doc["group"] == GROUP for doc in found)
    # The first JoinGroup of each member was answered MEMBER_ID_REQUIRED: a per-request line (rate-limited).
    assert 1 <= sum(doc["message"] == "join_group answered MEMBER_ID_REQUIRED" for doc in found) <= MEMBERS
