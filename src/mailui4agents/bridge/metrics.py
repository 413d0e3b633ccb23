"""The bridge's Prometheus metrics, served on `agentmail bridge --metrics-port`
(docs/metrics.md, "Bridge"). Its own registry, like the gateway's (metrics.py)."""

from __future__ import annotations

from collections.abc import Callable, Iterator
from typing import Any

from prometheus_client import CollectorRegistry, Counter, Histogram, disable_created_metrics
from prometheus_client.core import GaugeMetricFamily
from prometheus_client.registry import Collector

# No `*_created` series beside each counter and histogram: they double the series
# for a timestamp Prometheus does not need (it sees resets by itself).
disable_created_metrics()  # type: ignore[no-untyped-call]

# A turn: from seconds (a quick answer) to the default --turn-timeout (30 min).
TURN_BUCKETS = (1.0, 2.5, 5.0, 10.0, 30.0, 60.0, 120.0, 300.0, 600.0, 1800.0, 3600.0)


class BridgeMetrics:
    def __init__(self, runner: str) -> None:
        self.runner = runner
        self.registry = CollectorRegistry(auto_describe=True)
        self.turns = Counter(
            "agentmail_bridge_turns",
            "Turns the agent CLI ran, by runner and outcome: done, or why it failed "
            "(bridge/failures.py: auth, quota, timeout, error, ...).",
            ("runner", "outcome"),
            registry=self.registry,
        )
        self.turn_seconds = Histogram(
            "agentmail_bridge_turn_duration_seconds",
            "Wall time of a turn's CLI run (time parked on a person included), by runner.",
            ("runner",),
            buckets=TURN_BUCKETS,
            registry=self.registry,
        )

    def turn(self, outcome: str, seconds: float) -> None:
        self.turns.labels(self.runner, outcome).inc()
        self.turn_seconds.labels(self.runner).observe(seconds)

    def watch(self, pool: Callable[[], Any]) -> None:
        """Read the pool's queue, running and parked turns at each scrape."""
        self.registry.register(_PoolCollector(pool))


class _PoolCollector(Collector):
    def __init__(self, pool: Callable[[], Any]) -> None:
        self.pool = pool

    def describe(self) -> Iterator[Any]:
        return iter(())

    def collect(self) -> Iterator[Any]:
        pool = self.pool()
        for name, what in (
            ("queued", "Mails waiting for a turn (the queue's depth)."),
            ("running", "Turns running and counting toward --concurrency."),
            ("parked", "Turns parked on a person's decision."),
        ):
            family = GaugeMetricFamily(f"agentmail_bridge_turns_{name}", what)
            family.add_metric((), getattr(pool, name) if pool is not None else 0)
            yield family
