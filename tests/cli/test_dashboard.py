"""The shipped Grafana dashboard queries only metrics the service exports; the scrape config is shipped too."""

from __future__ import annotations

import json

from groupcoord.actors.service.metrics import CATALOG, PROMETHEUS_PREFIX, exported_names
from groupcoord.actors.tools.dashboards import (
    DASHBOARD_FILE,
    PROMETHEUS_FILE,
    dashboard,
    metric_names,
    queries,
    read_file,
)


def test_every_panel_queries_only_exported_metrics():
    dash = dashboard()
    exported = exported_names()
    found = list(queries(dash))
    assert len(found) >= 20
    for where, expr in found:
        names = metric_names(expr)
        assert names, f"{where}: {expr!r} reads no metric"
        unknown = names - exported
        assert not unknown, f"panel {where!r} queries {sorted(unknown)}, which the service does not export"


def test_every_metric_of_the_catalog_is_on_the_dashboard():
    shown = {name for _, expr in queries(dashboard()) for name in metric_names(expr)}
    missing = [m.name for m in CATALOG if not (m.prometheus_names() & shown)]
    assert not missing, f"metrics no panel shows: {missing}"


def test_the_checker_sees_a_wrong_name():
    assert metric_names('sum by (api) (rate(ray_groupcoord_nope_total{partition=~"$partition"}[5m]))') == {
        "ray_groupcoord_nope_total"}
    assert metric_names("histogram_quantile(0.99, sum by (le) (rate(node_cpu_seconds_bucket[1m])))") == {
        "node_cpu_seconds_bucket"}


def test_panels_are_well_formed_and_names_follow_prometheus_conventions():
    dash = json.loads(read_file(DASHBOARD_FILE))
    ids = [p["id"] for p in dash["panels"]]
    assert len(ids) == len(set(ids))
    for panel in dash["panels"]:
        assert panel["title"] and panel["description"] and panel["gridPos"]["w"] <= 24
    for m in CATALOG:
        assert m.name.startswith("groupcoord_") and m.name == m.name.lower()
        assert m.name.endswith("_total") == (m.kind == "counter"), m.name
        assert all(n.startswith(PROMETHEUS_PREFIX) for n in m.prometheus_names())


def test_the_scrape_configuration_example_is_shipped():
    text = read_file(PROMETHEUS_FILE)
    assert "scrape_configs:" in text and "prom_metrics_service_discovery.json" in text
