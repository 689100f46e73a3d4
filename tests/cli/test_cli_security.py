"""`groupcoord principals`, `acls` and `quotas` against a service started with --authorization."""

from __future__ import annotations

import pytest
from click.testing import CliRunner

from groupcoord.actors import AclBinding, AdminClient, Credentials, stop
from groupcoord.actors.service import connect
from groupcoord.actors.tools.cli import main

NAMESPACE = "gc-test-cli-security"
ADMIN = "User:admin:cli-operator-secret-123"


def run(*args: str, credentials: str | None = ADMIN, ok: bool = True):
    prefix = ["--namespace", NAMESPACE] + (["--credentials", credentials] if credentials else [])
    result = CliRunner().invoke(main, [*prefix, *args], catch_exceptions=False, env={"GROUPCOORD_CREDENTIALS": ""})
    if ok:
        assert result.exit_code == 0, result.output
    assert "cli-operator-secret-123" not in result.output
    return result


@pytest.fixture(scope="module")
def svc(ray_local, tmp_path_factory):
    storage = tmp_path_factory.mktemp("cli-security")
    run("start", "--partitions", "2", "--storage", str(storage), "--fsync", "never", "--authorization",
        "--super-user", "User:admin")
    yield connect(NAMESPACE)
    stop(NAMESPACE)


def test_principals_add_list_remove(svc):
    out = run("principals", "add", "billing").output
    line = next(x for x in out.splitlines() if x.startswith("GROUPCOORD_CREDENTIALS=User:billing:"))
    billing = Credentials.parse(line.split("=", 1)[1])
    assert "User:billing" in AdminClient(svc, credentials=Credentials.parse(ADMIN)).list_principals()
    assert "User:billing" in run("principals", "list").output
    listed_as_billing = run("principals", "list", credentials=f"{billing.principal}:{billing.secret}", ok=False)
    assert listed_as_billing.exit_code == 1 and "CLUSTER_AUTHORIZATION_FAILED" in listed_as_billing.output
    run("principals", "remove", "billing")
    assert "User:billing" not in run("principals", "list").output


def test_acls_add_list_remove_mirror_kafka_acls(svc):
    run("principals", "add", "team")
    added = run("acls", "add", "--allow-principal", "User:team", "--operation", "READ", "--operation", "DESCRIBE",
                "--group", "team-", "--resource-pattern-type", "prefixed").output
    assert "added 2 ACL(s)" in added
    run("acls", "add", "--deny-principal", "User:team", "--operation", "READ", "--topic", "secret")
    admin = AdminClient(svc, credentials=Credentials.parse(ADMIN))
    assert set(admin.describe_acls(principal="User:team")) == {
        AclBinding("GROUP", "team-", "PREFIXED", "User:team", "READ"),
        AclBinding("GROUP", "team-", "PREFIXED", "User:team", "DESCRIBE"),
        AclBinding("TOPIC", "secret", "LITERAL", "User:team", "READ", "DENY"),
    }
    listed = run("acls", "list", "--principal", "User:team").output
    assert "PREFIXED" in listed and "DENY" in listed and "team-" in listed
    removed = run("acls", "remove", "--allow-principal", "User:team", "--operation", "DESCRIBE", "--group", "team-",
                  "--resource-pattern-type", "prefixed").output
    assert "removed 1 ACL(s)" in removed
    assert len(admin.describe_acls(principal="User:team")) == 2
    assert run("acls", "add", "--operation", "READ", "--group", "g", ok=False).exit_code == 1  # no principal named


def test_quotas_and_requests_without_credentials(svc):
    run("quotas", "set", "User:*", "250")
    assert "250" in run("quotas", "list").output
    run("quotas", "remove", "User:*")
    refused = run("groups", "list", credentials=None, ok=False)
    assert refused.exit_code == 1 and "SASL_AUTHENTICATION_FAILED" in refused.output
    bad = run("groups", "list", credentials="User:admin:wrong-secret", ok=False)
    assert bad.exit_code == 1 and "wrong-secret" not in bad.output
    malformed = run("groups", "list", credentials="admin-without-a-type", ok=False)
    assert malformed.exit_code == 1 and "User:<name>:<secret>" in malformed.output
