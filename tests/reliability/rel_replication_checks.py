"""The Ray-level chaos ledger's checks of replication itself, beside the commit ledger of rel_chaos.py.

- Reads never go back: every offset fetch (a reader thread's, and the ledger's own after each fault) is
  recorded with when it started and ended; a read must return at least the value of every read of the
  same key that had ended before it started.
- Replicas agree below the high watermark: each live replica's log is read from its node's disk (the
  nodes of a ray.cluster_utils.Cluster share this machine), up to the watermark its actor reports; a
  record at an offset below it must be the one every other replica of the partition held there.
- Voters agree: after a repair, the router's durable placement, describe_partitions, each voter's own
  node and the leader's followers name the same replicas.
"""

from __future__ import annotations

import bisect
import contextlib
import json
import threading
import time
from pathlib import Path
from typing import Any

import ray
from waiting import RETRIED

from groupcoord.actors.client.admin import AdminClient
from groupcoord.actors.service.names import partition_actor_name
from groupcoord.actors.service.replication.placement import PLACEMENT_FILE
from groupcoord.protocol import TopicPartition
from groupcoord.storage.errors import StorageError
from groupcoord.storage.reader import read_partition
from groupcoord.storage.root import PARTITION_DIR_PREFIX


class ReadHistory:
    """Every completed read of a (group, topic partition), and the reads that went back (violations)."""

    def __init__(self) -> None:
        self._lock = threading.Lock()
        self._ended: dict[Any, list[tuple[float, int]]] = {}  # key -> (ended at, highest value read by then)
        self.reads = 0
        self.went_back: list[str] = []

    def record(self, key: Any, value: int, started: float) -> None:
        """A read of `key` that started at `started` (time.monotonic()) returned `value` (-1: nothing)."""
        with self._lock:
            ended = self._ended.setdefault(key, [])
            i = bisect.bisect_right(ended, (started, float("inf")))
            seen = ended[i - 1][1] if i else -1
            if value < seen and len(self.went_back) < 50:
                self.went_back.append(f"{key}: read {value} after a read that had ended returned {seen}")
            ended.append((time.monotonic(), max(value, ended[-1][1] if ended else -1)))
            self.reads += 1


class RecordingAdmin(AdminClient):
    """An AdminClient whose offset fetches are recorded in a ReadHistory."""

    def __init__(self, svc: Any, history: ReadHistory, topic: str, topic_partitions: int, **kw: Any) -> None:
        super().__init__(svc, **kw)
        self.history = history
        self.tps = [TopicPartition(topic, p) for p in range(topic_partitions)]

    def list_group_offsets(self, group_id: str, partitions: Any = None) -> dict:
        """AdminClient.list_group_offsets, each answer recorded (a partition left out read as -1)."""
        started = time.monotonic()
        got = super().list_group_offsets(group_id, partitions)
        asked = self.tps if partitions is None else [TopicPartition(*tp) for tp in partitions]
        for tp in asked:
            self.history.record((group_id, tp), got[tp].offset if tp in got else -1, started)
        return got


class Reader:
    """A thread that fetches every group's offsets over and over while the faults go on."""

    def __init__(self, admin: RecordingAdmin, group_ids: list[str], interval_s: float = 0.1) -> None:
        self.admin, self.group_ids, self.interval_s = admin, group_ids, interval_s
        self.failed = 0
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._loop, name="chaos-reader", daemon=True)
        self._thread.start()

    def _loop(self) -> None:
        while not self._stop.is_set():
            for g in self.group_ids:
                try:
                    self.admin.list_group_offsets(g)
                except Exception:  # a failover in progress: only answered reads are recorded
                    self.failed += 1
            self._stop.wait(self.interval_s)

    def stop(self) -> None:
        """Stop reading (waits for the read in progress)."""
        self._stop.set()
        self._thread.join(60)


def replica_partition(name: str, num_partitions: int) -> int | None:
    """The partition of a replica actor's registered name (None when it names no replica)."""
    for p in range(num_partitions):
        if name.startswith(f"{partition_actor_name(p)}-replica-"):
            return p
    return None


def replica_roles(num_partitions: int, timeout_s: float = 5.0) -> list[tuple[int, dict]]:
    """(partition, role) of every replica actor that answers within `timeout_s` (a paused one does not), found by
    their names in this driver's namespace."""
    refs = []
    for n in ray.util.list_named_actors():
        p = replica_partition(n, num_partitions)
        if p is not None:
            with contextlib.suppress(ValueError):  # gone since it was listed
                refs.append((p, ray.get_actor(n).role.remote()))
    if not refs:
        return []
    ready = set(ray.wait([r for _, r in refs], num_returns=len(refs), timeout=timeout_s)[0])
    out = []
    for p, ref in refs:
        if ref in ready:
            with contextlib.suppress(*RETRIED):
                out.append((p, ray.get(ref)))
    return out


def partition_dir(storage: str, node_id: str, partition: int) -> Path:
    """A replica's log directory: its partition's directory in its node's storage root."""
    return Path(storage.replace("{node_id}", node_id)) / f"{PARTITION_DIR_PREFIX}{partition}"


class LogAgreement:
    """What the replicas of each partition hold below their high watermarks, compared offset by offset."""

    def __init__(self, storage: str, num_partitions: int) -> None:
        self.storage = storage
        self.num_partitions = num_partitions
        self.committed: list[dict[int, Any]] = [{} for _ in range(num_partitions)]
        self.checked: dict[str, int] = {}  # replica id -> the offset its log was compared up to
        self.records_compared = 0
        self.replica_checks = 0
        self.unreadable: list[str] = []
        self.disagreements: list[str] = []

    def check(self, full: bool = False) -> None:
        """Compare every live replica's records below its watermark (from where the last check ended, or from 0
        with `full`). A log that cannot be read now (its directory wiped, a truncation under way) is noted in
        `unreadable`; with `full` (the end of a run, nothing failing) it is a disagreement."""
        for p, role in replica_roles(self.num_partitions):
            if role["lost"]:
                continue
            rid, hw = role["replica_id"], role["high_watermark"] or 0
            start = 0 if full else self.checked.get(rid, 0)
            if start >= hw:
                continue
            reached = start
            try:
                for rec in read_partition(partition_dir(self.storage, role["node_id"], p), start):
                    if rec.offset >= hw:
                        break
                    held = self.committed[p].setdefault(rec.offset, rec.record)
                    self.records_compared += 1
                    if held != rec.record and len(self.disagreements) < 20:
                        self.disagreements.append(f"partition {p}: replica {rid} holds {rec.record!r} at offset "
                                                  f"{rec.offset} below its watermark {hw}; another held {held!r}")
                    reached = rec.offset + 1
            except (OSError, StorageError) as e:
                (self.disagreements if full else self.unreadable).append(f"replica {rid}: {e!r}"[:300])
                continue
            self.replica_checks += 1
            self.checked[rid] = max(self.checked.get(rid, 0), reached)


def read_placement(storage: str, head_node_id: str) -> dict:
    """The router's durable placement (voters and learners per partition), from the head node's storage root."""
    return json.loads((Path(storage.replace("{node_id}", head_node_id)) / PLACEMENT_FILE).read_text())


def voter_problems(svc: Any, storage: str, head_node_id: str) -> list[str]:
    """After a repair: the ways in which the placement file, describe_partitions, the voters' own nodes and each
    leader's followers disagree about a partition's voters (an empty list when they all agree)."""
    placement = read_placement(storage, head_node_id)
    described = svc.describe_partitions()
    roles: dict[str, dict] = {r["replica_id"]: r for _, r in replica_roles(svc.num_partitions)}
    problems = []
    if placement.get("learners"):
        problems.append(f"learners left in the placement: {placement['learners']}")
    for p, voters in enumerate(placement["partitions"]):
        ids, nodes = [rid for rid, _, _ in voters], [node for _, node, _ in voters]
        if nodes != described[p].replicas:
            problems.append(f"partition {p}: placement nodes {nodes}, described {described[p].replicas}")
        for rid, node, _ in voters:
            role = roles.get(rid)
            if role is None or role["lost"] or role["node_id"] != node:
                problems.append(f"partition {p}: voter {rid} recorded on {node[:8]}, its actor: {role}")
        leaders = [roles[rid] for rid in ids if rid in roles and roles[rid]["leading"]]
        if len(leaders) != 1:
            problems.append(f"partition {p}: {len(leaders)} voters lead")
            continue
        leader = leaders[0]
        followers = set(leader["lags"]) - set(leader["learners"])
        if followers != set(ids) - {leader["replica_id"]} or leader["learners"]:
            problems.append(f"partition {p}: leader {leader['replica_id']} ships to {sorted(leader['lags'])} "
                            f"(learners {leader['learners']}), the placement's voters are {ids}")
    return problems
