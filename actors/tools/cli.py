"""The `groupcoord` command: run a service on Ray, inspect and manage its groups, offsets and topics."""

from __future__ import annotations

import os
import shutil
import subprocess
import sys

import click

from ..client import ServiceError
from ..service import DEFAULT_NAMESPACE, DEFAULT_STORAGE_PATH, FSYNC_POLICIES
from ..service.logs import LOG_FORMATS
from .cli_export import export, spark_conf_option, storage_root_option
from .cli_groups import groups, offsets, topics
from .cli_partitions import describe_partitions
from .cli_security import acls, parse_credentials, principals, quotas
from .cli_support import CliError, FriendlyGroup, connect_service, init_ray, print_table
from .quiet import configure_output, ensure_ray

namespace_option = click.option(
    "--namespace",
    default=DEFAULT_NAMESPACE,
    show_default=True,
    envvar="GROUPCOORD_NAMESPACE",
    help="Ray namespace of the service.",
)
address_option = click.option(
    "--address", default=None, envvar="RAY_ADDRESS", help="Ray cluster address (default: the running one)."
)


@click.group(cls=FriendlyGroup, context_settings={"help_option_names": ["-h", "--help"]})
@namespace_option
@address_option
@click.option("-v", "--verbose", is_flag=True, help="Show Ray's and Spark's own log lines too.")
@click.option("--credentials", "credentials", default=None, envvar="GROUPCOORD_CREDENTIALS", show_envvar=True,
              metavar="User:NAME:SECRET", help="Who you are, with a service that authorizes.")
@click.pass_context
def main(ctx: click.Context, namespace: str, address: str | None, verbose: bool, credentials: str | None) -> None:
    """A Kafka-style consumer-group coordinator on Ray."""
    configure_output(verbose)
    ctx.obj = {"namespace": namespace, "address": address, "verbose": verbose,
               "credentials": parse_credentials(credentials)}


def _start_local_ray() -> None:
    ray_bin = shutil.which("ray", path=os.path.dirname(sys.executable)) or shutil.which("ray")
    if ray_bin is None:
        raise CliError("the `ray` command is not installed in this environment")
    click.echo("no Ray cluster is running: starting a local one (`ray stop` ends it)")
    result = subprocess.run(
        [ray_bin, "start", "--head", "--disable-usage-stats", "--include-dashboard=false"],
        capture_output=True,
        text=True,
    )
    if result.returncode != 0:
        raise CliError(f"`ray start --head` failed: {result.stderr.strip().splitlines()[-1:]}")


@main.command()
@click.option(
    "--partitions",
    "num_partitions",
    type=click.IntRange(min=1),
    default=16,
    show_default=True,
    help="Number of offsets partitions (fixed once the storage is created).",
)
@click.option(
    "--storage",
    "storage_path",
    type=click.Path(file_okay=False),
    default=DEFAULT_STORAGE_PATH,
    show_default=True,
    help="Storage root; a shared file system path on a multi-node cluster.",
)
@click.option("--fsync", type=click.Choice(FSYNC_POLICIES), default="always", show_default=True)
@click.option("--metrics/--no-metrics", default=True, show_default=True,
              help="Export groupcoord_* metrics through Ray's metrics agents (Prometheus).")
@click.option("--log-format", type=click.Choice(LOG_FORMATS), default="text", show_default=True,
              help="The service's log lines: text, or one JSON object per line.")
@click.option("--replication-factor", type=click.IntRange(min=1), default=1, show_default=True,
              help="Replicas per offsets partition, on distinct nodes ({node_id} in --storage names each node's disk).")
@click.option("--min-insync-replicas", type=click.IntRange(min=1), default=1, show_default=True,
              help="Replicas that hold a write before it is acknowledged (at least a majority).")
@click.option("--authorization/--no-authorization", default=False, show_default=True,
              help="Require credentials and Kafka's ACLs for every request (--credentials become the admin's).")
@click.option("--super-user", "super_users", multiple=True, metavar="User:NAME", help="Bypasses ACLs (repeatable).")
@click.option("--kafka-listener", metavar="HOST:PORT", default=None,
              help="Also serve Kafka's protocol there, for Kafka's own clients and tools (port 0: any free port).")
@namespace_option
@address_option
@click.pass_context
def start(ctx, num_partitions: int, storage_path: str, fsync: str, metrics: bool, log_format: str,
          replication_factor: int, min_insync_replicas: int, authorization: bool, super_users: tuple[str, ...],
          kafka_listener: str | None, namespace: str, address: str | None) -> None:
    """Start the service on a Ray cluster (a local one is started if none runs)."""
    from .. import service

    namespace = namespace if namespace != DEFAULT_NAMESPACE else ctx.obj["namespace"]
    address = address or ctx.obj["address"]
    try:
        init_ray(address, namespace)
    except CliError:
        if address not in (None, "auto"):
            raise
        _start_local_ray()
        init_ray("auto", namespace)
    try:
        observability = service.Observability(metrics=metrics, log_format=log_format)
        svc = service.start(
            num_partitions, storage_path, namespace, fsync, observability=observability,
            replication_factor=replication_factor, min_insync_replicas=min_insync_replicas,
            authorization=authorization, super_users=super_users,
            admin_credentials=ctx.obj["credentials"] if authorization else None,
            kafka_listener=kafka_listener,
        )
    except ServiceError as e:
        raise CliError(str(e)) from None
    click.echo(
        f"groupcoord is running in namespace {svc.namespace!r}: {svc.num_partitions} partitions, "
        f"storage {svc.storage_path}, fsync {fsync}"
        + (f"; Kafka listener at {svc.kafka_bootstrap}" if svc.kafka_bootstrap else "")
    )


@main.command()
@click.pass_context
def stop(ctx) -> None:
    """Stop the service's actors (its data stays on disk)."""
    from .. import service

    init_ray(ctx.obj["address"], ctx.obj["namespace"])
    if not service.stop(ctx.obj["namespace"]):
        raise CliError(f"no groupcoord service runs in namespace {ctx.obj['namespace']!r}")
    click.echo(f"stopped the groupcoord service in namespace {ctx.obj['namespace']!r}")


@main.command()
@click.option("--watch", "-w", is_flag=True, help="Refresh the view until Ctrl-C.")
@click.option("--interval", type=click.FloatRange(min=0.1), default=2.0, show_default=True,
              help="Seconds between refreshes with --watch.")
@click.option("--count", type=click.IntRange(min=1), default=None, hidden=True, help="Stop after N refreshes (tests).")
@click.pass_context
def status(ctx, watch: bool, interval: float, count: int | None) -> None:
    """Partitions, where each runs, groups by state, members, commit rate, log size, last compaction."""
    import ray

    from .cli_status import show_status

    svc = connect_service(ctx.obj["address"], ctx.obj["namespace"])
    header = f"namespace {svc.namespace!r}, storage {svc.storage_path}, {svc.num_partitions} partitions"
    show_status(lambda: ray.get(svc.router.status.remote()), header, watch, interval, count)


@main.command()
@click.option("--short", is_flag=True, help="A quick run without the Spark analysis (shorter timeouts).")
@click.option(
    "--storage",
    "storage_path",
    type=click.Path(file_okay=False),
    default=None,
    help="Where the demo keeps its data (default: a temporary directory).",
)
@click.option(
    "--keep",
    "keep_dir",
    type=click.Path(file_okay=False),
    default=None,
    help="Keep the storage, the exported history and the plot in this directory, to look at them afterwards.",
)
def demo(short: bool, storage_path: str | None, keep_dir: str | None) -> None:
    """Run the demo: a group through joins, a leave, a crash, a coordinator restart, then Spark's analysis."""
    from .demo import run_demo

    ok = run_demo(short=short, storage_path=storage_path, keep_dir=keep_dir)
    if not ok:
        raise CliError("the demo found a problem (see above)")


@main.command()
@storage_root_option("analyse")
@click.option(
    "--report",
    "reports",
    multiple=True,
    type=click.Choice(["commits", "partition_status", "group_status", "lag", "rebalances", "generations"]),
    help="Only these reports (repeatable; default: all).",
)
@click.option(
    "--window",
    type=click.IntRange(min=2),
    default=10,
    show_default=True,
    help="Commits per partition in Burrow's sliding window.",
)
@click.option("--limit", type=click.IntRange(min=1), default=100, show_default=True, help="Rows per report.")
@click.option("--plot", "plot_path", type=click.Path(dir_okay=False), help="Draw commit rate and lag to this PNG.")
@click.option("--executors", type=click.IntRange(min=1), default=1, show_default=True, help="Spark executors.")
@click.option("--executor-memory", default="1G", show_default=True)
@click.option("--now-ms", type=int, default=None, hidden=True, help="Evaluate as of this time (tests).")
@click.option("--history", default=None, help="Read this exported history (a directory or fsspec URL; see export).")
@click.option("--since", default=None, help="Only records appended from this time: ISO-8601 or ms since the epoch.")
@click.option("--until", default=None, help="Only records appended until this time (the reports are as of it).")
@click.option("--allowed-lag", type=click.IntRange(min=0), default=0, show_default=True,
              help="A lag of at most this many offsets counts as none (Burrow's allowed-lag).")
@click.option("--group", "groups", multiple=True, help="Only these groups (repeatable); NOTFOUND if no commits.")
@click.option("--spark-conf", "spark_conf", multiple=True, metavar="KEY=VALUE", callback=spark_conf_option,
              help="A Spark setting, as spark-submit's --conf (repeatable); *.extraJavaOptions add to the JVM flags.")
@click.pass_context
def analyze(ctx, storage_path, reports, window, limit, plot_path, executors, executor_memory, now_ms, history, since,
            until, allowed_lag, groups, spark_conf) -> None:
    """Analyse committed offsets with Spark on Ray (RayDP): commit rates, Burrow status, lag, rebalances."""
    from groupcoord.spark import SparkOptions, run_analysis

    from .cli_export import time_ms

    if storage_path is None:
        storage_path = connect_service(ctx.obj["address"], ctx.obj["namespace"]).storage_path
    ensure_ray(ctx.obj["address"])
    rendered = run_analysis(
        storage_path,
        spark_options=SparkOptions(
            num_executors=executors, executor_memory=executor_memory, quiet=not ctx.obj["verbose"], configs=spark_conf
        ),
        ray_address=ctx.obj["address"],
        now_ms=now_ms,
        window=window,
        history=history,
        since_ms=time_ms(since, "--since"),
        until_ms=time_ms(until, "--until"),
        allowed_lag=allowed_lag,
        groups=list(groups) or None,
        reports=reports or None,
        limit=limit,
        plot_path=plot_path,
    )
    for r in rendered.values():
        print_table(r.title + (" (first rows)" if r.truncated else ""), r.columns, r.rows)
    if plot_path:
        click.echo(f"plot written to {plot_path}")


main.add_command(groups)
main.add_command(export)
main.add_command(offsets)
main.add_command(topics)
main.add_command(describe_partitions)
main.add_command(principals)
main.add_command(acls)
main.add_command(quotas)


if __name__ == "__main__":
    main()
