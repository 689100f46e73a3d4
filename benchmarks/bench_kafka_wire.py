"""The cost of speaking Kafka: commits/s through the Kafka listener with confluent-kafka clients, against the
Python client through Ray, in one run on one service.

Each client owns one group (no members: simple commits, generation -1, as `consumer.commit(offsets=...)`
does without a subscription) and commits `per_commit` partitions per OffsetCommit, one request at a
time, for `duration` seconds. The Kafka side is librdkafka (confluent-kafka `Consumer.commit(...,
asynchronous=False)`), one thread per client in this process, through the listener (one Ray actor,
which sends the commits on through the client's coalescer). The Python side is the client library
(`CoordinatorClient.call`, as `GroupMember.commit` does), one thread per client, straight to the
partition actors through this process's coalescer. Trials alternate the two sides. A commit is one
partition's offset made durable (commits/s = requests/s x partitions per commit). Every trial ends by
fetching each client's offsets: they must equal its last acknowledged commit.
"""

from __future__ import annotations

import argparse
import os
import statistics
import sys
import threading
import time
from pathlib import Path
from typing import Any, Callable

from benchmarks import common
from groupcoord.protocol import Errors, OffsetAndMetadata, OffsetCommitRequest, TopicPartition

TOPIC = "bench"
TOPIC_PARTITIONS = 100


def add_arguments(parser: argparse.ArgumentParser) -> None:
    """Options of this benchmark."""
    common.add_common_arguments(parser, default_trials=3)
    parser.add_argument("--partitions", type=int, default=4, help="offsets partitions (actors)")
    parser.add_argument("--clients", type=common.ints, default=None, help="concurrent clients (default 1,8)")
    parser.add_argument("--per-commit", type=common.ints, default=None, help="partitions per commit (default 1,10)")
    parser.add_argument("--duration", type=float, default=None, help="seconds per trial (default 3)")


def _kafka_committer(bootstrap: str, group: str, per_commit: int) -> Callable[[int], None]:
    from confluent_kafka import Consumer
    from confluent_kafka import TopicPartition as KafkaTopicPartition

    consumer = Consumer({"bootstrap.servers": bootstrap, "group.id": group, "enable.auto.commit": False})

    def commit(offset: int) -> None:
        done = consumer.commit(offsets=[KafkaTopicPartition(TOPIC, p, offset) for p in range(per_commit)],
                               asynchronous=False)
        failed = [tp for tp in done if tp.error is not None]
        if failed:
            raise RuntimeError(f"commit of {group} failed: {failed[0].error}")

    commit.close = consumer.close  # type: ignore[attr-defined]
    return commit


def _python_committer(svc: Any, group: str, per_commit: int) -> Callable[[int], None]:
    from groupcoord.actors.client.coordinator_client import CoordinatorClient

    client = CoordinatorClient(svc, group)

    def commit(offset: int) -> None:
        offsets = {TopicPartition(TOPIC, p): OffsetAndMetadata(offset) for p in range(per_commit)}
        response = client.call("commit_offsets", OffsetCommitRequest(group, offsets))
        failed = [e for e in response.errors.values() if e != Errors.NONE]
        if failed:
            raise RuntimeError(f"commit of {group} failed: {failed[0].name}")

    commit.close = lambda: None  # type: ignore[attr-defined]
    return commit


def _drive(committers: list[Callable[[int], None]], duration: float) -> tuple[int, list[int], float]:
    """Every committer commits offsets 1, 2, ... one at a time until `duration` passes: (requests, last offsets,
    seconds)."""
    last = [0] * len(committers)
    errors: list[BaseException] = []
    start = threading.Barrier(len(committers) + 1)
    deadline = [0.0]

    def loop(i: int) -> None:
        start.wait()
        try:
            while time.perf_counter() < deadline[0]:
                committers[i](last[i] + 1)
                last[i] += 1
        except BaseException as e:  # reported after the trial
            errors.append(e)

    threads = [threading.Thread(target=loop, args=(i,), daemon=True) for i in range(len(committers))]
    for t in threads:
        t.start()
    deadline[0] = time.perf_counter() + duration
    began = time.perf_counter()
    start.wait()
    for t in threads:
        t.join()
    seconds = time.perf_counter() - began
    if errors:
        raise errors[0]
    return sum(last), last, seconds


def run(args: argparse.Namespace) -> dict:
    """Commits/s of both sides per (clients, partitions per commit), paired trial by trial."""
    from groupcoord.actors import AdminClient, start, stop

    clients = args.clients or common.preset(args, [1, 8], [1, 4], [1])
    per_commits = args.per_commit or common.preset(args, [1, 10], [10], [1])
    duration = args.duration or common.preset(args, 3.0, 1.0, 0.3)
    trials = common.trials(args)
    namespace = f"gc-bench-kafka-{int(time.time())}"
    cells = []
    with common.work_dir(args, "kafka-wire") as path:
        svc = start(num_partitions=args.partitions, storage_path=str(Path(path)), namespace=namespace,
                    config=common.bench_config(), kafka_listener="127.0.0.1:0")
        try:
            admin = AdminClient(svc)
            admin.create_topic(TOPIC, TOPIC_PARTITIONS)
            for c in clients:
                for k in per_commits:
                    cell: dict[str, Any] = {"clients": c, "per_commit": k, "kafka": [], "python": [], "load": []}
                    for trial in range(trials):
                        for side in ("kafka", "python"):
                            groups = [f"{side}-{c}-{k}-{trial}-{i}" for i in range(c)]
                            if side == "kafka":
                                committers = [_kafka_committer(svc.kafka_bootstrap, g, k) for g in groups]
                            else:
                                committers = [_python_committer(svc, g, k) for g in groups]
                            for commit in committers:  # coordinator lookup and connections before the clock
                                commit(0)
                            common.step(f"{side}: {c} clients x {k} partitions per commit, trial {trial + 1}")
                            requests, last, seconds = _drive(committers, duration)
                            for commit in committers:
                                commit.close()  # type: ignore[attr-defined]
                            for g, offset in zip(groups, last, strict=True):
                                got = admin.list_group_offsets(g, [TopicPartition(TOPIC, 0)])
                                assert got[TopicPartition(TOPIC, 0)].offset == offset, (g, got, offset)
                            cell[side].append(requests * k / seconds)
                        cell["load"].append(_load())
                    cells.append(cell)
        finally:
            stop(namespace)
    return {"duration_s": duration, "trials": trials, "offsets_partitions": args.partitions, "cells": cells}


def _load() -> float:
    return os.getloadavg()[0]


def report(results: dict) -> None:
    """The table: commits/s of each side and their ratio, per cell (medians of the trials)."""
    rows = []
    for cell in results["cells"]:
        kafka, python = statistics.median(cell["kafka"]), statistics.median(cell["python"])
        rows.append([f"{cell['clients']} x {cell['per_commit']}", f"{kafka:,.0f}", f"{python:,.0f}",
                     f"{kafka / python:.2f}", f"{statistics.median(cell['load']):.1f}"])
    common.print_table(
        f"commits/s, median of {results['trials']} trials of {results['duration_s']} s "
        f"({results['offsets_partitions']} offsets partitions, fsync always)",
        ["clients x partitions/commit", "confluent-kafka via listener", "Python client via Ray", "ratio", "load"],
        rows,
    )


def main(argv: list[str] | None = None) -> None:
    """`python -m benchmarks kafka-wire [options]`."""
    common.run_benchmark("kafka-wire", sys.modules[__name__], argv)
