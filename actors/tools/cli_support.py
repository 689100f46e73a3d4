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
                width: int | None = None, optional: Sequence[str] = ()) -> None:
    """Print rows under Kafka-style upper-case column headers ("-" where a value is unknown).

    With a `width`, the table is at most that wide: the `optional` columns are left out, in their order,
    until it fits (a cell still too wide then folds).
    """
    cells = [["-" if v is None or v == "" else str(v) for v in row] for row in rows]
    names = list(columns)
    if width is not None:
        names, cells = fit_columns(names, cells, width, optional)
    table = Table(title=title, box=None, header_style="bold", pad_edge=False, show_edge=False)
    for c in names:
        table.add_column(c, overflow="fold")
    for row in cells:
        table.add_row(*row)
    console(width).print(table)


def table_width(columns: Sequence[str], rows: Sequence[Sequence[str]]) -> int:
    """How many columns a table of these cells takes (two spaces between columns, as print_table sets it)."""
    widths = [len(c) for c in columns]
    for row in rows:
        widths = [max(w, len(v)) for w, v in zip(widths, row, strict=True)]
    return sum(widths) + 2 * max(len(widths) - 1, 0)


def fit_columns(
    columns: Sequence[str], rows: Sequence[Sequence[str]], width: int, optional: Sequence[str]
) -> tuple[list[str], list[list[str]]]:
    """The table without its `optional` columns, in that order, until it fits `width` (or none is left)."""
    keep = list(range(len(columns)))
    for name in optional:
        if table_width([columns[i] for i in keep], [[r[i] for i in keep] for r in rows]) <= width:
            break
        if name in columns:
            keep.remove(list(columns).index(name))
    return [columns[i] for i in keep], [[r[i] for i in keep] for r in rows]


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
