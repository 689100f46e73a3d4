"""`groupcoord status`: the running service at a glance, once or live (`--watch`) in the terminal.

Per partition: where it runs, whether it has loaded its log, its groups by state, members,
offsets, commit rate, log size and last compaction; a totals line below. The commit rate is
measured between two refreshes of the watch (the partition's own one-minute rate before that).
"""

from __future__ import annotations

import time
from typing import Any, Callable

from rich.console import Group
from rich.live import Live
from rich.table import Table
from rich.text import Text

from .cli_support import console

# Group states as columns, in the order a rebalance goes through them.
STATES = (("Empty", "EMPTY"), ("PreparingRebalance", "PREPARING"), ("CompletingRebalance", "COMPLETING"),
          ("Stable", "STABLE"), ("Dead", "DEAD"))
COLUMNS = ("PARTITION", "NODE", "PID", "LOADED", "GROUPS", *(c for _, c in STATES), "MEMBERS", "OFFSETS",
           "COMMITS/S", "LOG-END", "LOG-BYTES", "LAST-COMPACTION", "LOAD-MS", "ERROR")


def human_bytes(n: float | None) -> str | None:
    """1536 -> '1.5 KiB'."""
    if n is None:
        return None
    for unit in ("B", "KiB", "MiB", "GiB"):
        if abs(n) < 1024 or unit == "GiB":
            return f"{n:.0f} {unit}" if unit == "B" else f"{n:.1f} {unit}"
        n /= 1024
    return None  # pragma: no cover


def _compaction(c: dict | None, now: float) -> str | None:
    if not c:
        return None
    return f"{now - c['finished']:.0f}s ago, {c['seconds']:.2f}s, -{human_bytes(c['reclaimed_bytes'])}"


def _failures(f: dict | None) -> str | None:
    """Background failures so far, e.g. 'failures: compaction 2, timer callbacks 1'; None if there were none."""
    named = [f"{name} {n}" for name, n in sorted((f or {}).items()) if n]
    return f"failures: {', '.join(named)}" if named else None


def _cell(v: Any) -> str:
    return "-" if v is None or v == "" else str(v)


class StatusView:
    """Renders the partitions' status as a table; remembers the last sample to measure commit rates."""

    def __init__(self, fetch: Callable[[], list[dict]], header: str) -> None:
        self.fetch = fetch
        self.header = header
        self._last: tuple[float, dict[int, int]] | None = None

    def _rates(self, rows: list[dict], now: float) -> dict[int, float | None]:
        commits = {s["partition"]: s.get("offset_commits") or 0 for s in rows}
        rates: dict[int, float | None] = {p: s.get("commit_rate") for p, s in ((s["partition"], s) for s in rows)}
        if self._last is not None and now > self._last[0]:
            then, before = self._last
            for p, c in commits.items():
                if p in before and c >= before[p]:
                    rates[p] = (c - before[p]) / (now - then)
        self._last = (now, commits)
        return rates

    def render(self) -> Group:
        """Fetch the status of every partition and lay it out, with a totals line."""
        rows = sorted(self.fetch(), key=lambda s: s["partition"])
        now = time.time()
        rates = self._rates(rows, time.monotonic())
        table = Table(box=None, header_style="bold", pad_edge=False, show_edge=False)
        for c in COLUMNS:
            left = c in ("NODE", "ERROR", "LAST-COMPACTION")
            table.add_column(c, overflow="fold", justify="left" if left else "right")
        totals = {"groups": 0, "members": 0, "offsets": 0, "log_bytes": 0, "rate": 0.0, "loaded": 0}
        by_state_total = {s: 0 for s, _ in STATES}
        for s in rows:
            by_state = s.get("groups_by_state") or {}
            rate = rates.get(s["partition"])
            node = s.get("node_ip") or ""
            if s.get("node_id"):
                node = f"{node}/{s['node_id'][:8]}" if node else s["node_id"][:12]
            table.add_row(*map(_cell, [
                s["partition"], node, s.get("pid"), "yes" if s.get("loaded") else "no", s.get("groups"),
                *(by_state.get(state) for state, _ in STATES),
                s.get("members"), s.get("offsets"), None if rate is None else f"{rate:,.1f}",
                s.get("log_end_offset"), human_bytes(s.get("log_bytes")),
                _compaction(s.get("last_compaction"), now),
                None if s.get("load_ms") is None else f"{s['load_ms']:.0f}",
                s.get("error") or s.get("last_failure") or _failures(s.get("loop_failures")),
            ]))
            for state, _ in STATES:
                by_state_total[state] += by_state.get(state, 0)
            totals["groups"] += s.get("groups") or 0
            totals["members"] += s.get("members") or 0
            totals["offsets"] += s.get("offsets") or 0
            totals["log_bytes"] += s.get("log_bytes") or 0
            totals["rate"] += rate or 0.0
            totals["loaded"] += 1 if s.get("loaded") else 0
        states = ", ".join(f"{n} {state}" for state, n in by_state_total.items() if n)
        summary = (f"{totals['loaded']}/{len(rows)} partitions loaded; {totals['groups']} groups ({states or 'none'}); "
                   f"{totals['members']} members; {totals['offsets']} offsets; "
                   f"{totals['rate']:,.1f} commits/s; log {human_bytes(totals['log_bytes'])}")
        return Group(Text(self.header, style="bold"), table, Text(summary))


def show_status(fetch: Callable[[], list[dict]], header: str, watch: bool, interval_s: float,
                count: int | None = None) -> None:
    """Print the status once, or refresh it every `interval_s` until Ctrl-C (or `count` refreshes)."""
    view = StatusView(fetch, header)
    out = console()
    if not watch:
        out.print(view.render())
        return
    shown = 0
    try:
        with Live(view.render(), console=out, refresh_per_second=4, screen=False) as live:
            shown = 1
            while count is None or shown < count:
                time.sleep(interval_s)
                live.update(view.render())
                shown += 1
    except KeyboardInterrupt:
        pass
