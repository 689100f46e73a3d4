"""The partition logs' storage settings as start() options: Kafka's offsets.topic.segment.bytes and the cleaner's."""

from __future__ import annotations

import os

import pytest
import ray

from groupcoord.actors import ServiceError, start, stop
from groupcoord.protocol import Errors, OffsetAndMetadata, TopicPartition
from groupcoord.protocol.messages import OffsetCommitRequest, OffsetFetchRequest

TP = TopicPartition("t", 0)


def test_small_segments_roll_and_compact_and_every_latest_offset_survives(ray_local, tmp_path):
    svc = start(num_partitions=1, storage_path=str(tmp_path), namespace="log-settings", segment_bytes=512,
                min_compaction_bytes=0, min_cleanable_ratio=0.0)
    try:
        handle = svc.partition(0)
        for i in range(60):
            resp = ray.get(handle.commit_offsets.remote(OffsetCommitRequest(f"g{i % 3}", {TP: OffsetAndMetadata(i)})))
            assert resp.errors[TP] == Errors.NONE
        segments = [n for n in os.listdir(tmp_path / "__consumer_offsets-0") if n.endswith(".log")]
        assert len(segments) > 3  # a 100 MiB segment would never have rolled
        for g, last in (("g0", 57), ("g1", 58), ("g2", 59)):
            fetched = ray.get(handle.fetch_offsets.remote(OffsetFetchRequest(g, [TP])))
            assert fetched.offsets[TP].offset == last
    finally:
        stop("log-settings")


@pytest.mark.parametrize("option", [{"segment_bytes": 0}, {"min_cleanable_ratio": 1.5},
                                    {"min_compaction_bytes": -1}, {"delete_retention_ms": "1d"}])
def test_a_storage_setting_that_cannot_work_is_refused(ray_local, tmp_path, option):
    with pytest.raises(ServiceError, match=next(iter(option))):
        start(num_partitions=1, storage_path=str(tmp_path), namespace="log-settings-bad", **option)


@ray.remote(num_cpus=0)
def _compact_in_a_worker(directory: str) -> dict:
    from groupcoord.protocol.records import OffsetCommitKey, OffsetCommitValue, Record
    from groupcoord.storage import PartitionLog
    from groupcoord.storage import cleaner_process as cp

    children = []
    real_init = cp.ChildCleaner.__init__

    def counted(self, compactor):
        real_init(self, compactor)
        children.append(self.proc.pid)

    cp.ChildCleaner.__init__ = counted
    log = PartitionLog(directory, segment_bytes=512, sync="always")
    for i in range(60):
        log.append([Record(OffsetCommitKey(f"g{i % 3}", "t", 0), OffsetCommitValue(i, -1, "", i, -1))])
        log.flush()
    result = log.compact()
    latest = {r.record.key.group: r.record.value.offset for r in log.read()}
    log.close()
    return {"children": children, "worker": os.getpid(), "rewritten": result.groups_rewritten, "latest": latest}


def test_a_compaction_in_a_ray_worker_runs_its_cleaner_in_a_child_process(ray_local, tmp_path):
    got = ray.get(_compact_in_a_worker.remote(str(tmp_path / "log")))
    assert len(got["children"]) == 1 and got["children"][0] != got["worker"]
    assert got["rewritten"] > 0
    assert got["latest"] == {"g0": 57, "g1": 58, "g2": 59}
