"""`groupcoord describe-partitions`: every offsets partition's leader, epoch, replicas, in-sync set and lags."""

from __future__ import annotations

import click

from ..client import PartitionReplicas
from .cli_support import connect_service, print_table

NODE_CHARS = 12  # node ids are shown shortened, as `groupcoord status` does


def _nodes(ids: list[str]) -> str:
    return ",".join(i[:NODE_CHARS] for i in ids)


def partition_rows(described: list[PartitionReplicas]) -> list[list]:
    """One table row per partition: PARTITION, LEADER, EPOCH, REPLICAS, ISR, LAG (follower=records)."""
    return [
        [
            d.partition,
            (d.leader or "none")[:NODE_CHARS],
            d.leader_epoch,
            _nodes(d.replicas),
            _nodes(d.in_sync),
            " ".join(f"{n[:NODE_CHARS]}={'?' if lag is None else lag}" for n, lag in d.lags.items()),
        ]
        for d in described
    ]


@click.command("describe-partitions")
@click.pass_context
def describe_partitions(ctx) -> None:
    """Each offsets partition's leader, leader epoch, replicas, in-sync replicas and follower lags."""
    svc = connect_service(ctx.obj["address"], ctx.obj["namespace"])
    columns = ["PARTITION", "LEADER", "EPOCH", "REPLICAS", "ISR", "LAG"]
    print_table(None, columns, partition_rows(svc.describe_partitions()))
