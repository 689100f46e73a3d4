"""Turn report DataFrames (Spark or pandas) into rows of strings for printing.

Columns ending in `_ms` are times: those ending in `age_ms` or `lag_ms` are durations, shown as
e.g. `3m05s`; the others are instants, shown in UTC ISO 8601. Missing values print as `-`.
"""

from __future__ import annotations

import logging
import math
from dataclasses import dataclass
from datetime import UTC, datetime
from typing import Any

log = logging.getLogger(__name__)

MAX_LIST_ITEMS = 12


@dataclass
class Rendered:
    """A report as printable rows: a title, column names and one list of strings per row."""

    title: str
    columns: list[str]
    rows: list[list[str]]
    truncated: bool = False


def format_duration(ms: float) -> str:
    """A duration in ms as e.g. `250ms`, `12.5s`, `3m05s`, `2h03m` or `1d02h` (negative gets a `-`)."""
    if ms < 0:
        return "-" + format_duration(-ms)
    if ms < 1000:
        return f"{ms:.0f}ms"
    s = ms / 1000
    if s < 60:
        return f"{s:.1f}s"
    s = int(s)
    if s < 3600:
        return f"{s // 60}m{s % 60:02d}s"
    if s < 86400:
        return f"{s // 3600}h{s % 3600 // 60:02d}m"
    return f"{s // 86400}d{s % 86400 // 3600:02d}h"


def format_instant(ms: int) -> str:
    """Milliseconds since the epoch as UTC ISO 8601 with milliseconds."""
    return datetime.fromtimestamp(ms // 1000, tz=UTC).strftime("%Y-%m-%dT%H:%M:%S") + f".{ms % 1000:03d}Z"


def format_value(column: str, value: Any) -> str:
    """One cell as text, by its column's name and its value's type."""
    if value is None or (isinstance(value, float) and math.isnan(value)):
        return "-"
    try:
        import pandas as pd

        if value is pd.NA:
            return "-"
    except ImportError:  # pragma: no cover
        pass
    if isinstance(value, bool):
        return "yes" if value else "no"
    if column.endswith("_ms") and isinstance(value, (int, float)):
        if column.endswith(("age_ms", "lag_ms")):
            return format_duration(value)
        return format_instant(int(value))
    if isinstance(value, float):
        return f"{value:.3f}"
    if isinstance(value, (list, tuple)) or type(value).__name__ == "ndarray":
        items = [format_value("", v) for v in list(value)]
        more = len(items) - MAX_LIST_ITEMS
        return ",".join(items[:MAX_LIST_ITEMS]) + (f",…(+{more})" if more > 0 else "")
    return str(value)


def render_rows(df: Any, *, title: str = "", limit: int | None = None) -> Rendered:
    """Collect a report (a Spark or pandas DataFrame, at most `limit` rows) as printable rows."""
    if hasattr(df, "toPandas"):  # Spark
        columns = list(df.columns)
        rows = [list(r) for r in (df.limit(limit + 1) if limit is not None else df).collect()]
    else:
        columns = [str(c) for c in df.columns]
        frame = df.head(limit + 1) if limit is not None else df
        rows = [list(r) for r in frame.itertuples(index=False, name=None)]
    truncated = limit is not None and len(rows) > limit
    rows = rows[:limit] if limit is not None else rows
    text = [[format_value(c, v) for c, v in zip(columns, row, strict=True)] for row in rows]
    return Rendered(title, columns, text, truncated)


def format_table(rendered: Rendered) -> str:
    """A Rendered report as a plain aligned text table, title first."""
    widths = [len(c) for c in rendered.columns]
    for row in rendered.rows:
        widths = [max(w, len(v)) for w, v in zip(widths, row, strict=True)]
    lines = [rendered.title] if rendered.title else []
    lines.append("  ".join(c.ljust(w) for c, w in zip(rendered.columns, widths, strict=True)).rstrip())
    for row in rendered.rows:
        lines.append("  ".join(v.ljust(w) for v, w in zip(row, widths, strict=True)).rstrip())
    if rendered.truncated:
        lines.append("(more rows not shown)")
    return "\n".join(lines)
