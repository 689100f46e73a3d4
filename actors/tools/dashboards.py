"""The Grafana dashboard and Prometheus scrape configuration shipped with the package, and what they query."""

from __future__ import annotations

import json
import re
from importlib import resources
from typing import Any, Iterator

DASHBOARD_FILE = "grafana_dashboard.json"
PROMETHEUS_FILE = "prometheus.yml"

# PromQL words that are not metric names: functions, aggregations, keywords.
_PROMQL_WORDS = frozenset(
    "sum min max avg count stddev stdvar topk bottomk quantile count_values group by without on ignoring "
    "group_left group_right bool and or unless offset rate irate increase delta idelta deriv histogram_quantile "
    "abs ceil floor round clamp clamp_min clamp_max label_values label_replace label_join vector scalar time "
    "sort sort_desc absent absent_over_time avg_over_time max_over_time min_over_time sum_over_time "
    "count_over_time last_over_time changes resets predict_linear exp ln log2 log10 sqrt inf nan".split()
)
_MATCHERS = re.compile(r"\{[^}]*\}")  # label matchers: {partition=~"$partition"}
_RANGES = re.compile(r"\[[^\]]*\]")  # range selectors: [5m], [$__rate_interval]
_GROUPINGS = re.compile(r"\b(by|without|on|ignoring|group_left|group_right)\s*\([^)]*\)")
_STRINGS = re.compile(r'"[^"]*"')
_IDENTIFIER = re.compile(r"[a-zA-Z_:][a-zA-Z0-9_:]*")


def read_file(name: str) -> str:
    """The text of one of the shipped files (DASHBOARD_FILE, PROMETHEUS_FILE)."""
    return (resources.files("groupcoord.actors.tools") / "observability" / name).read_text()


def dashboard() -> dict[str, Any]:
    """The Grafana dashboard, as JSON."""
    return json.loads(read_file(DASHBOARD_FILE))


def queries(dash: dict[str, Any]) -> Iterator[tuple[str, str]]:
    """(where, PromQL) of every panel target and every templating query of a dashboard."""
    for panel in dash.get("panels", []):
        for target in panel.get("targets", []):
            yield panel.get("title", "?"), target["expr"]
    for variable in dash.get("templating", {}).get("list", []):
        query = variable.get("query")
        if isinstance(query, dict):
            yield f"variable {variable['name']}", query["query"]


def metric_names(expr: str) -> set[str]:
    """The metric names a PromQL expression reads (label names, functions and numbers left out)."""
    text = _STRINGS.sub("", _MATCHERS.sub("", _RANGES.sub("", expr)))
    text = _GROUPINGS.sub("", text)
    text = re.sub(r"label_values\(([^,]+),[^)]*\)", r"\1", text)
    return {w for w in _IDENTIFIER.findall(text) if w not in _PROMQL_WORDS and not w.startswith("$")}
