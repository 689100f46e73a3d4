"""Bad input on the Kafka listener gets Kafka's answer or a closed connection, and the listener serves on."""

from __future__ import annotations

import asyncio
import datetime
import random
import socket
import struct
import threading

import pytest
import ray
from kafka_wire_frames import call, connect, decode_response, raw_frame, read_frame, request_class, request_frame
from kafka_wire_names import TOPIC
from kio.schema.api_versions.v3.request import ApiVersionsRequest
from kio.schema.consumer_group_heartbeat.v1.request import ConsumerGroupHeartbeatRequest
from kio.schema.metadata.v12.request import MetadataRequest, MetadataRequestTopic

from groupcoord.actors.service.kafka import APIS, KAFKA_LISTENER_NAME, KafkaListener, ServiceBridge
from groupcoord.actors.service.kafka.bridge import cluster_id_of

UNSUPPORTED_VERSION = 35
ILLEGAL_SASL_STATE = 34


def advertised(bootstrap: str) -> dict[int, tuple[int, int]]:
    answer = call(bootstrap, ApiVersionsRequest(client_software_name="wire-test", client_software_version="1"))
    assert answer.error_code == 0
    return {k.api_key: (k.min_version, k.max_version) for k in answer.api_keys}


def serves(bootstrap: str) -> bool:
    """The listener answers ApiVersions and a Metadata request naming the registry's topic."""
    topics = call(bootstrap, MetadataRequest(topics=(MetadataRequestTopic(topic_id=None, name=TOPIC),),
                                             allow_auto_topic_creation=False,
                                             include_topic_authorized_operations=False)).topics
    return advertised(bootstrap) == {k: (lo, hi) for k, (_, lo, hi, _) in APIS.items()} and \
        [(t.name, len(t.partitions), t.error_code) for t in topics] == [(TOPIC, 6, 0)]


def closed_after(bootstrap: str, frame: bytes) -> bool:
    """Whether the listener closes the connection (without answering) after `frame`."""
    with connect(bootstrap) as sock:
        sock.sendall(frame)
        return read_frame(sock) is None


def test_api_versions_advertises_exactly_what_is_served(kafka_bootstrap):
    assert serves(kafka_bootstrap)


def test_api_versions_at_an_unknown_version_gets_the_v0_answer_with_the_table(kafka_bootstrap):
    with connect(kafka_bootstrap) as sock:
        sock.sendall(raw_frame(18, 99, 7, b"\x00\x03abc\x00"))
        frame = read_frame(sock)
    assert frame is not None
    correlation_id, answer = decode_response(frame, 18, 0)
    assert correlation_id == 7 and answer.error_code == UNSUPPORTED_VERSION
    assert {k.api_key: (k.min_version, k.max_version) for k in answer.api_keys} == {
        k: (lo, hi) for k, (_, lo, hi, _) in APIS.items()
    }


def test_sasl_on_a_listener_without_authorization_is_illegal_sasl_state(kafka_bootstrap):
    # Authorization off: a PLAINTEXT listener, which answers the SASL APIs as Kafka's KafkaApis does there.
    handshake = call(kafka_bootstrap, request_class(17, 1)(mechanism="PLAIN"))
    assert handshake.error_code == ILLEGAL_SASL_STATE and list(handshake.mechanisms) == []
    answer = call(kafka_bootstrap, request_class(36, 2)(auth_bytes=b"\0billing\0secret"))
    assert answer.error_code == ILLEGAL_SASL_STATE and "security.protocol=PLAINTEXT" in answer.error_message
    assert serves(kafka_bootstrap)


@pytest.mark.parametrize(("api_key", "version", "why"), [
    (999, 0, "an API key Kafka does not have"),
    (0, 9, "Produce, which the listener does not serve"),
    (11, 99, "JoinGroup at a version above the served range"),
    (8, 0, "OffsetCommit below the served range (Kafka 4 removed v0-1)"),
    (-1, 0, "a negative API key"),
])
def test_apis_and_versions_not_served_close_the_connection(kafka_bootstrap, api_key, version, why):
    assert closed_after(kafka_bootstrap, raw_frame(api_key, version, 1, b"\x00\x00")), why


@pytest.mark.parametrize(("frame", "why"), [
    (struct.pack(">i", -5), "a negative size"),
    (struct.pack(">i", 2**31 - 1), "a size above socket.request.max.bytes"),
    (struct.pack(">i", 3) + b"\x00\x0b\x00", "a frame too short for a request header"),
    (raw_frame(11, 5, 1, b"\xff" * 40), "a JoinGroup v5 body that does not parse"),
    (raw_frame(3, 12, 1, b"\x00\x09wire-test\x00\x05\x01\x02"), "a Metadata v12 body cut short"),
    (request_frame(ApiVersionsRequest(client_software_name="x", client_software_version="1"))[:-1] + b"\x00\x00",
     "trailing bytes after an ApiVersions body"),
])
def test_malformed_frames_close_the_connection(kafka_bootstrap, frame, why):
    if len(frame) > 4 and struct.unpack(">i", frame[:4])[0] != len(frame) - 4:
        frame = struct.pack(">i", len(frame) - 4) + frame[4:]  # the size names the bytes that follow
    assert closed_after(kafka_bootstrap, frame), why
    assert serves(kafka_bootstrap)


def test_a_stalled_connection_does_not_hold_up_the_others_and_is_closed(kafka_service, kafka_bootstrap):
    stalled = connect(kafka_bootstrap)
    stalled.sendall(struct.pack(">i", 100) + b"\x00\x12\x00\x03")  # 4 of 100 bytes, then nothing
    try:
        assert serves(kafka_bootstrap)  # other connections are served meanwhile
    finally:
        stalled.close()
    # The same listener code with a short frame timeout, on a thread of this process, closes the stalled one.
    loop = asyncio.new_event_loop()
    thread = threading.Thread(target=loop.run_forever, daemon=True)
    thread.start()
    bridge = ServiceBridge(kafka_service.namespace, kafka_service.num_partitions, kafka_service.router,
                           kafka_service.partitions, cluster_id_of(kafka_service.namespace, kafka_service.storage_path))
    listener = KafkaListener(bridge, "127.0.0.1", 0, frame_timeout_s=0.3)
    asyncio.run_coroutine_threadsafe(listener.start(), loop).result(10)
    try:
        local = f"127.0.0.1:{listener.port}"
        with connect(local) as sock:
            sock.sendall(struct.pack(">i", 100) + b"\x00\x12")
            assert read_frame(sock) is None  # closed once the rest of the frame did not come in time
        assert listener.stats()["closed_for_bad_input"] == 1
        assert serves(local)
    finally:
        asyncio.run_coroutine_threadsafe(listener.close(), loop).result(10)
        loop.call_soon_threadsafe(loop.stop)
        thread.join(10)


def test_fuzzed_frames_never_stop_the_listener(kafka_bootstrap, kafka_service):
    rng = random.Random(32)
    served = [(k, v) for k, (_, lo, hi, _) in APIS.items() for v in range(lo, hi + 1)]
    actor = ray.get_actor(KAFKA_LISTENER_NAME, namespace=kafka_service.namespace)
    before = ray.get(actor.stats.remote())
    for i in range(300):
        kind = rng.random()
        if kind < 0.7:  # a served API and version with a random body
            api_key, version = rng.choice(served)
            frame = raw_frame(api_key, version, i, rng.randbytes(rng.randrange(0, 80)))
        elif kind < 0.85:  # a valid request with bytes flipped
            request = ApiVersionsRequest(client_software_name="fuzz", client_software_version="1")
            data = bytearray(request_frame(request))
            for _ in range(rng.randrange(1, 4)):
                data[rng.randrange(4, len(data))] = rng.randrange(256)
            frame = bytes(data)
        else:  # any bytes at all, with a size that may lie
            frame = rng.randbytes(rng.randrange(0, 40))
        with connect(kafka_bootstrap, timeout_s=0.5) as sock:
            sock.sendall(frame)
            if rng.random() < 0.5:
                sock.shutdown(socket.SHUT_WR)
            try:
                read_frame(sock)
            except (TimeoutError, ConnectionError):
                pass  # a request that waits (a Fetch, a parked JoinGroup) or a reset: both are fine
    after = ray.get(actor.stats.remote())
    assert after["closed_for_bad_input"] > before["closed_for_bad_input"]
    assert after["handler_failures"] == before["handler_failures"] == 0  # every request that parsed was answered
    assert serves(kafka_bootstrap)
    assert ray.get(actor.info.remote())["bootstrap"] == kafka_bootstrap


def test_consumer_group_heartbeat_v1_without_a_member_id_is_invalid_request(kafka_bootstrap):
    # From v1 the client generates its member id (KIP-1082): Kafka refuses an empty one, even on a join.
    answer = call(kafka_bootstrap, ConsumerGroupHeartbeatRequest(
        group_id="wire-empty-member", member_id="", member_epoch=0, instance_id=None, rack_id=None,
        rebalance_timeout=datetime.timedelta(seconds=30), subscribed_topic_names=(TOPIC,),
        subscribed_topic_regex=None, server_assignor=None, topic_partitions=()))
    assert (answer.error_code, answer.error_message, answer.member_id) == (42, "MemberId can't be empty.", None)
