"""The groupcoord command against a running service: every command, reset dry-run vs execute, errors."""

from __future__ import annotations

import pytest
from click.testing import CliRunner

from groupcoord.actors import stop
from groupcoord.actors.client.admin import AdminClient
from groupcoord.actors.service import connect
from groupcoord.actors.tools.cli import main
from groupcoord.protocol import OffsetAndMetadata, TopicPartition

NAMESPACE = "gc-test-cli"


def run(*args: str, ok: bool = True):
    result = CliRunner().invoke(main, ["--namespace", NAMESPACE, *args], catch_exceptions=False)
    if ok:
        assert result.exit_code == 0, result.output
    return result


@pytest.fixture(scope="module")
def svc(ray_local, tmp_path_factory):
    storage = tmp_path_factory.mktemp("cli")
    run("start", "--partitions", "3", "--storage", str(storage), "--fsync", "never")
    service = connect(NAMESPACE)
    yield service
    stop(NAMESPACE)


def test_start_status_and_topics(svc):
    status = run("status").output
    assert "PARTITION" in status and status.count("yes") == 3
    assert "created topic 'orders' with 4 partitions" in run("topics", "create", "orders", "--partitions", "4").output
    run("topics", "end-offsets", "orders", "0=100", "1=200", "2=300", "3=400")
    listed = run("topics", "list").output
    assert "orders" in listed and " 4 " in listed


def test_status_shows_groups_by_state_offsets_and_commit_rate(svc):
    admin = AdminClient(svc)
    admin.alter_group_offsets("watched", {TopicPartition("orders", p): OffsetAndMetadata(5) for p in range(3)})
    once = run("status").output
    header = next(line for line in once.splitlines() if line.startswith("PARTITION"))
    assert header.split()[4:10] == ["GROUPS", "EMPTY", "PREPARING", "COMPLETING", "STABLE", "DEAD"]
    assert "3/3 partitions loaded" in once and "Empty" in once
    p, _ = svc.find_coordinator("watched")
    row = next(line.split() for line in once.splitlines() if line.split()[:1] == [str(p)])
    assert int(row[column(header, "OFFSETS")]) >= 3 and int(row[column(header, "EMPTY")]) >= 1
    watched = run("status", "--watch", "--interval", "0.1", "--count", "2").output
    assert "PARTITION" in watched and "commits/s" in watched


def column(header: str, name: str) -> int:
    return header.split().index(name)


def test_describe_partitions_without_replication_shows_one_replica_each(svc):
    out = run("describe-partitions").output
    assert "PARTITION" in out and "ISR" in out
    described = svc.describe_partitions()
    assert [d.partition for d in described] == [0, 1, 2]
    assert all(d.replicas == d.in_sync == [d.leader] and d.leader_epoch == 0 for d in described)
    assert described[0].leader[:12] in out


def test_groups_list_describe_and_delete(svc):
    admin = AdminClient(svc)
    admin.alter_group_offsets("reporting", {TopicPartition("orders", 0): OffsetAndMetadata(60)})
    listed = run("groups", "list").output
    assert "reporting" in listed and "Empty" in listed
    assert "reporting" in run("groups", "list", "--state", "empty").output
    assert "reporting" not in run("groups", "list", "--state", "Stable").output
    offsets = run("groups", "describe", "reporting").output.splitlines()
    header = offsets[0].split()
    assert header == ["GROUP", "TOPIC", "PARTITION", "CURRENT-OFFSET", "LOG-END-OFFSET", "LAG", "CONSUMER-ID",
                      "HOST", "CLIENT-ID"]
    assert offsets[1].split() == ["reporting", "orders", "0", "60", "100", "40", "-", "-", "-"]
    state = run("groups", "describe", "reporting", "--state").output
    assert "Empty" in state and "#MEMBERS" in state
    assert "GROUP-INSTANCE-ID" in run("groups", "describe", "reporting", "--members").output
    run("groups", "delete", "reporting")
    assert "reporting" not in run("groups", "list").output


def test_groups_list_pages_by_group_id_and_filters_by_type(svc):
    admin = AdminClient(svc)
    for i in range(5):
        admin.alter_group_offsets(f"paged-{i}", {TopicPartition("orders", 0): OffsetAndMetadata(i)})
    first = run("groups", "list", "--type", "classic", "--page-size", "2").output
    listed = sorted(line.split()[0] for line in first.splitlines()[1:] if line.startswith(("paged-", "reporting")))
    assert len(listed) == 2 and "page 1 of" in first and "--page 2 for more" in first
    pages = int(first.split("page 1 of ")[1].split()[0])
    seen = []
    for page in range(1, pages + 1):
        out = run("groups", "list", "--type", "classic", "--page-size", "2", "--page", str(page)).output
        seen += [line.split()[0] for line in out.splitlines()[1:] if line.startswith("paged-")]
    assert seen == [f"paged-{i}" for i in range(5)]  # every group once, in group-id order
    assert "paged-0" not in run("groups", "list", "--type", "consumer").output


def test_groups_list_sends_the_filters_counts_every_match_and_refuses_a_page_past_the_last(svc):
    admin = AdminClient(svc)
    for i in range(3):
        admin.alter_group_offsets(f"counted-{i}", {TopicPartition("orders", 0): OffsetAndMetadata(i)})
    listed = run("groups", "list", "--state", "empty,STABLE", "--type", "Classic", "--all")
    out = listed.output.splitlines()
    assert listed.stdout.splitlines() == out[:-1]  # stdout holds the table alone: the count goes to stderr
    matching = sorted(g.group_id for g in admin.list_groups(states=["Empty", "Stable"], types=["classic"]))
    assert out[0].split() == ["GROUP", "STATE", "TYPE", "PROTOCOL-TYPE"]
    assert [line.split()[0] for line in out[1:-1]] == matching and {"counted-0", "counted-2"} <= set(matching)
    assert out[-1] == f"{len(matching)} groups in state Empty or Stable of type classic: showing 1-{len(matching)}"
    assert run("groups", "list", "--state", "Reconciling").output.splitlines() == ["0 groups in state Reconciling"]
    every = len(admin.list_groups())
    last = run("groups", "list", "--page-size", "2", "--page", str(-(-every // 2))).output.splitlines()[-1]
    assert last.startswith(f"{every} groups: showing ") and "for more" not in last
    past = run("groups", "list", "--page-size", "2", "--page", str(-(-every // 2) + 1), ok=False)
    assert past.exit_code == 2 and "past the last page" in past.output


def test_offsets_reset_dry_run_changes_nothing_and_execute_applies(svc, tmp_path):
    admin = AdminClient(svc)
    admin.alter_group_offsets("resettable", {TopicPartition("orders", p): OffsetAndMetadata(10) for p in range(4)})
    export = tmp_path / "plan.csv"
    dry = run("offsets", "reset", "resettable", "--topic", "orders:0,1", "--to-latest", "--export", str(export))
    assert "dry run" in dry.output
    assert export.read_text() == "orders,0,100\norders,1,200\n"
    assert admin.list_group_offsets("resettable")[TopicPartition("orders", 0)].offset == 10
    run("offsets", "reset", "resettable", "--topic", "orders", "--shift-by", "5", "--execute")
    assert {tp.partition: om.offset for tp, om in admin.list_group_offsets("resettable").items()} == {
        0: 15, 1: 15, 2: 15, 3: 15
    }
    run("offsets", "delete", "resettable", "--topic", "orders:3")
    assert TopicPartition("orders", 3) not in admin.list_group_offsets("resettable")


def test_reset_is_refused_on_a_group_with_members(svc):
    from groupcoord.actors.client.member import GroupMember

    AdminClient(svc).create_topic("busy", 1)
    member = GroupMember(svc, "busy-group", topics=["busy"], session_timeout_ms=10000, heartbeat_interval_ms=500)
    try:
        while not member.poll(100):  # poll returns by its deadline; the member owns the partition once joined
            pass
        result = run("offsets", "reset", "busy-group", "--topic", "busy", "--to-earliest", "--execute", ok=False)
        assert result.exit_code == 1
        assert "must be Empty" in result.output and "Traceback" not in result.output
    finally:
        member.close()


@pytest.mark.parametrize(
    "args, message",
    [
        (["groups", "describe", "no-such-group"], "does not exist"),
        (["offsets", "reset", "g", "--topic", "orders", "--to-earliest", "--to-latest"], "exactly one of"),
        (["offsets", "reset", "g", "--topic", "nope", "--to-earliest"], "unknown topic"),
        (["offsets", "reset", "g", "--topic", "orders:x", "--to-earliest"], "must be integers"),
        (["offsets", "reset", "g", "--topic", "orders", "--by-duration", "15m"], "ISO-8601 duration"),
        (["topics", "end-offsets", "orders", "zero=1"], "PARTITION=OFFSET"),
        (["topics", "create", "orders", "--partitions", "2"], "TOPIC_ALREADY_EXISTS"),
        (["topics", "end-offsets", "orders", "9=1"], "INVALID_REQUEST"),
        (["groups", "delete", "no-such-group"], "GROUP_ID_NOT_FOUND"),
    ],
)
def test_bad_input_is_one_line_and_exit_1(svc, args, message):
    result = run(*args, ok=False)
    assert result.exit_code != 0
    assert message in result.output, result.output
    assert "Traceback" not in result.output and len(result.output.strip().splitlines()) == 1


def test_no_service_running_is_a_clear_error(ray_local):
    result = CliRunner().invoke(main, ["--namespace", "gc-nothing-here", "status"])
    assert result.exit_code == 1
    assert "no groupcoord service runs in namespace 'gc-nothing-here'" in result.output


def test_demo_short_mode_runs_to_its_summary(ray_local, tmp_path):
    result = CliRunner().invoke(main, ["demo", "--short", "--storage", str(tmp_path)], catch_exceptions=False)
    assert result.exit_code == 0, result.output
    assert "result: OK" in result.output
    assert "verified: 6 of 6" in result.output
