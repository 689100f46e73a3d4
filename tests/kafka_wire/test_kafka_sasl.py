"""SASL/PLAIN on the Kafka listener of a service that authorizes: Kafka's clients and tool, unchanged, as the
service's principals (their ACLs, ListGroups filtering, quotas, revocation), and the SASL exchange byte by byte."""

from __future__ import annotations

import logging
import select
import socket
import struct
import subprocess
from concurrent.futures import ThreadPoolExecutor
from types import SimpleNamespace

import kafka
import kafka.errors
import pytest
import ray
from confluent_kafka import Consumer, KafkaError, KafkaException
from confluent_kafka import TopicPartition as CkTopicPartition
from kafka_sasl import (
    ADMIN,
    SASL_NAMESPACE,
    api_versions,
    authenticate,
    exchange,
    handshake,
    login,
    plain,
    raw_token,
)
from kafka_wire_frames import connect, decode_response, raw_frame, read_frame, request_frame
from kafka_wire_names import TOPIC
from kio.schema.list_groups.v4.request import ListGroupsRequest
from kio.schema.metadata.v12.request import MetadataRequest, MetadataRequestTopic
from kio.schema.offset_commit.v9.request import (
    OffsetCommitRequest,
    OffsetCommitRequestPartition,
    OffsetCommitRequestTopic,
)
from kio.schema.offset_fetch.v8.request import OffsetFetchRequest, OffsetFetchRequestGroup
from kio.schema.sasl_authenticate.v2.request import SaslAuthenticateRequest
from kio.schema.sasl_handshake.v1.request import SaslHandshakeRequest
from services import running_service
from test_kafka_consumer_groups_tool import JVM_OPTIONS, TOOL, table
from waiting import wait_for

from benchmarks.kafka.dist import classpath
from groupcoord.actors import AclBinding, AdminClient
from groupcoord.actors.service.kafka import KAFKA_LISTENER_NAME
from groupcoord.protocol import TopicPartition

GROUP_AUTHORIZATION_FAILED, SASL_AUTHENTICATION_FAILED, ILLEGAL_SASL_STATE, UNSUPPORTED_SASL_MECHANISM = 30, 58, 34, 33
DENIED_GROUP = "analytics-daily"
PRIVATE_TOPIC = "payroll"  # billing has no ACL on it
TOPIC_AUTHORIZATION_FAILED, UNKNOWN_TOPIC_OR_PARTITION = 29, 3


@pytest.fixture(scope="module")
def env(ray_local, tmp_path_factory):
    """A service with authorization and a SASL_PLAINTEXT listener; principal "billing" may READ groups
    "billing-*" and the topic TOPIC (not PRIVATE_TOPIC); the group DENIED_GROUP has offsets (the operator's)."""
    with running_service(
        tmp_path_factory, SASL_NAMESPACE, 2, kafka_listener="127.0.0.1:0",
        security={"authorization": True, "super_users": ["User:admin"], "admin_credentials": ADMIN},
        consumer_heartbeat_interval_ms=300, consumer_session_timeout_ms=6000,
    ) as service:
        admin = AdminClient(service, credentials=ADMIN)
        admin.create_topic(TOPIC, 6)
        admin.report_end_offsets(TOPIC, {p: 100 for p in range(6)})
        admin.create_topic(PRIVATE_TOPIC, 2)
        billing = admin.create_principal("billing")
        admin.create_acls([AclBinding("GROUP", "billing-", "PREFIXED", billing.principal, "READ"),
                           AclBinding("TOPIC", TOPIC, "LITERAL", billing.principal, "READ")])
        admin.alter_group_offsets(DENIED_GROUP, {TopicPartition(TOPIC, 0): 5})
        assert service.kafka_bootstrap is not None
        yield SimpleNamespace(service=service, admin=admin, billing=billing, bootstrap=service.kafka_bootstrap)


def offsets_of(admin: AdminClient, group: str) -> dict[int, int]:
    return {tp.partition: om.offset for tp, om in admin.list_group_offsets(group).items()}


# --- confluent-kafka (librdkafka), kafka-python and kafka-consumer-groups, unchanged -------------------


def _confluent(env, group: str, password: str, **extra) -> Consumer:
    return Consumer({"bootstrap.servers": env.bootstrap, "group.id": group, "enable.auto.commit": False,
                     "security.protocol": "SASL_PLAINTEXT", "sasl.mechanism": "PLAIN",
                     "sasl.username": "billing", "sasl.password": password, **extra})


def test_confluent_kafka_commits_and_reads_back_an_allowed_group_and_is_refused_another(env):
    consumer = _confluent(env, "billing-ck", env.billing.secret)
    try:
        consumer.commit(offsets=[CkTopicPartition(TOPIC, p, 10 + p) for p in range(6)], asynchronous=False)
        committed = consumer.committed([CkTopicPartition(TOPIC, p) for p in range(6)], timeout=30)
        assert {tp.partition: tp.offset for tp in committed} == {p: 10 + p for p in range(6)}
    finally:
        consumer.close()
    assert offsets_of(env.admin, "billing-ck") == {p: 10 + p for p in range(6)}

    denied = _confluent(env, DENIED_GROUP, env.billing.secret)
    try:
        with pytest.raises(KafkaException) as refused:
            denied.commit(offsets=[CkTopicPartition(TOPIC, 0, 99)], asynchronous=False)
        assert refused.value.args[0].code() == KafkaError.GROUP_AUTHORIZATION_FAILED
    finally:
        denied.close()
    assert offsets_of(env.admin, DENIED_GROUP) == {0: 5}  # unchanged


def test_confluent_kafka_consumer_protocol_member_joins_as_billing(env):
    consumer = _confluent(env, "billing-848", env.billing.secret, **{"group.protocol": "consumer"})
    try:
        consumer.subscribe([TOPIC])

        def owns_all() -> bool:
            consumer.poll(0.05)
            return len(consumer.assignment()) == 6

        wait_for(owns_all, 60, "the KIP-848 member to own the topic", interval_s=0)
    finally:
        consumer.close()
    assert "billing-848" in {g.group_id for g in env.admin.list_groups()}


def test_confluent_kafka_with_a_wrong_password_fails_authentication(env):
    errors: list[KafkaError] = []
    consumer = _confluent(env, "billing-ck", "not-the-secret", error_cb=errors.append)
    try:
        def failed() -> bool:
            consumer.poll(0.1)
            return any(e.code() == KafkaError._AUTHENTICATION for e in errors)

        wait_for(failed, 30, "librdkafka to report the failed authentication", interval_s=0)
    finally:
        consumer.close()
    assert any("Invalid username or password" in e.str() for e in errors), [e.str() for e in errors]


def test_kafka_python_joins_commits_and_reads_back_as_billing(env):
    consumer = kafka.KafkaConsumer(
        TOPIC, bootstrap_servers=env.bootstrap, group_id="billing-kp", client_id="kp-sasl", enable_auto_commit=False,
        security_protocol="SASL_PLAINTEXT", sasl_mechanism="PLAIN", sasl_plain_username="billing",
        sasl_plain_password=env.billing.secret, heartbeat_interval_ms=200, session_timeout_ms=10000,
        fetch_max_wait_ms=100,
    )
    try:
        def owns_all() -> bool:
            consumer.poll(timeout_ms=100)
            return len(consumer.assignment()) == 6

        wait_for(owns_all, 60, "the kafka-python consumer to own the topic", interval_s=0)
        consumer.commit(offsets={kafka.TopicPartition(TOPIC, p): kafka.OffsetAndMetadata(30 + p, "kp", -1)
                                 for p in range(6)})
        assert {p: consumer.committed(kafka.TopicPartition(TOPIC, p)) for p in range(6)} == {
            p: 30 + p for p in range(6)}
    finally:
        consumer.close()
    assert offsets_of(env.admin, "billing-kp") == {p: 30 + p for p in range(6)}


def test_kafka_python_with_a_wrong_password_is_refused(env, caplog):
    with caplog.at_level(logging.WARNING, logger="kafka"), pytest.raises(kafka.errors.KafkaTimeoutError):
        kafka.KafkaConsumer(bootstrap_servers=env.bootstrap, group_id="billing-kp", security_protocol="SASL_PLAINTEXT",
                            sasl_mechanism="PLAIN", sasl_plain_username="billing", sasl_plain_password="wrong",
                            bootstrap_timeout_ms=3000)
    # kafka-python retries the bootstrap until its timeout, logging each refusal with Kafka's error and message.
    assert "SaslAuthenticationFailedError: Authentication failed: Invalid username or password" in caplog.text


def test_kafka_consumer_groups_with_a_command_config_sees_only_what_billing_may(env, tmp_path):
    env.admin.alter_group_offsets("billing-tool", {TopicPartition(TOPIC, p): 50 + p for p in range(6)})
    config = tmp_path / "billing.properties"
    config.write_text(
        "security.protocol=SASL_PLAINTEXT\nsasl.mechanism=PLAIN\n"
        "sasl.jaas.config=org.apache.kafka.common.security.plain.PlainLoginModule required "
        f'username="billing" password="{env.billing.secret}";\n'
    )
    cp = classpath()

    def tool(*args: str) -> str:
        done = subprocess.run(["java", *JVM_OPTIONS, "-cp", cp, TOOL, "--bootstrap-server", env.bootstrap,
                               "--command-config", str(config), *args], capture_output=True, text=True, timeout=180)
        assert done.returncode == 0, f"kafka-consumer-groups {' '.join(args)}: {done.stdout}{done.stderr[-2000:]}"
        return done.stdout

    with ThreadPoolExecutor(2) as pool:
        listed, offsets = pool.map(lambda args: tool(*args), [
            ("--list",), ("--describe", "--group", "billing-tool", "--offsets")])
    groups = set(listed.split())
    assert "billing-tool" in groups and DENIED_GROUP not in groups  # ListGroups shows what billing may DESCRIBE
    assert groups <= {g.group_id for g in env.admin.list_groups()}
    assert all(g.startswith("billing-") for g in groups), groups
    assert sorted((int(r["PARTITION"]), int(r["CURRENT-OFFSET"]), int(r["LAG"])) for r in table(offsets)) == [
        (p, 50 + p, 50 - p) for p in range(6)]


# --- the SASL exchange, byte by byte --------------------------------------------------------------------


def test_api_versions_advertises_the_sasl_apis(env):
    with connect(env.bootstrap) as sock:
        versions = api_versions(sock)
    assert versions[17] == (0, 1) and versions[36] == (0, 2)


def test_a_request_before_authentication_closes_the_connection_unanswered(env):
    with connect(env.bootstrap) as sock:
        sock.sendall(request_frame(MetadataRequest(topics=None, allow_auto_topic_creation=False,
                                                   include_topic_authorized_operations=False)))
        assert read_frame(sock) is None
    with connect(env.bootstrap) as sock:  # after a handshake, anything but SaslAuthenticate: closed too
        api_versions(sock)
        assert handshake(sock).error_code == 0
        sock.sendall(request_frame(ListGroupsRequest(states_filter=()), 4))
        assert read_frame(sock) is None
    with connect(env.bootstrap) as sock:  # ApiVersions only once before the handshake, as Kafka
        api_versions(sock)
        sock.sendall(request_frame(ListGroupsRequest(states_filter=()), 4))
        assert read_frame(sock) is None


def test_an_unsupported_mechanism_is_answered_with_the_enabled_ones_then_closed(env):
    with connect(env.bootstrap) as sock:
        api_versions(sock)
        answer = handshake(sock, "SCRAM-SHA-256")
        assert answer.error_code == UNSUPPORTED_SASL_MECHANISM and list(answer.mechanisms) == ["PLAIN"]
        assert closed_once_hung_up(sock)


@pytest.mark.parametrize(("token", "message"), [
    (b"billing-and-nothing-else", "Invalid SASL/PLAIN response: expected 3 tokens, got 1"),
    (b"\0billing\0secret\0more", "Invalid SASL/PLAIN response: expected 3 tokens, got 4"),
    (b"\0\0secret", "Authentication failed: username not specified"),
    (b"\0billing\0", "Authentication failed: password not specified"),
    (plain("billing", "wrong-password"), "Authentication failed: Invalid username or password"),
    (plain("nobody", "x"), "Authentication failed: Invalid username or password"),
    (plain("User:billing", "x"), "Authentication failed: Invalid username or password"),
])
def test_a_bad_plain_token_fails_with_kafkas_message_then_closes(env, token, message):
    with connect(env.bootstrap) as sock:
        api_versions(sock)
        assert handshake(sock).error_code == 0
        answer = authenticate(sock, token)
        assert (answer.error_code, answer.error_message) == (SASL_AUTHENTICATION_FAILED, message)
        assert closed_once_hung_up(sock)


def test_after_a_failed_login_the_listener_closes_only_once_the_client_hangs_up(env):
    # kafka-python 3.0 drops an answer that arrives together with the end of the stream, so a close right behind
    # the answer would lose Kafka's error (the listener waits SASL_FAILURE_LINGER_S for the client to go).
    with connect(env.bootstrap) as sock:
        api_versions(sock)
        handshake(sock)
        assert authenticate(sock, plain("billing", "wrong")).error_code == SASL_AUTHENTICATION_FAILED
        assert select.select([sock], [], [], 0.3)[0] == []  # no end of stream yet (the linger is 5 s)
        assert closed_once_hung_up(sock)


def closed_once_hung_up(sock: socket.socket) -> bool:
    """Whether the listener closes the connection once this client has closed its sending side."""
    sock.shutdown(socket.SHUT_WR)
    return read_frame(sock) is None


def test_an_authorization_id_other_than_the_username_is_refused(env):
    with connect(env.bootstrap) as sock:
        api_versions(sock)
        handshake(sock)
        answer = authenticate(sock, plain("billing", env.billing.secret, authzid="admin"))
        assert answer.error_code == SASL_AUTHENTICATION_FAILED
        assert "authorization id that is different from username" in answer.error_message


def test_an_oversized_frame_before_authentication_closes_the_connection(env):
    with connect(env.bootstrap) as sock:
        sock.sendall(struct.pack(">i", 600 * 1024) + b"\0" * 16)
        assert read_frame(sock) is None


def test_handshake_v0_takes_one_raw_token(env):
    with connect(env.bootstrap) as sock:  # no ApiVersions first: allowed, as in Kafka
        assert handshake(sock, version=0).error_code == 0
        assert raw_token(sock, plain("billing", env.billing.secret)) == b""
        groups = exchange(sock, ListGroupsRequest(states_filter=()), 5).groups
        assert DENIED_GROUP not in {g.group_id for g in groups}
    with connect(env.bootstrap) as sock:  # a wrong one: no frame carries an error in v0, so closed
        handshake(sock, version=0)
        assert raw_token(sock, plain("billing", "wrong")) is None


def test_once_authenticated_the_sasl_apis_are_illegal_and_the_principals_acls_apply(env):
    with login(env.bootstrap, env.billing) as sock:
        assert exchange(sock, SaslHandshakeRequest(mechanism="PLAIN"), 4).error_code == ILLEGAL_SASL_STATE
        answer = authenticate(sock, plain("billing", env.billing.secret))
        assert answer.error_code == ILLEGAL_SASL_STATE and "after successful authentication" in answer.error_message
        fetched = exchange(sock, OffsetFetchRequest(groups=(
            OffsetFetchRequestGroup(group_id=DENIED_GROUP, topics=None),
            OffsetFetchRequestGroup(group_id="billing-ck", topics=None)), require_stable=False), 6)
        assert [g.error_code for g in fetched.groups] == [GROUP_AUTHORIZATION_FAILED, 0]
        listed = {g.group_id for g in exchange(sock, ListGroupsRequest(states_filter=()), 7).groups}
    with login(env.bootstrap, ADMIN) as sock:  # a super user lists them all
        everything = {g.group_id for g in exchange(sock, ListGroupsRequest(states_filter=()), 8).groups}
    assert DENIED_GROUP in everything and DENIED_GROUP not in listed and listed <= everything


def _commit(group: str, offset: int, topics: tuple[str, ...] = (TOPIC,)) -> OffsetCommitRequest:
    return OffsetCommitRequest(group_id=group, generation_id_or_member_epoch=-1, member_id="", group_instance_id=None,
                               topics=tuple(OffsetCommitRequestTopic(name=topic, partitions=(
                                   OffsetCommitRequestPartition(partition_index=0, committed_offset=offset,
                                                                committed_metadata=""),)) for topic in topics))


def _metadata(*names: str) -> MetadataRequest:
    return MetadataRequest(topics=tuple(MetadataRequestTopic(topic_id=None, name=n) for n in names),
                           allow_auto_topic_creation=False, include_topic_authorized_operations=False)


def test_topics_the_principal_may_not_see_are_topic_authorization_failed_as_in_kafka(env):
    with login(env.bootstrap, env.billing) as sock:
        everything = exchange(sock, MetadataRequest(topics=None, allow_auto_topic_creation=False,
                                                    include_topic_authorized_operations=False), 30)
        named = exchange(sock, _metadata(TOPIC, PRIVATE_TOPIC, "no-such-topic"), 31)
        committed = exchange(sock, _commit("billing-partial", 7, (TOPIC, PRIVATE_TOPIC)), 32)
    assert [t.name for t in everything.topics] == [TOPIC]  # only what billing may DESCRIBE
    # Kafka answers 29 for a topic the principal may not DESCRIBE whether or not it exists (no existence leak).
    assert [(t.name, t.error_code) for t in named.topics] == [
        (TOPIC, 0), (PRIVATE_TOPIC, TOPIC_AUTHORIZATION_FAILED), ("no-such-topic", TOPIC_AUTHORIZATION_FAILED)]
    assert [(t.name, t.partitions[0].error_code) for t in committed.topics] == [
        (TOPIC, 0), (PRIVATE_TOPIC, TOPIC_AUTHORIZATION_FAILED)]
    assert offsets_of(env.admin, "billing-partial") == {0: 7}
    with login(env.bootstrap, ADMIN) as sock:  # a principal that may see everything learns it does not exist
        assert [t.error_code for t in exchange(sock, _metadata("no-such-topic"), 33).topics] == [
            UNKNOWN_TOPIC_OR_PARTITION]


def test_a_principal_over_its_request_quota_gets_throttle_time(env):
    metered = env.admin.create_principal("metered")
    env.admin.create_acls([AclBinding("GROUP", "metered-", "PREFIXED", metered.principal, "READ"),
                           AclBinding("TOPIC", TOPIC, "LITERAL", metered.principal, "READ")])
    env.admin.alter_client_quota(metered.principal, 1.0)
    with login(env.bootstrap, metered) as sock:
        answers = [exchange(sock, _commit("metered-g", i), 10 + i) for i in range(3)]
    assert [a.topics[0].partitions[0].error_code for a in answers] == [0, 0, 0]
    assert answers[-1].throttle_time.total_seconds() > 0  # Kafka's throttle_time_ms from the partition actor


def test_a_principal_deleted_later_stops_working_on_its_open_connection(env):
    temp = env.admin.create_principal("temp")
    env.admin.create_acls([AclBinding("GROUP", "temp-", "PREFIXED", temp.principal, "READ")])
    request = OffsetFetchRequest(groups=(OffsetFetchRequestGroup(group_id="temp-g", topics=None),),
                                 require_stable=False)
    with login(env.bootstrap, temp) as sock:
        assert exchange(sock, request, 20).groups[0].error_code == 0
        env.admin.delete_principal("temp")
        wait_for(lambda: exchange(sock, request, 21).groups[0].error_code == SASL_AUTHENTICATION_FAILED, 10,
                 "the deleted principal's requests to be refused")
    with connect(env.bootstrap) as sock:  # and it cannot log in again
        api_versions(sock)
        handshake(sock)
        assert authenticate(sock, plain("temp", temp.secret)).error_code == SASL_AUTHENTICATION_FAILED


def test_a_principal_created_a_moment_ago_can_log_in_from_many_connections_at_once(env):
    fresh = env.admin.create_principal("fresh")  # each login asks the router for the newest principals first
    sockets = [connect(env.bootstrap) for _ in range(6)]
    try:
        for sock in sockets:
            api_versions(sock)
            assert handshake(sock).error_code == 0
        login_frame = request_frame(SaslAuthenticateRequest(auth_bytes=plain("fresh", fresh.secret)), 3)
        for sock in sockets:  # six logins at once: those arriving while another refreshes wait for it
            sock.sendall(login_frame)
        answers = [decode_response(read_frame(sock) or b"", 36, 2)[1] for sock in sockets]
    finally:
        for sock in sockets:
            sock.close()
    assert [(a.error_code, a.error_message) for a in answers] == [(0, None)] * 6


def listener_stats() -> dict:
    return ray.get(ray.get_actor(KAFKA_LISTENER_NAME, namespace=SASL_NAMESPACE).stats.remote())


def test_failed_logins_are_audited_by_principal_without_the_password(env):
    before = listener_stats()
    with connect(env.bootstrap) as sock:
        api_versions(sock)
        handshake(sock)
        assert authenticate(sock, plain("billing", "audited-wrong-password")).error_code == SASL_AUTHENTICATION_FAILED
    after = listener_stats()
    key = "User:billing SaslAuthenticate SASL_AUTHENTICATION_FAILED"
    assert after["security_protocol"] == "SASL_PLAINTEXT"
    assert after["sasl"]["failures"].get(key, 0) == before["sasl"]["failures"].get(key, 0) + 1
    assert after["sasl"]["failed"] == before["sasl"]["failed"] + 1
    assert after["served"]["SaslAuthenticate v2"] > before["served"].get("SaslAuthenticate v2", 0)
    assert "audited-wrong-password" not in repr(after)


def test_malformed_sasl_frames_close_the_connection_and_the_listener_serves_on(env):
    for frame in (raw_frame(17, 1, 1, b"\xff\xff\xff"), raw_frame(17, 7, 1, b"\x00\x05PLAIN"),
                  struct.pack(">i", 3) + b"\x00\x11\x00"):
        with connect(env.bootstrap) as sock:
            sock.sendall(frame)
            assert read_frame(sock) is None
    with connect(env.bootstrap) as sock:
        api_versions(sock)
        handshake(sock)
        sock.sendall(raw_frame(36, 2, 3, b"\x7f"))  # SaslAuthenticate whose bytes do not parse
        assert read_frame(sock) is None
    with login(env.bootstrap, env.billing) as sock:
        assert exchange(sock, ListGroupsRequest(states_filter=()), 9).error_code == 0
