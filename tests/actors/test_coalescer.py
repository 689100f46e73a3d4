"""The client's RequestCoalescer on a real local Ray: concurrent calls of one process share `batch` actor calls."""

from __future__ import annotations

import asyncio
import os
import pickle
import threading
from concurrent.futures import ThreadPoolExecutor

import pytest
import ray
from services import running_service
from waiting import wait_for

from groupcoord.actors.client.coalescer import RequestCoalescer
from groupcoord.actors.client.coordinator_client import ACTOR_ERRORS, CoordinatorClient
from groupcoord.actors.client.wire import OnePickle
from groupcoord.protocol import Errors, OffsetAndMetadata, TopicPartition
from groupcoord.protocol.messages import HeartbeatRequest, JoinGroupRequest, OffsetCommitRequest, OffsetFetchRequest

NAMESPACE = "gc-test-coalescer"
TPS = [TopicPartition("t", p) for p in range(10)]


@pytest.fixture(scope="module")
def svc(ray_local, tmp_path_factory):
    with running_service(tmp_path_factory, NAMESPACE, 1) as service:
        yield service


def _commit(group: str, offset: int) -> OffsetCommitRequest:
    return OffsetCommitRequest(group, {tp: OffsetAndMetadata(offset) for tp in TPS})


def test_concurrent_commits_share_actor_calls_and_every_acknowledged_one_is_fetched(svc):
    coalescer = RequestCoalescer(svc.partition(0))
    groups = [f"coalesced-{i}" for i in range(32)]
    start_line = threading.Barrier(len(groups))

    def commit_many(group: str) -> int:
        start_line.wait()
        last = 0
        for offset in range(1, 21):
            response = coalescer.call("commit_offsets", _commit(group, offset), timeout_s=30)
            assert set(response.errors.values()) == {Errors.NONE}, response
            last = offset
        return last

    try:
        with ThreadPoolExecutor(len(groups)) as pool:
            last = dict(zip(groups, pool.map(commit_many, groups), strict=True))
        assert coalescer.requests == 32 * 20
        assert coalescer.calls < coalescer.requests / 2, (coalescer.calls, coalescer.requests)  # they did share calls
        for group in groups:
            fetched = coalescer.call("fetch_offsets", OffsetFetchRequest(group, TPS), timeout_s=30)
            assert {p.offset for p in fetched.offsets.values()} == {last[group]}
    finally:
        coalescer.close()


def test_the_client_batches_heartbeats_commits_and_fetches_but_not_joins(svc):
    client = CoordinatorClient(svc, "client-batched")
    assert client.call_once("commit_offsets", _commit("client-batched", 5)).errors[TPS[0]] == Errors.NONE
    assert client.call_once("fetch_offsets", OffsetFetchRequest("client-batched", TPS[:1])).offsets[TPS[0]].offset == 5
    assert client.call_once("heartbeat", HeartbeatRequest("client-batched", 1, "nobody")).error in (
        Errors.UNKNOWN_MEMBER_ID,
        Errors.ILLEGAL_GENERATION,
    )
    join = client.call_once("join_group", JoinGroupRequest("client-batched-join", 10_000, protocols=[("range", b"")]))
    assert join.error == Errors.MEMBER_ID_REQUIRED  # went alone: a parked join would hold a batch
    with pytest.raises(ValueError, match="cannot be batched"):
        RequestCoalescer(svc.partition(0)).submit("join_group", None)


@ray.remote(num_cpus=0, max_restarts=1)
class HeldPartition:
    """A stand-in for a partition actor that forwards batches to the real one; after hold_next() it holds the
    next batch until it is killed (a restart holds nothing), so that a kill lands while a batch is in flight."""

    def __init__(self, partition) -> None:
        self.partition = partition
        self.holding = False
        self.arrived = asyncio.Event()
        self.held_calls = 0

    async def pid(self) -> int:
        return os.getpid()

    async def hold_next(self) -> None:
        self.holding = True

    async def wait_held(self) -> int:
        """Until a batch is held; the number of requests in it."""
        await self.arrived.wait()
        return self.held_calls

    async def batch(self, calls):
        if self.holding:
            self.holding = False
            self.held_calls = len(calls)
            self.arrived.set()
            await asyncio.Event().wait()  # never released: only the kill ends this call
        return await self.partition.batch.remote(calls)


def test_a_batch_held_by_a_killed_actor_fails_with_an_actor_error_and_the_next_one_is_served(svc):
    stand_in = HeldPartition.remote(svc.partition(0))
    coalescer = RequestCoalescer(stand_in)
    try:
        assert coalescer.call("commit_offsets", _commit("co-kill", 1), timeout_s=30).errors[TPS[0]] == Errors.NONE
        old_pid = ray.get(stand_in.pid.remote(), timeout=30)
        ray.get(stand_in.hold_next.remote(), timeout=30)
        futures = [coalescer.submit("commit_offsets", _commit("co-kill", 2)) for _ in range(20)]
        held = ray.get(stand_in.wait_held.remote(), timeout=60)  # the first batch is inside the actor now
        ray.kill(stand_in, no_restart=False)
        outcomes = []
        for f in futures:
            try:
                outcomes.append(f.result(timeout=60).errors[TPS[0]])
            except ACTOR_ERRORS as e:
                outcomes.append(type(e).__name__)
        # The held batch (the first `held` requests) died with the actor; later batches went to its restart.
        assert 1 <= held <= len(futures)
        actor_errors = {"RayActorError", "ActorDiedError", "ActorUnavailableError"}
        assert set(outcomes[:held]) <= actor_errors, outcomes
        assert set(outcomes[held:]) <= actor_errors | {Errors.NONE}, outcomes
        new_pid = wait_for(lambda: ray.get(stand_in.pid.remote(), timeout=10), what="the stand-in to restart")
        assert new_pid != old_pid
        after = coalescer.call("fetch_offsets", OffsetFetchRequest("co-kill", TPS[:1]), timeout_s=60)
        # Offset 2 is committed exactly when one of its commits was acknowledged.
        assert after.offsets[TPS[0]].offset == (2 if Errors.NONE in outcomes else 1), outcomes
    finally:
        coalescer.close()
        ray.kill(stand_in)


@ray.remote(num_cpus=0)
class HeldBatches:
    """A stand-in partition actor whose batches wait until released (a slow or hung actor)."""

    def __init__(self) -> None:
        self.released = asyncio.Event()

    async def batch(self, calls):
        await self.released.wait()
        return [f"answer to {api}" for api, _ in calls]

    async def release(self) -> None:
        self.released.set()


def test_a_caller_times_out_on_a_hung_batch_and_its_request_is_still_answered_later(ray_local):
    actor = HeldBatches.remote()
    coalescer = RequestCoalescer(actor)
    try:
        with pytest.raises(ray.exceptions.GetTimeoutError):
            coalescer.call("heartbeat", "first", timeout_s=0.2)
        later = coalescer.submit("heartbeat", "second")  # queued behind the batch in flight
        ray.get(actor.release.remote())
        assert later.result(timeout=30) == "answer to heartbeat"
    finally:
        coalescer.close()
        ray.kill(actor)


def test_a_batch_crosses_ray_pickled_whole_and_arrives_as_a_plain_list(svc):
    # Both ends of `batch` are OnePickle: one object to Ray's msgpack layer instead of one per request.
    handle = svc.partition(0)
    calls = [("commit_offsets", _commit(f"one-pickle-{i}", 7)) for i in range(3)]
    calls.append(("heartbeat", HeartbeatRequest("one-pickle-nobody", 1, "m")))
    sent = OnePickle(calls)
    unpickled = pickle.loads(pickle.dumps(sent))
    assert type(unpickled) is list and unpickled == calls
    answers = ray.get(handle.batch.remote(sent))
    assert type(answers) is list and len(answers) == 4
    assert all(a.errors == dict.fromkeys(TPS, Errors.NONE) for a in answers[:3])
    assert answers[3].error == Errors.UNKNOWN_MEMBER_ID
    fetched = ray.get(handle.fetch_offsets.remote(OffsetFetchRequest("one-pickle-2", TPS)))
    assert {tp: o.offset for tp, o in fetched.offsets.items()} == dict.fromkeys(TPS, 7)
    # Equal answers pickle as one object: 500 NONE heartbeats take hardly more room than one.
    answer = answers[3]
    assert len(pickle.dumps(OnePickle([answer] * 500))) < len(pickle.dumps(answer)) + 4 * 500
