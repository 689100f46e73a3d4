"""Kafka 4.4's kafka-consumer-groups tool (its own jars, unchanged) on groupcoord's groups, against
`groupcoord groups`."""

from __future__ import annotations

import subprocess
from concurrent.futures import ThreadPoolExecutor

import kafka
import pytest
from click.testing import CliRunner
from kafka_consumers import PythonConsumer
from kafka_wire_names import NAMESPACE, TOPIC
from waiting import wait_for

from benchmarks.kafka.dist import classpath
from groupcoord.actors import AdminClient
from groupcoord.actors.tools.cli import main

GROUP = "tool-group"
TOOL = "org.apache.kafka.tools.consumer.group.ConsumerGroupCommand"
# A short-lived JVM: no optimising compiler, one GC thread (each command is its own process, as in a shell).
JVM_OPTIONS = ["-XX:TieredStopAtLevel=1", "-XX:+UseSerialGC", "-Xshare:auto", "-Xmx256m"]


@pytest.fixture(scope="module")
def tool(kafka_bootstrap):
    """Runs kafka-consumer-groups with the given arguments against the listener; its stdout."""
    cp = classpath()

    def run(*args: str) -> str:
        done = subprocess.run(["java", *JVM_OPTIONS, "-cp", cp, TOOL, "--bootstrap-server", kafka_bootstrap, *args],
                              capture_output=True, text=True, timeout=180)
        assert done.returncode == 0, f"kafka-consumer-groups {' '.join(args)}: {done.stdout}{done.stderr[-2000:]}"
        return done.stdout

    return run


def groupcoord(*args: str) -> str:
    result = CliRunner().invoke(main, ["--namespace", NAMESPACE, *args], env={"COLUMNS": "400"},
                                catch_exceptions=False)
    assert result.exit_code == 0, result.output
    return result.stdout  # the tables; `groups list` counts its groups on stderr


def table(text: str, first_column: str = "GROUP") -> list[dict[str, str]]:
    """The rows of a Kafka-style table (upper-case headers, whitespace-separated, "-" for unknown)."""
    lines = [line.split() for line in text.splitlines() if line.strip()]
    header_at = next(i for i, cells in enumerate(lines) if cells and cells[0] == first_column)
    header = lines[header_at]
    return [dict(zip(header, cells, strict=False)) for cells in lines[header_at + 1:] if len(cells) == len(header)]


def project(rows: list[dict[str, str]], columns: list[str]) -> list[tuple[str, ...]]:
    return sorted(tuple(r[c] for c in columns) for r in rows)


def test_list_describe_reset_and_delete_agree_with_groupcoord(kafka_service, kafka_bootstrap, tool):
    # A long session: three JVMs starting at once load the machine, and a member expelled meanwhile would
    # rebalance between the tool's view and ours.
    member = PythonConsumer(kafka_bootstrap, GROUP, "tool-member", session_timeout_ms=60000)
    member.start()
    try:
        wait_for(lambda: len(member.owned) == 6, 60, "the consumer to own the topic")
        member.commit({kafka.TopicPartition(TOPIC, p): kafka.OffsetAndMetadata(20 + p, "", -1) for p in range(6)})
        admin = AdminClient(kafka_service)
        wait_for(lambda: len(admin.list_group_offsets(GROUP)) == 6, 30, "the six commits")
        with ThreadPoolExecutor(3) as pool:  # three JVMs at once: each takes seconds to start
            listed, members, offsets = pool.map(lambda args: tool(*args), [
                ("--list",),
                ("--describe", "--group", GROUP, "--members"),
                ("--describe", "--group", GROUP, "--offsets"),
            ])
        assert GROUP in listed.split()
        assert set(listed.split()) == {r["GROUP"] for r in table(groupcoord("groups", "list"))}

        ours = table(groupcoord("groups", "describe", GROUP, "--members"))
        columns = ["GROUP", "CONSUMER-ID", "HOST", "CLIENT-ID", "#PARTITIONS"]
        assert project(table(members), columns) == project(ours, columns)
        assert project(ours, ["HOST", "CLIENT-ID", "#PARTITIONS"]) == [("/127.0.0.1", "tool-member", "6")]

        ours = table(groupcoord("groups", "describe", GROUP, "--offsets"))
        columns = ["GROUP", "TOPIC", "PARTITION", "CURRENT-OFFSET", "LOG-END-OFFSET", "LAG", "CONSUMER-ID", "HOST",
                   "CLIENT-ID"]
        assert project(table(offsets), columns) == project(ours, columns)
        assert sorted((int(r["PARTITION"]), int(r["CURRENT-OFFSET"]), int(r["LAG"])) for r in ours) == [
            (p, 20 + p, 80 - p) for p in range(6)
        ]
    finally:
        member.stop()  # offsets are reset and groups deleted only when Empty, as in Kafka

    reset = tool("--reset-offsets", "--group", GROUP, "--topic", TOPIC, "--to-earliest", "--execute")
    assert sorted((int(r["PARTITION"]), int(r["NEW-OFFSET"])) for r in table(reset)) == [(p, 0) for p in range(6)]
    assert {tp.partition: om.offset for tp, om in admin.list_group_offsets(GROUP).items()} == {p: 0 for p in range(6)}

    assert "was successful" in tool("--delete", "--group", GROUP)
    assert GROUP not in {g.group_id for g in admin.list_groups()}
    assert GROUP not in tool("--list").split()
