"""`groupcoord export`: the partition logs' new records into the columnar history, once or on a schedule."""

from __future__ import annotations

import click

from .cli_support import CliError, connect_service, init_ray, print_table


def storage_root_option(verb: str):
    """The --storage option of a command that reads an existing storage root (default: the service's)."""
    return click.option("--storage", "storage_path", type=click.Path(file_okay=False, exists=True), default=None,
                        help=f"Storage root to {verb} (default: the running service's).")


@click.command()
@click.option("--history", required=True, help="Where the history lives: a directory or an fsspec URL (s3://...).")
@storage_root_option("export")
@click.option("--every", "every_s", type=click.FloatRange(min=0, min_open=True), default=None,
              help="Export every this many seconds in a Ray actor on the cluster (default: once, here).")
@click.option("--stop", "stop_schedule", is_flag=True, help="Stop the scheduled export of the namespace.")
@click.pass_context
def export(ctx, history: str, storage_path: str | None, every_s: float | None, stop_schedule: bool) -> None:
    """Export the committed offsets and group records appended since the last export into Parquet files."""
    if stop_schedule or every_s is not None:
        from .history_exporter import start_exporter, stop_exporter

        init_ray(ctx.obj["address"], ctx.obj["namespace"])
        if stop_schedule:
            if not stop_exporter(ctx.obj["namespace"]):
                raise CliError(f"no scheduled export runs in namespace {ctx.obj['namespace']!r}")
            click.echo("stopped the scheduled export")
            return
    if storage_path is None:
        storage_path = connect_service(ctx.obj["address"], ctx.obj["namespace"]).storage_path
    if every_s is not None:
        import ray

        exporter = start_exporter(str(storage_path), history, interval_s=every_s, namespace=ctx.obj["namespace"])
        status = ray.get(exporter.export_now.remote())
        click.echo(f"exporting {storage_path} into {history} every {every_s:g} s "
                   f"(first run: {status['last_rows']} rows); `groupcoord export --history {history} --stop` ends it")
        return
    from groupcoord.spark.history import export_history

    try:
        result = export_history(storage_path, history)
    except FileNotFoundError as e:
        raise CliError(str(e)) from None
    rows = [[p, n, c.next_offset, c.writer_epoch] for p, (n, c) in
            sorted((p, (result.rows[p], result.checkpoints[p])) for p in result.rows)]
    print_table(f"Exported into {history} in {result.seconds:.1f}s",
                ["LOG-PARTITION", "NEW-ROWS", "NEXT-OFFSET", "WRITER-EPOCH"], rows)
    click.echo(f"{result.total_rows} rows in {result.files} files")


def time_ms(text: str | None, option: str) -> int | None:
    """A time given as ms since the epoch or as ISO-8601 (UTC unless it names a zone), in ms."""
    if text is None:
        return None
    if text.lstrip("-").isdigit():
        return int(text)
    from .offset_reset import parse_datetime_ms

    try:
        return parse_datetime_ms(text)
    except ValueError:
        raise CliError(f"{option} takes ms since the epoch or an ISO-8601 time such as 2026-01-31T12:00:00; "
                       f"got {text!r}") from None


def spark_conf_option(ctx: click.Context, param: click.Parameter, pairs: tuple[str, ...]) -> dict[str, str]:
    """--spark-conf KEY=VALUE pairs as a dict of Spark settings (a usage error for a pair without `=`)."""
    conf = {}
    for pair in pairs:
        key, sep, value = pair.partition("=")
        if not sep or not key.strip():
            raise click.BadParameter(f"takes KEY=VALUE, such as spark.sql.shuffle.partitions=4; got {pair!r}")
        conf[key.strip()] = value
    return conf
