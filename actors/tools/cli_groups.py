"""`groupcoord groups`, `groupcoord offsets` and `groupcoord topics`: kafka-consumer-groups.sh on Ray."""

from __future__ import annotations

import time
from collections import defaultdict
from pathlib import Path

import click

from groupcoord.protocol import TopicPartition

from ..client import AdminClient
from .cli_group_list import list_groups
from .cli_support import CliError, FriendlyGroup, connect_service, print_table
from .offset_reset import RESET_KINDS, ResetSpec, export_csv, parse_topic_arg, plan_reset


def _admin(ctx: click.Context) -> AdminClient:
    service = connect_service(ctx.obj["address"], ctx.obj["namespace"])
    return AdminClient(service, credentials=ctx.obj.get("credentials"))


def _member_partitions(member) -> list[TopicPartition]:
    from groupcoord.protocol.assignors.consumer_protocol import decode_assignment

    if not member.member_assignment:
        return []
    try:
        return sorted(decode_assignment(member.member_assignment).partitions)
    except Exception:
        return []


# --- groups ------------------------------------------------------------------------------------------


@click.group(cls=FriendlyGroup)
def groups() -> None:
    """List, describe and delete consumer groups."""


groups.add_command(list_groups)


@groups.command("describe")
@click.argument("group")
@click.option("--members", "view", flag_value="members", help="Show the members.")
@click.option("--offsets", "view", flag_value="offsets", default=True, help="Show offsets and lag (default).")
@click.option("--state", "view", flag_value="state", help="Show the group's state.")
@click.option("--verbose", is_flag=True, help="With --members: the partitions of each member.")
@click.pass_context
def describe_group(ctx, group: str, view: str, verbose: bool) -> None:
    """Describe a group the way kafka-consumer-groups.sh --describe does."""
    admin = _admin(ctx)
    described = admin.describe_groups([group])[group]
    if described.group_state == "Dead":
        raise CliError(f"consumer group {group!r} does not exist")
    if view == "state":
        partition, _ = admin.service.find_coordinator(group)
        print_table(
            None,
            ["GROUP", "COORDINATOR (PARTITION)", "ASSIGNMENT-STRATEGY", "STATE", "#MEMBERS"],
            [[group, partition, described.protocol_data, described.group_state, len(described.members)]],
        )
        return
    if view == "members":
        rows = []
        for m in described.members:
            parts = _member_partitions(m)
            row = [group, m.member_id, m.group_instance_id, m.client_host, m.client_id, len(parts)]
            if verbose:
                row.append(", ".join(f"{tp.topic}({tp.partition})" for tp in parts))
            rows.append(row)
        columns = ["GROUP", "CONSUMER-ID", "GROUP-INSTANCE-ID", "HOST", "CLIENT-ID", "#PARTITIONS"]
        print_table(None, columns + (["ASSIGNMENT"] if verbose else []), rows)
        return
    print_offsets_table(admin, described)


OFFSETS_COLUMNS = [
    "GROUP",
    "TOPIC",
    "PARTITION",
    "CURRENT-OFFSET",
    "LOG-END-OFFSET",
    "LAG",
    "CONSUMER-ID",
    "HOST",
    "CLIENT-ID",
]


def print_offsets_table(admin: AdminClient, described, width: int | None = None) -> None:
    """kafka-consumer-groups.sh --describe --offsets: committed offset, end, lag and owner per partition (without
    CLIENT-ID, then HOST, where they would make it wider than `width`)."""
    group = described.group_id
    committed = admin.list_group_offsets(group)
    owners = {tp: m for m in described.members for tp in _member_partitions(m)}
    topics = admin.describe_topics(sorted({tp.topic for tp in set(committed) | set(owners)}))
    rows = []
    for tp in sorted(set(committed) | set(owners)):
        end = topics.get(tp.topic, {}).get("end_offsets", {}).get(tp.partition)
        current = committed[tp].offset if tp in committed else None
        lag = end - current if end is not None and current is not None else None
        m = owners.get(tp)
        owner = [m.member_id, m.client_host, m.client_id] if m else [None, None, None]
        rows.append([group, tp.topic, tp.partition, current, end, lag, *owner])
    print_table(None, OFFSETS_COLUMNS, rows, width=width, optional=("CLIENT-ID", "HOST"))


@groups.command("delete")
@click.argument("group_ids", nargs=-1, required=True)
@click.pass_context
def delete_groups(ctx, group_ids: tuple[str, ...]) -> None:
    """Delete Empty groups and their offsets."""
    _admin(ctx).delete_groups(group_ids)
    for g in group_ids:
        click.echo(f"deleted group {g!r}")


# --- offsets ---------------------------------------------------------------------------------------------


@click.group(cls=FriendlyGroup)
def offsets() -> None:
    """Reset or delete a group's committed offsets."""


def _reset_spec(options: dict) -> ResetSpec:
    chosen = [(k, v) for k, v in options.items() if v not in (None, False)]
    if len(chosen) != 1:
        raise CliError(f"give exactly one of --{', --'.join(RESET_KINDS)}")
    kind, value = chosen[0]
    return ResetSpec(kind.replace("_", "-"), None if value is True else value)


@offsets.command("reset")
@click.argument("group")
@click.option("--topic", "topic_args", multiple=True, required=True, help="TOPIC or TOPIC:0,1,2 (repeatable).")
@click.option("--to-earliest", is_flag=True)
@click.option("--to-latest", is_flag=True)
@click.option("--to-offset", type=int)
@click.option("--shift-by", type=int)
@click.option("--to-datetime", help="ISO-8601, e.g. 2026-01-31T12:00:00 (UTC unless a zone is given).")
@click.option("--by-duration", help="ISO-8601 duration back from now, e.g. PT15M or P1DT2H.")
@click.option("--dry-run/--execute", default=True, show_default=True, help="Only show the plan, or apply it.")
@click.option("--export", "export_path", type=click.Path(dir_okay=False), help="Write the plan as CSV.")
@click.pass_context
def reset_offsets(
    ctx,
    group,
    topic_args,
    to_earliest,
    to_latest,
    to_offset,
    shift_by,
    to_datetime,
    by_duration,
    dry_run,
    export_path,
) -> None:
    """Reset a group's offsets (the group must be Empty, as in Kafka)."""
    from groupcoord.storage.topics import read_end_offset_history

    spec = _reset_spec(
        {
            "to_earliest": to_earliest,
            "to_latest": to_latest,
            "to_offset": to_offset,
            "shift_by": shift_by,
            "to_datetime": to_datetime,
            "by_duration": by_duration,
        }
    )
    admin = _admin(ctx)
    state = admin.describe_groups([group])[group].group_state
    if state not in ("Empty", "Dead"):
        raise CliError(f"group {group!r} is {state}: stop its members before resetting offsets (it must be Empty)")
    topics = admin.describe_topics()
    partitions = []
    for arg in topic_args:
        topic, parts = parse_topic_arg(arg)
        if topic not in topics:
            raise CliError(f"unknown topic {topic!r}; create it with `groupcoord topics create`")
        count = topics[topic]["partitions"]
        for p in parts if parts is not None else range(count):
            if p >= count:
                raise CliError(f"topic {topic!r} has {count} partitions; there is no partition {p}")
            partitions.append(TopicPartition(topic, p))
    current = {tp: om.offset for tp, om in admin.list_group_offsets(group, partitions).items()}
    ends = {tp: topics[tp.topic]["end_offsets"].get(tp.partition) for tp in partitions}
    ends = {tp: e for tp, e in ends.items() if e is not None}
    history: dict[TopicPartition, list[tuple[int, int]]] = defaultdict(list)
    for s in read_end_offset_history(admin.service.storage_path):
        history[TopicPartition(s["topic"], s["partition"])].append((s["timestamp"], s["offset"]))
    plan = plan_reset(spec, partitions, current, ends, history, now_ms=int(time.time() * 1000))
    print_table(
        None,
        ["GROUP", "TOPIC", "PARTITION", "CURRENT-OFFSET", "NEW-OFFSET"],
        [[group, tp.topic, tp.partition, current.get(tp), plan[tp]] for tp in sorted(plan)],
    )
    if export_path:
        Path(export_path).write_text(export_csv(plan))
    if dry_run:
        click.echo("dry run: nothing changed (add --execute to apply)")
        return
    admin.alter_group_offsets(group, plan)
    click.echo(f"reset {len(plan)} offsets of group {group!r}")


@offsets.command("delete")
@click.argument("group")
@click.option("--topic", "topic_args", multiple=True, required=True, help="TOPIC or TOPIC:0,1,2 (repeatable).")
@click.pass_context
def delete_offsets(ctx, group: str, topic_args: tuple[str, ...]) -> None:
    """Delete a group's committed offsets for some topics or partitions."""
    admin = _admin(ctx)
    committed = admin.list_group_offsets(group)
    partitions = []
    for arg in topic_args:
        topic, parts = parse_topic_arg(arg)
        partitions += [tp for tp in committed if tp.topic == topic and (parts is None or tp.partition in parts)]
    if not partitions:
        raise CliError(f"group {group!r} has no committed offsets for {', '.join(topic_args)}")
    admin.delete_group_offsets(group, partitions)
    click.echo(f"deleted {len(partitions)} offsets of group {group!r}")


# --- topics ----------------------------------------------------------------------------------------------


@click.group(cls=FriendlyGroup)
def topics() -> None:
    """Register topics and report their log-end offsets (for assignment and lag)."""


@topics.command("create")
@click.argument("topic")
@click.option("--partitions", type=click.IntRange(min=1), required=True)
@click.pass_context
def create_topic(ctx, topic: str, partitions: int) -> None:
    """Register a topic with its partition count."""
    _admin(ctx).create_topic(topic, partitions)
    click.echo(f"created topic {topic!r} with {partitions} partitions")


@topics.command("list")
@click.pass_context
def list_topics(ctx) -> None:
    """List registered topics."""
    described = _admin(ctx).describe_topics()
    print_table(
        None,
        ["TOPIC", "PARTITIONS", "REPORTED-END-OFFSETS"],
        [[t, d["partitions"], len(d["end_offsets"])] for t, d in sorted(described.items())],
    )


@topics.command("end-offsets")
@click.argument("topic")
@click.argument("assignments", nargs=-1, required=True, metavar="PARTITION=OFFSET...")
@click.pass_context
def end_offsets(ctx, topic: str, assignments: tuple[str, ...]) -> None:
    """Report log-end offsets, e.g. `groupcoord topics end-offsets orders 0=1200 1=980`."""
    offsets = {}
    for a in assignments:
        p, sep, o = a.partition("=")
        if not sep or not p.strip().isdigit() or not o.strip().lstrip("-").isdigit():
            raise CliError(f"expected PARTITION=OFFSET, e.g. 0=1200; got {a!r}")
        offsets[int(p)] = int(o)
    _admin(ctx).report_end_offsets(topic, offsets)
    click.echo(f"recorded {len(offsets)} end offsets of {topic!r}")
