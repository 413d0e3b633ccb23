"""docs/metrics.md lists every metric the gateway and the bridge register, and the
Grafana dashboard (docs/grafana-dashboard.json) queries only listed ones. The
metrics read at scrape time are checked against a real scrape in
tests/e2e/test_metrics.py (`documented`)."""

from __future__ import annotations

import json
import re

from prometheus_client import CollectorRegistry

from mailui4agents.bridge.metrics import BridgeMetrics
from mailui4agents.metrics import GatewayMetrics
from tests.docs.markdown import DOCS

METRICS_MD = DOCS / "metrics.md"
DASHBOARD = DOCS / "grafana-dashboard.json"
NAME = re.compile(r"agentmail_[a-z_]+")
SUFFIXES = ("_bucket", "_count", "_sum")


def documented(section: str) -> set[str]:
    """The metric names in the first column of a section's table."""
    text = METRICS_MD.read_text(encoding="utf-8")
    part = text.split(f"\n## {section}\n", 1)[1].split("\n## ", 1)[0]
    return {m.group(1) for m in re.finditer(r"^\| `(agentmail_[a-z_]+)`", part, re.M)}


def registered(registry: CollectorRegistry) -> set[str]:
    names = set()
    for family in registry.collect():
        names.add(family.name + ("_total" if family.type == "counter" else ""))
    return names


def base(name: str) -> str:
    for suffix in SUFFIXES:
        if name.endswith(suffix):
            return name[: -len(suffix)]
    return name


def test_every_registered_metric_is_documented() -> None:
    gateway = registered(GatewayMetrics().registry)
    assert gateway and gateway <= documented("Gateway")
    bridge = BridgeMetrics("command")
    bridge.watch(lambda: None)
    assert registered(bridge.registry) == documented("Bridge")


def test_the_dashboard_queries_only_documented_metrics() -> None:
    exprs = [t["expr"] for p in json.loads(DASHBOARD.read_text())["panels"] for t in p["targets"]]
    used = {base(m) for e in exprs for m in NAME.findall(e)}
    known = documented("Gateway") | documented("Bridge")
    assert used and used <= known, used - known
    assert known <= used, known - used  # and every metric has a panel
