"""Prometheus metrics of one gateway process (docs/metrics.md lists them all).

Each app has its own registry (never prometheus_client's global one): replicas
serve their own numbers, and tests that start several apps in one process do
not add up each other's. What a request changes is counted by the request
middleware (http/observe.py); what a transaction changes is noted on it
(`note`) and counted only once it commits (`Gateway.write`); what can be read
(open streams, pool use, pending requests, the outbox senders' counts) is read
when /metrics is scraped, so the hot path pays nothing for it.
"""

from __future__ import annotations

import collections
import time
from collections.abc import Callable, Iterable, Iterator
from typing import TYPE_CHECKING, Any, Protocol

from prometheus_client import (
    CollectorRegistry,
    Counter,
    Gauge,
    Histogram,
    disable_created_metrics,
)
from prometheus_client.core import CounterMetricFamily, GaugeMetricFamily
from prometheus_client.registry import Collector
from sqlalchemy.ext.asyncio import AsyncSession
from sqlalchemy.orm import Session

if TYPE_CHECKING:
    from mailui4agents.db.engine import Database
    from mailui4agents.events.hub import EventHub
    from mailui4agents.settings import Settings


class _Counted(Protocol):
    counts: collections.Counter[str]


class Watched(Protocol):
    """What the scrape reads of a Gateway (state.py, which imports this module)."""

    settings: Settings
    db: Database
    hub: EventHub
    scheduler_done_at: float | None

    @property
    def push(self) -> _Counted | None: ...

    @property
    def email(self) -> _Counted | None: ...


# No `*_created` series beside each counter and histogram: they double the series
# for a timestamp Prometheus does not need (it sees resets by itself).
disable_created_metrics()  # type: ignore[no-untyped-call]

# Request latency, seconds: from a few ms (an inbox read) to a long-poll's 60 s.
LATENCY_BUCKETS = (0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1.0, 2.5, 5.0, 10.0, 30.0, 60.0)
# A person's decision, seconds: from a glance at a phone to a day.
DECISION_BUCKETS = (5.0, 15.0, 30.0, 60.0, 120.0, 300.0, 900.0, 1800.0, 3600.0, 14400.0, 86400.0)
UNMATCHED = "unmatched"  # a path no route matched (never the raw path: cardinality)


def note(s: AsyncSession | Session, name: str, label: str, value: float = 1.0) -> None:
    """Count `value` on metric `name` with `label` once the transaction of `s`
    commits (a rolled-back one counts nothing). `name` is one of
    GatewayMetrics.NOTED."""
    s.info.setdefault("metrics", []).append((name, label, value))


class GatewayMetrics:
    """The registry of one app and its metrics."""

    # The metrics `note` may name, and their one label.
    NOTED = ("events", "mails", "permission_requests", "permission_decisions", "decision_seconds")

    def __init__(self) -> None:
        self.registry = CollectorRegistry(auto_describe=True)
        r = self.registry
        self.requests = Counter(
            "agentmail_http_requests",
            "HTTP requests answered, by route template, method and status.",
            ("route", "method", "status"),
            registry=r,
        )
        self.latency = Histogram(
            "agentmail_http_request_duration_seconds",
            "Time from a request's arrival to the end of its answer (event streams excluded).",
            ("route", "method"),
            buckets=LATENCY_BUCKETS,
            registry=r,
        )
        self.events = Counter(
            "agentmail_events_appended",
            "Events appended to the log, by type.",
            ("type",),
            registry=r,
        )
        self.mails = Counter("agentmail_mails", "Mails stored, by type.", ("type",), registry=r)
        self.permission_requests = Counter(
            "agentmail_permission_requests",
            "Permission requests opened, by outcome: asked (a human will decide), "
            "approved or denied (at once, by a grant or a rule).",
            ("outcome",),
            registry=r,
        )
        self.permission_decisions = Counter(
            "agentmail_permission_decisions",
            "Permission requests settled, by status (approved, denied, expired, cancelled).",
            ("status",),
            registry=r,
        )
        self.decision_seconds = Histogram(
            "agentmail_permission_decision_seconds",
            "Time from a request to a person's decision, by decision.",
            ("status",),
            buckets=DECISION_BUCKETS,
            registry=r,
        )
        self.pending = Gauge(
            "agentmail_permission_requests_pending",
            "Permission requests waiting for a decision (counted when scraped).",
            registry=r,
        )
        self.scheduler_pass = Histogram(
            "agentmail_scheduler_pass_seconds",
            "Duration of one scheduler pass.",
            buckets=(0.001, 0.005, 0.01, 0.05, 0.1, 0.5, 1.0, 5.0, 30.0),
            registry=r,
        )
        self._state: Collector | None = None
        self._children: dict[tuple[str, str, str], tuple[Any, Any]] = {}
        self._noted: dict[str, Callable[[str], Any]] = {
            name: getattr(self, name).labels for name in self.NOTED
        }

    def request(self, route: str, method: str, status: int, seconds: float | None) -> None:
        """One answered request (`seconds` None: an event stream, not timed)."""
        key = (route, method, str(status))
        pair = self._children.get(key)
        if pair is None:  # labels() takes a lock and checks names: once per key
            pair = (self.requests.labels(*key), self.latency.labels(route, method))
            self._children[key] = pair
        pair[0].inc()
        if seconds is not None:
            pair[1].observe(seconds)

    def committed(self, notes: Iterable[tuple[str, str, float]]) -> None:
        for name, label, value in notes:
            child = self._noted[name](label)
            if name == "decision_seconds":
                child.observe(value)
            else:
                child.inc(value)

    def watch(self, gw: Watched) -> None:
        """Read the gateway's state at each scrape (it replaces the last one's)."""
        if self._state is not None:
            self.registry.unregister(self._state)
        self._state = _StateCollector(gw)
        self.registry.register(self._state)


class _StateCollector(Collector):
    """What is read rather than counted, at scrape time."""

    def __init__(self, gw: Watched) -> None:
        self.gw = gw

    def describe(self) -> Iterator[Any]:
        return iter(())  # the names are dynamic (outbox outcomes): not checked at register

    def collect(self) -> Iterator[Any]:
        gw = self.gw
        streams = GaugeMetricFamily(
            "agentmail_streams_open",
            "Open event streams and long-polls, by kind (agent, human, wait).",
            labels=("kind",),
        )
        for kind, n in sorted(gw.hub.open_by_kind().items()):
            streams.add_metric((kind,), n)
        yield streams
        handed = CounterMetricFamily(
            "agentmail_event_handoffs",
            "How committed events reached the open streams (events/hub.py): `direct`, "
            "handed over by the commit itself; `read`, by a read of the log.",
            labels=("way",),
        )
        handed.add_metric(("direct",), gw.hub.direct)
        handed.add_metric(("read",), gw.hub.shared_reads)
        yield handed
        pool = GaugeMetricFamily(
            "agentmail_db_connections",
            "Database connections by engine (writer, reader) and state (in_use, idle).",
            labels=("engine", "state"),
        )
        for role, engine in (("writer", gw.db.writer), ("reader", gw.db.reader)):
            p: Any = engine.sync_engine.pool
            if hasattr(p, "checkedout") and hasattr(p, "checkedin"):
                pool.add_metric((role, "in_use"), p.checkedout())
                pool.add_metric((role, "idle"), p.checkedin())
            if engine is gw.db.reader and gw.db.reader is gw.db.writer:
                break
        yield pool
        for name, sender in (("push", gw.push), ("email", gw.email)):
            family = CounterMetricFamily(
                f"agentmail_{name}_deliveries",
                f"{'Web Push' if name == 'push' else 'E-mail'} deliveries by outcome "
                "(services/push_send.py, services/email_send.py).",
                labels=("outcome",),
            )
            if sender is not None:
                for outcome, n in sorted(sender.counts.items()):
                    family.add_metric((outcome,), n)
            yield family
        lag = GaugeMetricFamily(
            "agentmail_scheduler_lag_seconds",
            "Seconds since the scheduler last finished a pass, beyond its interval "
            "(0 while it keeps time; grows when a pass hangs or the loop is starved).",
        )
        last = gw.scheduler_done_at
        if last is not None:
            late = time.monotonic() - last - gw.settings.scheduler_interval_s
            lag.add_metric((), max(0.0, late))
        yield lag
