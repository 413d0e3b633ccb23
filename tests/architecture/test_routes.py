"""No two routers of the app have routes that overlap, so the order in which
app.py includes them changes what a request costs (FastAPI tries the routes one
by one: the busiest come first), never which handler answers it.

Two routes overlap when they share a method and one's path pattern matches the
other's path with each parameter filled in, or with a literal segment of the
other in its place. Routes within one router keep their written order and are
not compared here."""

from __future__ import annotations

import re
from dataclasses import dataclass
from pathlib import Path

import pytest
from starlette.routing import compile_path

from mailui4agents.app import create_app
from mailui4agents.settings import Settings


@dataclass(frozen=True)
class Flat:
    router: int  # the position of its router in app.router.routes
    path: str
    methods: frozenset[str]
    pattern: re.Pattern[str]


def flat_routes(app: object) -> list[Flat]:
    out = []
    for i, top in enumerate(app.router.routes):  # type: ignore[attr-defined]
        inner = getattr(top, "original_router", None)
        for route in inner.routes if inner is not None else [top]:
            path = getattr(route, "path", None)
            if path is None:
                continue
            methods = frozenset(getattr(route, "methods", None) or {"GET"})
            out.append(Flat(i, path, methods, compile_path(path)[0]))
    return out


def overlaps(routes: list[Flat]) -> list[tuple[str, str]]:
    """Pairs (a's path, b's path) of routes of different routers where b matches a
    request meant for a."""
    found = []
    for a in routes:
        samples = {re.sub(r"\{[^}]+\}", "x1", a.path), re.sub(r"\{[^}]+\}", "new", a.path)}
        for b in routes:
            if a.router == b.router or not a.methods & b.methods:
                continue
            if any(b.pattern.match(s) for s in samples):
                found.append((a.path, b.path))
    return found


@pytest.fixture(scope="module")
def routes(tmp_path_factory: pytest.TempPathFactory) -> list[Flat]:
    data: Path = tmp_path_factory.mktemp("routes")
    return flat_routes(create_app(Settings(data_dir=data)))


def test_no_two_routers_have_overlapping_routes(routes: list[Flat]) -> None:
    assert len({r.router for r in routes}) > 20, "every router is seen"
    assert overlaps(routes) == []


def test_an_overlap_would_be_found(routes: list[Flat]) -> None:
    """Negative control: a route of a later router that shadows a mail route."""
    mail = next(r for r in routes if r.path == "/api/v1/mail/{mail_id}")
    shadow = Flat(999, "/api/v1/mail/{anything}", frozenset({"GET"}), mail.pattern)
    assert ("/api/v1/mail/{mail_id}", "/api/v1/mail/{anything}") in overlaps([*routes, shadow])
    literal = Flat(998, "/api/v1/mail/new", frozenset({"GET"}), compile_path("/api/v1/mail/new")[0])
    assert ("/api/v1/mail/{mail_id}", "/api/v1/mail/new") in overlaps([*routes, literal])


def test_the_busiest_routers_come_first(routes: list[Flat]) -> None:
    """An agent's mail, a send and a permission request are matched before the
    admin, auth and web routes (app.py)."""
    first = {r.path: r.router for r in routes}
    for busy in ("/api/v1/agent/mail", "/api/v1/mail", "/api/v1/agent/permissions"):
        assert first[busy] < first["/api/v1/admin/users"], busy
        assert first[busy] < first["/api/v1/auth/login"], busy
