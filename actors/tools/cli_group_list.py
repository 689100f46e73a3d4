"""`groupcoord groups list`: the service's groups by group id, a page at a time, with Kafka's state and type filters.

Made for services of 100,000 groups: the filters go to the coordinators (ListGroups' states_filter
and types_filter, KIP-518 and KIP-848), one page is printed as plain aligned text (a rich table of
1,000 rows took longer than listing 100,000 groups), and a last line on stderr always says how many groups
matched and which page this is.
"""

from __future__ import annotations

from operator import attrgetter
from typing import Iterable, Sequence

import click

from ..client import AdminClient
from .cli_support import connect_service

PAGE_SIZE = 1000  # groups per page
# The names kafka-consumer-groups.sh --list accepts (Kafka's ConsumerGroupState and GroupType), in its spelling.
GROUP_STATES = ("PreparingRebalance", "CompletingRebalance", "Stable", "Dead", "Empty", "Assigning", "Reconciling")
GROUP_TYPES = ("classic", "consumer", "share", "streams")
COLUMNS = ("GROUP", "STATE", "TYPE", "PROTOCOL-TYPE")


def parse_names(values: Iterable[str], known: Sequence[str], what: str) -> tuple[str, ...]:
    """Names given repeatedly or comma-separated, matched case-insensitively to `known` and spelled as there;
    click.BadParameter naming the valid ones for any other (an empty name too)."""
    by_lower = {k.lower(): k for k in known}
    out: list[str] = []
    for value in values:
        for part in value.split(","):
            given = part.strip()
            name = by_lower.get(given.lower())
            if name is None:
                raise click.BadParameter(f"{given!r} is not a group {what}; valid {what}s are {', '.join(known)}")
            if name not in out:
                out.append(name)
    return tuple(out)


def _states(ctx: click.Context, param: click.Parameter, values: tuple[str, ...]) -> tuple[str, ...]:
    return parse_names(values, GROUP_STATES, "state")


def _types(ctx: click.Context, param: click.Parameter, values: tuple[str, ...]) -> tuple[str, ...]:
    return parse_names(values, GROUP_TYPES, "type")


def plain_table(columns: Sequence[str], rows: Sequence[Sequence[str]]) -> str:
    """Rows under their column names, left-aligned, two spaces apart ("-" for an empty cell)."""
    cells = [[c or "-" for c in row] for row in rows]
    widths = [max([len(c), *(len(r[i]) for r in cells)]) for i, c in enumerate(columns)]
    lines = ["  ".join(v.ljust(w) for v, w in zip(row, widths, strict=True)).rstrip() for row in [columns, *cells]]
    return "\n".join(lines)


def summary(total: int, first: int, shown: int, page: int, pages: int, states: Sequence[str],
            types: Sequence[str]) -> str:
    """The last line: how many groups matched (and which filters), which of them are shown, where the next page is."""
    matching = f" in state {' or '.join(states)}" if states else ""
    matching += f" of type {' or '.join(types)}" if types else ""
    if total == 0:
        return f"0 groups{matching}"
    line = f"{total:,} group{'s' if total != 1 else ''}{matching}: showing {first + 1:,}-{first + shown:,}"
    if pages > 1:
        line += f", page {page} of {pages}"
        if page < pages:
            line += f" (--page {page + 1} for more)"
    return line


@click.command("list")
@click.option("--state", "states", multiple=True, callback=_states, metavar="STATE[,STATE...]",
              help=f"Only groups in these states (repeatable): {', '.join(GROUP_STATES)}; any case.")
@click.option("--type", "types", multiple=True, callback=_types, metavar="TYPE[,TYPE...]",
              help=f"Only groups of these types (repeatable): {', '.join(GROUP_TYPES)}.")
@click.option("--page-size", type=click.IntRange(min=1), default=PAGE_SIZE, show_default=True, help="Groups per page.")
@click.option("--page", type=click.IntRange(min=1), default=1, show_default=True,
              help="Which page, in group-id order.")
@click.option("--all", "show_all", is_flag=True, help="Every matching group, without pages.")
@click.pass_context
def list_groups(ctx: click.Context, states: tuple[str, ...], types: tuple[str, ...], page_size: int, page: int,
                show_all: bool) -> None:
    """List the service's groups in group-id order, a page at a time, with a count of all that matched."""
    if show_all and page != 1:
        raise click.UsageError("--all shows every group on one page: leave out --page")
    admin = AdminClient(connect_service(ctx.obj["address"], ctx.obj["namespace"]),
                        credentials=ctx.obj.get("credentials"))
    listed = sorted(admin.list_groups(states=states, types=types), key=attrgetter("group_id"))
    total = len(listed)
    if show_all:
        page_size = max(total, 1)
    pages = max(1, -(-total // page_size))
    if page > pages:
        raise click.BadParameter(f"page {page} is past the last page, {pages} ({total:,} groups, {page_size:,} a page)",
                                 param_hint="'--page'")
    first = (page - 1) * page_size
    shown = listed[first : first + page_size]
    if shown:
        click.echo(plain_table(COLUMNS, [(g.group_id, g.group_state, g.group_type, g.protocol_type) for g in shown]))
    # On stderr: a script that reads the table from stdout gets rows only, as from kafka-consumer-groups.sh --list.
    click.echo(summary(total, first, len(shown), page, pages, states, types), err=True)
