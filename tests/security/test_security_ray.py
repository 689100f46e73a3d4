"""Authorization enforced by the service's own actors, on real Ray: one service with authorization for the module."""

from __future__ import annotations

import glob
import json
import os

import pytest
import ray
from waiting import wait_for

from groupcoord.actors import (
    AclBinding,
    AdminClient,
    ClusterAuthorizationFailedError,
    Credentials,
    GroupAuthorizationFailedError,
    GroupMember,
    SaslAuthenticationFailedError,
    TopicAuthorizationFailedError,
    start,
    stop,
)
from groupcoord.actors.client.coordinator_client import CoordinatorClient
from groupcoord.actors.service.overload import THROTTLE_AFTER_MS
from groupcoord.protocol import Errors, GroupConfig, partition_for
from groupcoord.protocol import OffsetAndMetadata as OM
from groupcoord.protocol import TopicPartition as TP
from groupcoord.protocol.messages import (
    DeleteGroupsRequest,
    DescribeGroupsRequest,
    HeartbeatRequest,
    JoinGroupRequest,
    ListGroupsRequest,
    OffsetCommitRequest,
    OffsetFetchRequest,
)
from groupcoord.storage.security_store import SECURITY_FILE

NAMESPACE = "gc-test-security"
ADMIN = Credentials("User:admin", "operator-secret-" + "x" * 20)
PARTITIONS = 3


@pytest.fixture(scope="module")
def env(ray_local, tmp_path_factory):
    path = str(tmp_path_factory.mktemp(NAMESPACE))
    config = GroupConfig(min_session_timeout_ms=100, initial_rebalance_delay_ms=0)
    svc = start(num_partitions=PARTITIONS, storage_path=path, namespace=NAMESPACE, config=config,
                authorization=True, super_users=["User:admin"], admin_credentials=ADMIN)
    admin = AdminClient(svc, credentials=ADMIN)
    admin.create_topic("orders", 4)
    admin.create_topic("payroll", 4)
    try:
        yield {"svc": svc, "admin": admin, "path": path, "config": config}
    finally:
        stop(NAMESPACE)


def principal(env, name, acls=()):
    """A new principal with these (resource type, name, operation[, pattern[, permission]]) ACLs."""
    cred = env["admin"].create_principal(name)
    env["admin"].create_acls([AclBinding(a[0], a[1], a[3] if len(a) > 3 else "LITERAL", cred.principal, a[2],
                                         a[4] if len(a) > 4 else "ALLOW") for a in acls])
    return cred


def coordinator(env, group):
    return env["svc"].find_coordinator(group)[1]


def commit(env, group, offsets, cred=None):
    handle = coordinator(env, group)
    req = OffsetCommitRequest(group, offsets)
    kw = {} if cred is None else {"credentials": cred}
    return ray.get(handle.commit_offsets.remote(req, **kw))


def committed(env, group):
    return env["admin"].list_group_offsets(group)


def test_direct_actor_calls_without_valid_credentials_change_nothing(env):
    handle = coordinator(env, "direct")
    offsets = {TP("orders", 0): OM(10)}
    for cred in (None, Credentials("User:admin", "forged"), Credentials("User:nobody", "x"), "User:admin"):
        kw = {} if cred is None else {"credentials": cred}
        r = ray.get(handle.commit_offsets.remote(OffsetCommitRequest("direct", offsets), **kw))
        assert r.errors == {TP("orders", 0): Errors.SASL_AUTHENTICATION_FAILED}
        join = ray.get(handle.join_group.remote(JoinGroupRequest("direct", 10_000, protocols=(("range", b""),)), **kw))
        assert join.error == Errors.SASL_AUTHENTICATION_FAILED
        batch = ray.get(handle.batch.remote([("heartbeat", HeartbeatRequest("direct", 1, "m")),
                                             ("commit_offsets", OffsetCommitRequest("direct", offsets))], **kw))
        assert [r.error if hasattr(r, "error") else r.errors[TP("orders", 0)] for r in batch] == [
            Errors.SASL_AUTHENTICATION_FAILED] * 2
        assert ray.get(env["svc"].router.create_topic.remote("sneaky", 1, **kw)) == Errors.SASL_AUTHENTICATION_FAILED
        error, _ = ray.get(env["svc"].router.create_acls.remote(
            [AclBinding("GROUP", "*", "LITERAL", "User:*", "ALL")], **kw))
        assert error == Errors.SASL_AUTHENTICATION_FAILED
        assert ray.get(env["svc"].router.describe_topics.remote(None, **kw)) == {}
        ray.get(handle.crash.remote(**kw))  # refused: the actor lives on
    assert committed(env, "direct") == {}
    assert "sneaky" not in env["admin"].describe_topics()
    assert env["admin"].describe_acls(resource_name="*", principal="User:*") == []
    status = ray.get(handle.status.remote())
    assert status["auth_failures"]["unknown commit_offsets SASL_AUTHENTICATION_FAILED"] >= 2
    assert status["auth_failures"]["User:admin commit_offsets SASL_AUTHENTICATION_FAILED"] == 2  # direct + batch


def test_revoked_principal_is_refused_everywhere_within_a_second(env):
    cred = principal(env, "shortlived", [("GROUP", "revoked-", "READ", "PREFIXED"), ("TOPIC", "orders", "READ")])
    groups = [g for g in (f"revoked-{i}" for i in range(50))]
    by_partition = {partition_for(g, PARTITIONS): g for g in groups}
    assert len(by_partition) == PARTITIONS
    for g in by_partition.values():
        assert commit(env, g, {TP("orders", 0): OM(1)}, cred).errors == {TP("orders", 0): Errors.NONE}
    env["admin"].delete_principal("shortlived")

    def refused_everywhere():
        return all(commit(env, g, {TP("orders", 0): OM(2)}, cred).errors[TP("orders", 0)]
                   == Errors.SASL_AUTHENTICATION_FAILED for g in by_partition.values())

    wait_for(refused_everywhere, 1.0, "the revoked principal to be refused on every partition", interval_s=0.01)
    assert all(committed(env, g)[TP("orders", 0)].offset == 1 for g in by_partition.values())
    assert "User:shortlived" not in env["admin"].list_principals()


def test_partial_offset_commit_commits_the_allowed_topics(env):
    cred = principal(env, "partial", [("GROUP", "partial", "READ"), ("TOPIC", "orders", "READ")])
    r = commit(env, "partial", {TP("orders", 0): OM(5), TP("orders", 1): OM(6), TP("payroll", 0): OM(7)}, cred)
    assert r.errors == {TP("orders", 0): Errors.NONE, TP("orders", 1): Errors.NONE,
                        TP("payroll", 0): Errors.TOPIC_AUTHORIZATION_FAILED}
    assert {tp: om.offset for tp, om in committed(env, "partial").items()} == {TP("orders", 0): 5, TP("orders", 1): 6}
    fetch = ray.get(coordinator(env, "partial").fetch_offsets.remote(
        OffsetFetchRequest("partial", [TP("orders", 0), TP("payroll", 0)]), credentials=cred))
    assert fetch.offsets[TP("orders", 0)].offset == 5
    assert fetch.offsets[TP("payroll", 0)].error == Errors.TOPIC_AUTHORIZATION_FAILED


def test_patterns_deny_over_allow_and_wildcards(env):
    cred = principal(env, "patterns", [
        ("GROUP", "team-", "READ", "PREFIXED"),
        ("GROUP", "team-secret", "READ", "LITERAL", "DENY"),
        ("TOPIC", "*", "READ"),
    ])
    ok = {TP("orders", 0): OM(1)}
    assert commit(env, "team-a", ok, cred).errors[TP("orders", 0)] == Errors.NONE
    assert commit(env, "team-secret", ok, cred).errors[TP("orders", 0)] == Errors.GROUP_AUTHORIZATION_FAILED
    assert commit(env, "other-a", ok, cred).errors[TP("orders", 0)] == Errors.GROUP_AUTHORIZATION_FAILED
    assert commit(env, "team-b", {TP("payroll", 3): OM(1)}, cred).errors[TP("payroll", 3)] == Errors.NONE
    everyone = principal(env, "someone")
    env["admin"].create_acls([AclBinding("GROUP", "shared", "LITERAL", "User:*", "READ"),
                              AclBinding("TOPIC", "orders", "LITERAL", "User:*", "READ")])
    assert commit(env, "shared", ok, everyone).errors[TP("orders", 0)] == Errors.NONE
    # The admin's describe and delete of ACLs mirror kafka-acls.sh --list / --remove.
    listed = env["admin"].describe_acls(principal="User:patterns")
    assert len(listed) == 3 and {b.permission for b in listed} == {"ALLOW", "DENY"}
    assert env["admin"].delete_acls([b for b in listed if b.permission == "DENY"]) == 1
    assert commit(env, "team-secret", ok, cred).errors[TP("orders", 0)] == Errors.NONE


def test_classic_member_needs_its_acls_and_gets_typed_errors(env):
    cred = principal(env, "classic", [("GROUP", "classic-ok", "READ"), ("TOPIC", "orders", "DESCRIBE"),
                                      ("TOPIC", "orders", "READ")])
    with GroupMember(env["svc"], "classic-ok", topics=["orders"], credentials=cred, session_timeout_ms=10_000,
                     heartbeat_interval_ms=500) as m:
        assert wait_for(lambda: m.poll(200), 30, "an assignment") == {TP("orders", p) for p in range(4)}
        m.commit({TP("orders", 2): OM(9)})
    assert committed(env, "classic-ok")[TP("orders", 2)].offset == 9
    with GroupMember(env["svc"], "classic-denied", topics=["orders"], credentials=cred) as m:
        with pytest.raises(GroupAuthorizationFailedError):
            m.poll(200)
    with GroupMember(env["svc"], "classic-ok", topics=["orders"], credentials=Credentials("User:classic", "bad")) as m:
        with pytest.raises(SaslAuthenticationFailedError) as e:
            m.poll(200)
        assert "bad" not in str(e.value)  # never the secret


def test_consumer_protocol_member_needs_read_on_group_and_describe_on_topics(env):
    cred = principal(env, "modern", [("GROUP", "modern", "READ"), ("TOPIC", "orders", "READ")])
    with GroupMember(env["svc"], "modern", topics=["orders"], credentials=cred, group_protocol="consumer") as m:
        assert wait_for(lambda: m.poll(200), 30, "an assignment") == {TP("orders", p) for p in range(4)}
    with GroupMember(env["svc"], "modern", topics=["payroll"], credentials=cred, group_protocol="consumer") as m:
        with pytest.raises(TopicAuthorizationFailedError):
            wait_for(lambda: m.poll(200), 30, "a refusal")


def test_admin_operations_follow_kafkas_table(env):
    cred = principal(env, "viewer", [("GROUP", "viewable", "DESCRIBE")])
    admin_viewer = AdminClient(env["svc"], credentials=cred)
    for g in ("viewable", "hidden"):
        commit(env, g, {TP("orders", 0): OM(1)}, ADMIN)
    visible = {g.group_id for g in admin_viewer.list_groups()}
    assert "viewable" in visible and "hidden" not in visible  # ("shared" too: User:* may READ it, so DESCRIBE)
    assert {"viewable", "hidden"} <= {g.group_id for g in env["admin"].list_groups()}
    with pytest.raises(GroupAuthorizationFailedError):
        admin_viewer.describe_groups(["hidden"])
    # One partition answers for both: it describes the allowed group (as rows) and the guard adds the denied one.
    hidden = next(f"hidden-{i}" for i in range(1000) if partition_for(f"hidden-{i}", PARTITIONS) ==
                  partition_for("viewable", PARTITIONS))
    commit(env, hidden, {TP("orders", 0): OM(1)}, ADMIN)
    described = ray.get(env["svc"].router.describe_groups.remote(DescribeGroupsRequest(["viewable", hidden]),
                                                                 credentials=cred))
    assert [(g.group_id, g.error, g.group_state) for g in described.groups] == [
        ("viewable", Errors.NONE, "Empty"), (hidden, Errors.GROUP_AUTHORIZATION_FAILED, "")]
    with pytest.raises(GroupAuthorizationFailedError):
        admin_viewer.delete_groups(["viewable"])  # DESCRIBE is not DELETE
    with pytest.raises(ClusterAuthorizationFailedError):
        admin_viewer.create_acls([AclBinding("GROUP", "*", "LITERAL", "User:viewer", "ALL")])
    with pytest.raises(ClusterAuthorizationFailedError):
        admin_viewer.create_principal("another")
    with pytest.raises(TopicAuthorizationFailedError):
        admin_viewer.create_topic("new-topic", 1)
    creator = principal(env, "creator", [("TOPIC", "tenant-", "CREATE", "PREFIXED"), ("TOPIC", "tenant-", "ALTER",
                                                                                     "PREFIXED")])
    AdminClient(env["svc"], credentials=creator).create_topic("tenant-events", 2)
    AdminClient(env["svc"], credentials=creator).report_end_offsets("tenant-events", {0: 10})
    with pytest.raises(TopicAuthorizationFailedError):
        AdminClient(env["svc"], credentials=creator).report_end_offsets("orders", {0: 10})
    assert env["admin"].describe_topics(["tenant-events"])["tenant-events"]["end_offsets"] == {0: 10}
    deleter = principal(env, "deleter", [("GROUP", "viewable", "DELETE")])
    r = ray.get(env["svc"].router.delete_groups.remote(DeleteGroupsRequest(["viewable", "hidden"]),
                                                       credentials=deleter))
    assert r.results == {"viewable": Errors.NONE, "hidden": Errors.GROUP_AUTHORIZATION_FAILED}
    listed = ray.get(env["svc"].router.list_groups.remote(ListGroupsRequest(), credentials=cred))
    assert listed.error == Errors.NONE and "viewable" not in {g.group_id for g in listed.groups}  # deleted


def test_request_quota_throttles_and_the_client_waits(env):
    cred = principal(env, "noisy", [("GROUP", "noisy", "READ"), ("TOPIC", "orders", "READ")])
    env["admin"].alter_client_quota("User:noisy", 5.0)
    assert env["admin"].describe_client_quotas()["User:noisy"] == 5.0
    handle = coordinator(env, "noisy")
    throttles = [ray.get(handle.commit_offsets.remote(OffsetCommitRequest("noisy", {TP("orders", 0): OM(i)}),
                                                      credentials=cred)).throttle_time_ms for i in range(12)]
    assert throttles[0] == 0 and throttles[-1] > 0
    # Another tenant of the same partition is not slowed by the noisy one's quota. Only the partition's own lag may
    # ask it to back off, on a machine so loaded that the actor ran 100 ms behind; its status then says so (for 5 s).
    group = next(g for g in (f"quiet-{i}" for i in range(100))
                 if partition_for(g, PARTITIONS) == partition_for("noisy", PARTITIONS))
    quiet = principal(env, "quiet", [("GROUP", group, "READ"), ("TOPIC", "orders", "READ")])
    quiet_throttle = commit(env, group, {TP("orders", 0): OM(1)}, quiet).throttle_time_ms
    if quiet_throttle:
        lag_ms = ray.get(coordinator(env, group).status.remote())["lag_ms"]
        assert lag_ms >= THROTTLE_AFTER_MS, f"throttled {quiet_throttle} ms with the partition {lag_ms} ms behind"
    client = CoordinatorClient(env["svc"], "noisy", credentials=cred)
    for i in range(3):
        client.call("commit_offsets", OffsetCommitRequest("noisy", {TP("orders", 0): OM(100 + i)}))
    assert client.coalescer().throttled_ms > 0  # the client library waited what the service asked
    env["admin"].alter_client_quota("User:noisy", None)


def test_secrets_never_reach_logs_files_or_reprs(env):
    cred = env["admin"].create_principal("quiet-secret")
    assert cred.secret not in repr(cred) and cred.secret not in str(cred)
    commit(env, "nowhere", {TP("orders", 0): OM(1)}, Credentials(cred.principal, cred.secret + "-wrong"))
    text = open(os.path.join(env["path"], SECURITY_FILE)).read()
    stored = json.loads(text)["principals"]["User:quiet-secret"]
    assert set(stored) == {"salt", "digest", "iterations"} and cred.secret not in text
    assert ADMIN.secret not in text
    logs_dir = ray._private.worker._global_node.get_logs_dir_path()
    for path in glob.glob(os.path.join(logs_dir, "*")):
        if os.path.isfile(path):
            with open(path, "rb") as f:
                data = f.read()
            assert cred.secret.encode() not in data and ADMIN.secret.encode() not in data, path


def test_acls_and_principals_survive_a_restart_of_every_partition_and_of_the_service(env):
    cred = principal(env, "durable", [("GROUP", "durable", "READ"), ("TOPIC", "orders", "READ")])
    gone = principal(env, "gone", [("GROUP", "durable", "READ"), ("TOPIC", "orders", "READ")])
    env["admin"].delete_principal("gone")
    for handle in env["svc"].partitions:
        old = ray.get(handle.status.remote())["pid"]
        ray.kill(handle, no_restart=False)
        wait_for(lambda h=handle, o=old: (lambda s: s["pid"] != o and s["loaded"])(ray.get(h.status.remote())), 60,
                 "a partition to restart")
    ok = {TP("orders", 0): OM(3)}
    assert wait_for(lambda: commit(env, "durable", ok, cred).errors[TP("orders", 0)] == Errors.NONE, 30,
                    "the restarted partition to take the security state")
    assert commit(env, "durable", ok, gone).errors[TP("orders", 0)] == Errors.SASL_AUTHENTICATION_FAILED
    assert commit(env, "durable", {TP("payroll", 0): OM(3)}, cred).errors[TP("payroll", 0)] == (
        Errors.TOPIC_AUTHORIZATION_FAILED)
    # The whole service, router included, stopped and started again from its storage root (no admin secret given).
    stop(NAMESPACE)
    svc = start(num_partitions=PARTITIONS, storage_path=env["path"], namespace=NAMESPACE, config=env["config"],
                authorization=True, super_users=["User:admin"])
    env["svc"], env["admin"] = svc, AdminClient(svc, credentials=ADMIN)
    assert "User:durable" in env["admin"].list_principals() and "User:gone" not in env["admin"].list_principals()
    assert wait_for(lambda: commit(env, "durable", ok, cred).errors[TP("orders", 0)] == Errors.NONE, 30,
                    "the restarted service to serve the durable principal")
    assert commit(env, "durable", ok, gone).errors[TP("orders", 0)] == Errors.SASL_AUTHENTICATION_FAILED


_OUTSIDER = """
import sys, ray
from groupcoord.actors import connect
from groupcoord.protocol import TopicPartition, OffsetAndMetadata
from groupcoord.protocol.messages import OffsetCommitRequest
try:
    ray.init(address=sys.argv[1], namespace=sys.argv[2], log_to_driver=False)
except Exception as e:
    print("REFUSED", type(e).__name__)
    sys.exit(0)
svc = connect(sys.argv[2])
tp = TopicPartition("orders", 0)
r = ray.get(svc.partition(0).commit_offsets.remote(OffsetCommitRequest("x", {tp: OffsetAndMetadata(1)})))
print("ANSWERED", r.errors[tp].name)
ray.shutdown()
"""


def _outsider(address: str, env_changes: dict) -> str:
    import subprocess
    import sys

    env = {**os.environ, **env_changes}
    done = subprocess.run([sys.executable, "-c", _OUTSIDER, address, NAMESPACE], env=env, capture_output=True,
                          text=True, timeout=180)
    return done.stdout.strip().splitlines()[-1] if done.stdout.strip() else done.stderr[-500:]


def test_ray_token_authentication_guards_the_transport_and_groupcoord_the_rest(env):
    from ray._private.authentication.authentication_utils import is_token_auth_enabled

    assert is_token_auth_enabled()  # Ray >= 2.59 turns it on for local clusters; the suite runs on one
    address = ray._private.worker.global_worker.node.gcs_address
    # Without Ray's token a process cannot even join the cluster (its ray.init gives up after 2 tries of the
    # GCS, not Ray's default 20 one second apart: the answer is the same UNAUTHENTICATED each time)...
    refused = {"RAY_AUTH_MODE": "token", "RAY_AUTH_TOKEN": "not-the-token", "RAY_NUM_REDIS_GET_RETRIES": "2"}
    assert _outsider(address, refused).startswith("REFUSED")
    # ...with it, it reaches the actors, and groupcoord still refuses it without its own credentials.
    assert _outsider(address, {"RAY_AUTH_MODE": "token"}) == "ANSWERED SASL_AUTHENTICATION_FAILED"
