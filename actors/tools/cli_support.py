"""What every `groupcoord` command shares: connecting to the service, tables, one-line errors."""

from __future__ import annotations

import logging
import shutil
import sys
from typing import Any, Iterable, Sequence

import click
from rich.console import Console
from rich.table import Table

from ..client import GroupCoordinatorError, Service, ServiceError
from . import quiet
from .offset_reset import ResetError

log = logging.getLogger(__name__)


class CliError(click.ClickException):
    """A problem the user can fix; printed as one line, exit status 1."""


def console(width: int | None = None) -> Console:
    """A console wide enough that tables are not wrapped when the output is piped (or exactly `width` wide)."""
    if width is None:
        width = max(shutil.get_terminal_size((160, 24)).columns if sys.stdout.isatty() else 200, 100)
    return Console(width=width, highlight=False, soft_wrap=False)


def print_table(title: str | None, columns: Sequence[str], rows: Iterable[Sequence[Any]],
                width: int | None = None) -> None:
    """Print rows under Kafka-style upper-case column headers ("-" where a value is unknown), at most `width`
    columns wide if given."""
    table = Table(title=title, box=None, header_style="bold", pad_edge=False, show_edge=False)
    for c in columns:
        table.add_column(c, overflow="fold")
    for row in rows:
        table.add_row(*("-" if v is None or v == "" else str(v) for v in row))
    console(width).print(table)


def init_ray(address: str | None, namespace: str) -> None:
    """Connect this process to a running Ray cluster; CliError if there is none."""
    import ray

    if ray.is_initialized():
        return
    try:
        quiet.init_ray(address=address or "auto", namespace=namespace)
    except ConnectionError:
        raise CliError(
            "no Ray cluster is running here; start one with `groupcoord start` (or `ray start --head`)"
        ) from None


def connect_service(address: str | None, namespace: str) -> Service:
    """The running service in `namespace`; CliError if there is none."""
    from ..service import connect

    init_ray(address, namespace)
    try:
        return connect(namespace)
    except ServiceError as e:
        raise CliError(str(e)) from None


class FriendlyGroup(click.Group):
    """A click group whose commands report expected failures as one line instead of a traceback."""

    def invoke(self, ctx: click.Context) -> Any:
        try:
            return super().invoke(ctx)
        except (click.ClickException, click.exceptions.Exit, click.exceptions.Abort):
            raise
        except (GroupCoordinatorError, ServiceError, ResetError, ValueError, TimeoutError, OSError) as e:
            raise CliError(_one_line(e)) from None
        except Exception as e:
            if type(e).__module__.startswith("ray"):
                raise CliError(f"Ray error: {_one_line(e)}") from None
            raise


def _one_line(e: BaseException) -> str:
    text = str(e).strip().splitlines()
    return text[0] if text else type(e).__name__
