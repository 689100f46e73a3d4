"""Load drivers over the wire client, identical for every target: whatever answers Kafka's protocol.

Each driver takes a bootstrap address and returns plain numbers: commits per second from many
clients, heartbeats per second from many members at rising concurrency, the time a 1,000-member
group takes to rebalance (classic or consumer protocol), and bulk commits for the restart test.
"""

from __future__ import annotations

import statistics
import threading
import time
import uuid
from datetime import timedelta
from typing import Any

from benchmarks.kafka.requests import assignment_bytes, subscription_bytes
from benchmarks.kafka.wire import (
    KafkaConnection,
    WireError,
    encode_request,
    nested_class,
    request_class,
    response_type_of,
)

SESSION = timedelta(seconds=30)
REBALANCE = timedelta(seconds=120)


def create_topic(bootstrap: str, name: str, partitions: int) -> None:
    """Create a topic (already there is fine) and wait until Metadata shows all its partitions."""
    cls = request_class("create_topics", 7)
    topic = nested_class(cls, "CreatableTopic")
    with KafkaConnection(bootstrap, timeout=120) as conn:
        answer = conn.request(cls(topics=(topic(name=name, num_partitions=partitions, replication_factor=1,
                                                assignments=(), configs=()),),
                                  timeout=timedelta(seconds=60), validate_only=False))
        code = int(answer.topics[0].error_code)
        if code not in (0, 36):
            raise WireError(f"CreateTopics {name}: {answer.topics[0].error_code}")
        meta_cls = request_class("metadata", 12)
        mtopic = nested_class(meta_cls, "MetadataRequestTopic")
        for _ in range(600):
            meta = conn.request(meta_cls(topics=(mtopic(topic_id=None, name=name),), allow_auto_topic_creation=False,
                                         include_topic_authorized_operations=False))
            t = meta.topics[0]
            if int(t.error_code) == 0 and len(t.partitions) == partitions:
                return
            time.sleep(0.1)
    raise WireError(f"topic {name} not ready")


def topic_id(bootstrap: str, name: str) -> uuid.UUID:
    """The topic's id as the target's Metadata gives it."""
    meta_cls = request_class("metadata", 12)
    mtopic = nested_class(meta_cls, "MetadataRequestTopic")
    with KafkaConnection(bootstrap) as conn:
        meta = conn.request(meta_cls(topics=(mtopic(topic_id=None, name=name),), allow_auto_topic_creation=False,
                                     include_topic_authorized_operations=False))
    return meta.topics[0].topic_id


def commit_request(group: str, topic: str, partitions: range, offset: int, version: int = 9) -> Any:
    """A simple commit (generation -1, no member) of `partitions` of `topic` at `offset`."""
    cls = request_class("offset_commit", version)
    part, top = nested_class(cls, "OffsetCommitRequestPartition"), nested_class(cls, "OffsetCommitRequestTopic")
    return cls(group_id=group, generation_id_or_member_epoch=-1, member_id="", group_instance_id=None,
               topics=(top(name=topic, partitions=tuple(part(partition_index=p, committed_offset=offset,
                                                             committed_leader_epoch=-1, committed_metadata="")
                                                        for p in partitions)),))


def _errors(response: Any) -> int:
    return sum(1 for t in response.topics for p in t.partitions if int(p.error_code) != 0)


def commits_per_second(bootstrap: str, topic: str, clients: int = 64, partitions: int = 100, seconds: float = 10.0,
                       warmup: float = 2.0, threads: int = 8) -> dict:
    """`clients` connections, one 100-partition commit in flight each, for `seconds`: acknowledged commits/s."""
    conns = [KafkaConnection(bootstrap, client_id=f"committer-{i}", timeout=60) for i in range(clients)]
    frames = [encode_request(commit_request(f"bench-commit-{i}", topic, range(partitions), 1), 0, f"committer-{i}")
              for i in range(clients)]
    rtype = response_type_of(commit_request("g", topic, range(1), 0))
    counts = [0] * threads
    errors = [0] * threads
    latencies: list[list[float]] = [[] for _ in range(threads)]
    start = time.perf_counter()
    measure_from, stop_at = start + warmup, start + warmup + seconds

    def drive(t: int) -> None:
        mine = list(range(t, clients, threads))
        sent_at = {}
        for i in mine:
            conns[i].send_encoded(frames[i], rtype)
            sent_at[i] = time.perf_counter()
        while any(conns[i].in_flight for i in mine):
            for i in mine:
                if not conns[i].in_flight:
                    continue
                response = conns[i].receive()
                done = time.perf_counter()
                if measure_from <= done < stop_at:
                    counts[t] += 1
                    errors[t] += _errors(response)
                    latencies[t].append(done - sent_at[i])
                if done < stop_at:
                    conns[i].send_encoded(frames[i], rtype)
                    sent_at[i] = time.perf_counter()

    workers = [threading.Thread(target=drive, args=(t,)) for t in range(threads)]
    for w in workers:
        w.start()
    for w in workers:
        w.join()
    for c in conns:
        c.close()
    lat = sorted(x for chunk in latencies for x in chunk)
    requests = sum(counts)
    return {"clients": clients, "partitions": partitions, "seconds": seconds, "requests_per_s": requests / seconds,
            "offsets_per_s": requests * partitions / seconds, "partition_errors": sum(errors),
            "p50_ms": 1000 * lat[len(lat) // 2] if lat else None,
            "p99_ms": 1000 * lat[int(len(lat) * 0.99)] if lat else None}


def _join_classic(conns: list[KafkaConnection], group: str, topic: str,
                  timeout: float = 600.0) -> list[tuple[str, int]]:
    """Run len(conns) dynamic members (one connection each) as clients do until all are synced in one generation.

    A member joins (again with the id of MEMBER_ID_REQUIRED), syncs (the leader with every member's
    assignment), and once synced heartbeats; a rebalance answer sends it back to join. Done when
    every member is synced in the same generation and one more round of heartbeats is all clean.
    """
    import select

    join = request_class("join_group", 9)
    proto = nested_class(join, "JoinGroupRequestProtocol")
    sync = request_class("sync_group", 5)
    item = nested_class(sync, "SyncGroupRequestAssignment")
    hb = request_class("heartbeat", 4)
    meta = subscription_bytes((topic,))
    n = len(conns)
    ids, gens, state = [""] * n, [-1] * n, ["join"] * n  # join -> joining -> syncing -> synced -> beating
    clean = [False] * n

    def send_join(i: int) -> None:
        conns[i].send(join(group_id=group, session_timeout=SESSION, rebalance_timeout=REBALANCE, member_id=ids[i],
                           group_instance_id=None, protocol_type="consumer",
                           protocols=(proto(name="range", metadata=meta),)))
        state[i], clean[i] = "joining", False

    for i in range(n):
        send_join(i)
    by_sock = {c._sock.fileno(): i for i, c in enumerate(conns)}
    poller = select.poll()  # not select(): a thousand connections take descriptors past 1024
    for c in conns:
        poller.register(c._sock, select.POLLIN)
    deadline = time.perf_counter() + timeout
    while True:
        if all(clean) and len(set(gens)) == 1:
            for c in conns:  # the last heartbeats' answers
                while c.in_flight:
                    c.receive()
            return list(zip(ids, gens, strict=True))
        if time.perf_counter() > deadline:
            raise WireError(f"{group}: no stable generation in {timeout} s: {state} {gens} {clean}")
        ready = [fd for fd, _ in poller.poll(1000) if conns[by_sock[fd]].in_flight]
        for fd in ready:
            i = by_sock[fd]
            if not conns[i].poll(0):
                continue
            r = conns[i].receive(0)
            code = int(r.error_code)
            if state[i] == "joining":
                if code == 79:  # MEMBER_ID_REQUIRED
                    ids[i] = r.member_id
                    send_join(i)
                    continue
                if code:
                    raise WireError(f"JoinGroup: {r.error_code.name}")
                ids[i], gens[i] = r.member_id, int(r.generation_id)
                assignments = ()
                if r.leader == r.member_id:
                    assignments = tuple(item(member_id=m.member_id, assignment=assignment_bytes({topic: [k]}))
                                        for k, m in enumerate(r.members))
                conns[i].send(sync(group_id=group, generation_id=gens[i], member_id=ids[i], group_instance_id=None,
                                   protocol_type="consumer", protocol_name="range", assignments=assignments))
                state[i] = "syncing"
            elif code in (22, 27):  # ILLEGAL_GENERATION, REBALANCE_IN_PROGRESS: join again
                send_join(i)
            elif code == 25:  # UNKNOWN_MEMBER_ID
                ids[i] = ""
                send_join(i)
            elif code:
                raise WireError(f"{state[i]}: {r.error_code.name}")
            else:
                clean[i] = state[i] == "beating"
                state[i] = "beating"
                conns[i].send(hb(group_id=group, generation_id=gens[i], member_id=ids[i], group_instance_id=None))


def classic_rebalance_seconds(bootstrap: str, topic: str, members: int = 1000) -> dict:
    """Seconds for `members` new members (one connection each) to join one group and sync."""
    conns = [KafkaConnection(bootstrap, client_id=f"member-{i}", timeout=300) for i in range(members)]
    try:
        started = time.perf_counter()
        _join_classic(conns, f"bench-rebalance-{uuid.uuid4().hex[:8]}", topic)
        return {"members": members, "seconds": time.perf_counter() - started}
    finally:
        for c in conns:
            c.close()


def consumer_rebalance_seconds(bootstrap: str, topic: str, members: int = 1000, connections: int = 16) -> dict:
    """Seconds until `members` KIP-848 members all reach the group's epoch with their assignment reconciled.

    A member fenced on the way (UNKNOWN_MEMBER_ID or FENCED_MEMBER_EPOCH: its heartbeats came further apart
    than the session timeout on a loaded machine) joins again with epoch 0, as Kafka's consumer does; the
    result counts them (`fenced`)."""
    cls = request_class("consumer_group_heartbeat", 1)
    tp = nested_class(cls, "TopicPartitions")
    group = f"bench-cg-{uuid.uuid4().hex[:8]}"
    ids = [str(uuid.uuid4()) for _ in range(members)]
    epochs = [0] * members
    owned: list[tuple] = [()] * members
    conns = [KafkaConnection(bootstrap, client_id=f"cg-{i}", timeout=120) for i in range(connections)]
    started = time.perf_counter()
    rounds = fenced = 0
    joining = [True] * members
    try:
        while True:
            rounds += 1
            for i in range(members):
                if joining[i]:
                    req = cls(group_id=group, member_id=ids[i], member_epoch=0, rebalance_timeout=REBALANCE,
                              subscribed_topic_names=(topic,), topic_partitions=())
                else:
                    req = cls(group_id=group, member_id=ids[i], member_epoch=epochs[i], topic_partitions=owned[i])
                conns[i % connections].send(req)
            changed = False
            for i in range(members):
                r = conns[i % connections].receive()
                joining[i] = False
                if int(r.error_code) in (25, 110):  # UNKNOWN_MEMBER_ID, FENCED_MEMBER_EPOCH: join again
                    fenced += 1
                    joining[i], epochs[i], owned[i], changed = True, 0, (), True
                    continue
                if int(r.error_code):
                    raise WireError(f"ConsumerGroupHeartbeat: {r.error_code.name}")
                if int(r.member_epoch) != epochs[i]:
                    changed = True
                epochs[i] = int(r.member_epoch)
                if r.assignment is not None:
                    new = tuple(tp(topic_id=t.topic_id, partitions=tuple(sorted(t.partitions)))
                                for t in r.assignment.topic_partitions)
                    changed |= new != owned[i]
                    owned[i] = new
            if rounds > 1 and not changed and len(set(epochs)) == 1:
                return {"members": members, "seconds": time.perf_counter() - started, "rounds": rounds,
                        "fenced": fenced, "epoch": epochs[0],
                        "assigned": sum(len(p.partitions) for o in owned for p in o)}
            if time.perf_counter() - started > 600:
                raise WireError("no convergence in 600 s")
    finally:
        for c in conns:
            c.close()


def heartbeats_per_second(bootstrap: str, topic: str, members: int = 1000, group_size: int = 10,
                          in_flight: tuple[int, ...] = (8, 32, 128), seconds: float = 5.0,
                          connections: int = 8) -> list[dict]:
    """Classic members' heartbeats/s at rising in-flight counts; any error code counts as a false expiry."""
    setup = [KafkaConnection(bootstrap, client_id=f"hb-setup-{i}", timeout=120) for i in range(group_size)]
    members_list: list[tuple[str, str, int]] = []
    tag = uuid.uuid4().hex[:6]
    for g in range(members // group_size):
        group = f"bench-hb-{tag}-{g}"
        members_list += [(group, m, gen) for m, gen in _join_classic(setup, group, topic)]
    for c in setup:
        c.close()
    hb = request_class("heartbeat", 4)
    frames = [encode_request(hb(group_id=g, generation_id=gen, member_id=m, group_instance_id=None), 0, "hb")
              for g, m, gen in members_list]
    rtype = response_type_of(hb(group_id="g", generation_id=1, member_id="m"))
    conns = [KafkaConnection(bootstrap, client_id=f"hb-{i}", timeout=60) for i in range(connections)]
    results = []
    try:
        for level in in_flight:
            depth = max(1, level // connections)
            count, errors, lat = 0, 0, []
            cursor = 0
            sent: list[list[float]] = [[] for _ in conns]
            for ci, c in enumerate(conns):
                for _ in range(depth):
                    c.send_encoded(frames[cursor % len(frames)], rtype)
                    sent[ci].append(time.perf_counter())
                    cursor += 1
            stop_at = time.perf_counter() + seconds
            while time.perf_counter() < stop_at:
                for ci, c in enumerate(conns):
                    r = c.receive()
                    lat.append(time.perf_counter() - sent[ci].pop(0))
                    count += 1
                    errors += int(r.error_code) != 0
                    c.send_encoded(frames[cursor % len(frames)], rtype)
                    sent[ci].append(time.perf_counter())
                    cursor += 1
            for c in conns:  # drain
                while c.in_flight:
                    errors += int(c.receive().error_code) != 0
            lat.sort()
            results.append({"members": len(frames), "in_flight": depth * connections, "per_s": count / seconds,
                            "false_expiries": errors, "p50_ms": 1000 * statistics.median(lat),
                            "p99_ms": 1000 * lat[int(len(lat) * 0.99)]})
    finally:
        for c in conns:
            c.close()
    return results


def bulk_commit(bootstrap: str, topic: str, groups: int, partitions: int, per_request: int = 100,
                connections: int = 8, depth: int = 4) -> int:
    """Commit `partitions` offsets of `topic` for each of `groups` groups (pipelined); returns offsets acknowledged."""
    requests = [commit_request(f"bench-restart-{g}", topic, range(s, min(s + per_request, partitions)), 7 + g)
                for g in range(groups) for s in range(0, partitions, per_request)]
    conns = [KafkaConnection(bootstrap, client_id=f"bulk-{i}", timeout=120) for i in range(connections)]
    acked = 0
    try:
        for start in range(0, len(requests), connections * depth):
            batch = requests[start:start + connections * depth]
            for k, req in enumerate(batch):
                conns[k % connections].send(req)
            for k, req in enumerate(batch):
                r = conns[k % connections].receive()
                if _errors(r):
                    raise WireError(f"bulk commit failed: {r}")
                acked += len(req.topics[0].partitions)
    finally:
        for c in conns:
            c.close()
    return acked


def fetch_answered(bootstrap: str, groups: list[str], topic: str, timeout: float = 600.0) -> float:
    """Seconds until an OffsetFetch of each group answers without COORDINATOR_LOAD_IN_PROGRESS."""
    cls = request_class("offset_fetch", 8)
    gcls, tcls = nested_class(cls, "OffsetFetchRequestGroup"), nested_class(cls, "OffsetFetchRequestTopics")
    started = time.perf_counter()
    with KafkaConnection(bootstrap, timeout=60) as conn:
        for g in groups:
            while True:
                r = conn.request(cls(groups=(gcls(group_id=g, topics=(tcls(name=topic, partition_indexes=(0,)),)),),
                                     require_stable=False))
                if int(r.groups[0].error_code) == 0:
                    break
                if time.perf_counter() - started > timeout:
                    raise WireError(f"{g}: {r.groups[0].error_code.name} after {timeout} s")
                time.sleep(0.05)
    return time.perf_counter() - started
