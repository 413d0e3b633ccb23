"""Private classes we subclass: a loud failure when the installed library moves.

`http_protocol.py` subclasses uvicorn's `HttpToolsProtocol` (and `cli/serve.py`
wraps `Server.startup`/`handle_exit`); `db/sqlite_driver.py` subclasses
SQLAlchemy's aiosqlite adapter and reaches into `aiosqlite.Connection`. None of
these is a public API, so pyproject.toml bounds each library to the minor version
the subclasses were checked against. These tests fail, naming what to re-check,
when

- the installed version (or the pin in constraints.txt) is outside those bounds, or
- a name the subclass overrides, calls or reads is gone or takes other parameters.

They check names and signatures only; what the subclasses *do* is tested on the
real thing (tests/e2e/test_header_timeout.py, test_body_timeout.py,
tests/db/test_sqlite_driver.py). Pure Python, fast tier.
"""

from __future__ import annotations

import ast
import importlib.metadata
import inspect
import textwrap
import tomllib
from collections.abc import Callable
from pathlib import Path
from typing import Any

import aiosqlite
import pytest
import sqlalchemy.util.concurrency
from packaging.requirements import Requirement
from packaging.version import Version
from sqlalchemy.dialects.sqlite import aiosqlite as sa_aiosqlite
from uvicorn.protocols.http.httptools_impl import HttpToolsProtocol
from uvicorn.server import Server

from mailui4agents.db import sqlite_driver
from mailui4agents.http_protocol import HeaderLimitsProtocol

REPO = Path(__file__).resolve().parents[2]

# distribution -> (the file of ours that depends on its internals, what to run after a bump)
SUBCLASSED = {
    "uvicorn": (
        "src/mailui4agents/http_protocol.py and cli/serve.py",
        "tests/e2e/test_header_timeout.py tests/e2e/test_body_timeout.py",
    ),
    "sqlalchemy": ("src/mailui4agents/db/sqlite_driver.py", "tests/db/test_sqlite_driver.py"),
    "aiosqlite": ("src/mailui4agents/db/sqlite_driver.py", "tests/db/test_sqlite_driver.py"),
}


def _requirements() -> dict[str, Requirement]:
    project = tomllib.loads((REPO / "pyproject.toml").read_text(encoding="utf-8"))
    reqs = [Requirement(r) for r in project["project"]["dependencies"]]
    return {r.name.lower(): r for r in reqs}


def _pins() -> dict[str, str]:
    pins: dict[str, str] = {}
    for line in (REPO / "constraints.txt").read_text(encoding="utf-8").splitlines():
        name, sep, version = line.strip().partition("==")
        if sep:
            pins[name.lower()] = version
    return pins


def _what_to_recheck(dist: str) -> str:
    ours, tests = SUBCLASSED[dist]
    return (
        f"{ours}: built on private parts of {dist}; read that {dist}'s source of the "
        f"methods named, adapt our subclass, run {tests}, then move the bound in "
        "pyproject.toml (and this test's expectations)"
    )


@pytest.mark.parametrize("dist", sorted(SUBCLASSED))
def test_subclassed_libraries_have_an_upper_bound_that_admits_the_pin(dist: str) -> None:
    req = _requirements().get(dist)
    assert req is not None, f"pyproject.toml no longer depends on {dist}: drop it from SUBCLASSED"
    uppers = [s for s in req.specifier if s.operator in ("<", "<=", "~=", "==")]
    assert uppers, (
        f"pyproject.toml: {req} has no upper bound; {_what_to_recheck(dist)}. "
        "Bound it to the minor version the subclass was checked against."
    )
    pin = _pins().get(dist)
    assert pin is not None, f"constraints.txt pins no {dist}"
    assert req.specifier.contains(pin), (
        f"constraints.txt pins {dist}=={pin}, outside pyproject.toml's {req}; "
        f"{_what_to_recheck(dist)}"
    )


@pytest.mark.parametrize("dist", sorted(SUBCLASSED))
def test_the_installed_version_is_within_the_bounds(dist: str) -> None:
    req = _requirements()[dist]
    installed = importlib.metadata.version(dist)
    assert req.specifier.contains(Version(installed)), (
        f"{dist} {installed} is installed, outside pyproject.toml's {req}; {_what_to_recheck(dist)}"
    )


def _params(fn: Callable[..., Any]) -> list[tuple[str, str]]:
    """Parameter names and kinds (annotations vary by style; names and kinds are
    what a call from the library binds to)."""
    return [(p.name, p.kind.name) for p in inspect.signature(fn).parameters.values()]


def _assign_targets(fn: Callable[..., Any]) -> set[str]:
    """The `self.X` a method assigns (plain or annotated)."""
    tree = ast.parse(textwrap.dedent(inspect.getsource(fn)))
    found: set[str] = set()
    for node in ast.walk(tree):
        targets = (
            node.targets
            if isinstance(node, ast.Assign)
            else [node.target]
            if isinstance(node, ast.AnnAssign)
            else []
        )
        for t in targets:
            if (
                isinstance(t, ast.Attribute)
                and isinstance(t.value, ast.Name)
                and t.value.id == "self"
            ):
                found.add(t.attr)
    return found


def _check_methods(
    dist: str, base: type, expected: dict[str, list[str]], ours: type | None = None
) -> list[str]:
    """Each method exists on `base` with these parameter names (after self), and
    our override (if any) takes the same ones."""
    problems: list[str] = []
    for name, params in expected.items():
        fn = getattr(base, name, None)
        where = f"{base.__module__}.{base.__qualname__}.{name}"
        if fn is None:
            problems.append(f"{where} is gone")
            continue
        got = [n for n, _ in _params(fn)][1:]
        if got != params:
            problems.append(f"{where} takes {got}, the subclass expects {params}")
        # Our __init__ may take its own parameters: it calls the base's with these.
        if ours is not None and name in vars(ours) and name != "__init__":
            mine = [n for n, _ in _params(getattr(ours, name))][1:]
            if mine != got:
                problems.append(f"{ours.__qualname__}.{name} takes {mine}, {where} takes {got}")
    return problems


def _check_source_methods(base: type, expected: dict[str, list[str]]) -> list[str]:
    """As _check_methods, from the class's definition in its module's source file."""
    source = Path(inspect.getfile(base)).read_text(encoding="utf-8")
    found: dict[str, list[str]] = {}
    for node in ast.walk(ast.parse(source)):
        if isinstance(node, ast.ClassDef) and node.name == base.__name__:
            for item in node.body:
                if isinstance(item, ast.FunctionDef | ast.AsyncFunctionDef):
                    args = item.args
                    names = [a.arg for a in [*args.posonlyargs, *args.args, *args.kwonlyargs]]
                    found[item.name] = names[1:]
    problems: list[str] = []
    for name, params in expected.items():
        where = f"{base.__module__}.{base.__qualname__}.{name}"
        if name not in found:
            problems.append(f"{where} is gone")
        elif found[name] != params:
            problems.append(f"{where} takes {found[name]}, the subclass expects {params}")
    return problems


def _fail(dist: str, problems: list[str]) -> None:
    if problems:
        version = importlib.metadata.version(dist)
        pytest.fail(
            f"{dist} {version} and our subclass of it disagree:\n  - "
            + "\n  - ".join(problems)
            + f"\n{_what_to_recheck(dist)}",
            pytrace=False,
        )


# --- uvicorn ---------------------------------------------------------------------

# Every callback HeaderLimitsProtocol overrides (and passes on with super()).
HTTPTOOLS_CALLBACKS = {
    "connection_made": ["transport"],
    "connection_lost": ["exc"],
    "data_received": ["data"],
    "on_message_begin": [],
    "on_url": ["url"],
    "on_header": ["name", "value"],
    "on_headers_complete": [],
    "on_body": ["body"],
    "on_message_complete": [],
    "on_response_complete": [],
    "__init__": ["config", "server_state", "app_state", "_loop"],
}


def test_uvicorn_httptools_protocol_still_has_what_header_limits_overrides() -> None:
    problems = _check_methods(
        "uvicorn", HttpToolsProtocol, HTTPTOOLS_CALLBACKS, HeaderLimitsProtocol
    )
    overridden = {
        n for n, v in vars(HeaderLimitsProtocol).items() if callable(v) and not n.startswith("_")
    }
    unlisted = overridden - set(HTTPTOOLS_CALLBACKS)
    # A callback we override but this test does not watch would drift unseen.
    problems += [
        f"HeaderLimitsProtocol.{n} overrides uvicorn but is not in HTTPTOOLS_CALLBACKS"
        for n in sorted(unlisted)
        if hasattr(HttpToolsProtocol, n)
    ]
    # Attributes the subclass reads: the loop and the pipeline (set in __init__),
    # the transport (set in connection_made).
    init_sets = _assign_targets(HttpToolsProtocol.__init__)
    problems += [
        f"HttpToolsProtocol.__init__ no longer sets self.{a}"
        for a in ("loop", "pipeline")
        if a not in init_sets
    ]
    if "transport" not in _assign_targets(HttpToolsProtocol.connection_made):
        problems.append("HttpToolsProtocol.connection_made no longer sets self.transport")
    _fail("uvicorn", problems)


def test_uvicorn_server_still_has_what_serve_wraps() -> None:
    # cli/serve.py replaces server.startup (to print the bound address, reading
    # server.servers) and server.handle_exit (to end event streams first).
    # Read from uvicorn's source, not the live class: a test in the same worker
    # may have wrapped Server.handle_exit (a stopping gateway's own wrapper).
    problems = _check_source_methods(
        Server, {"startup": ["sockets"], "handle_exit": ["sig", "frame"]}
    )
    if not inspect.iscoroutinefunction(Server.startup):
        problems.append("uvicorn.Server.startup is no longer a coroutine function")
    if "servers" not in _assign_targets(Server.startup):
        problems.append("uvicorn.Server.startup no longer sets self.servers")
    _fail("uvicorn", problems)


# --- SQLAlchemy's aiosqlite adapter and aiosqlite ----------------------------------

SA_CONNECTION = {
    "__init__": ["dbapi", "connection"],
    "cursor": ["server_side"],
    "rollback": [],
    "commit": [],
    "_handle_exception": ["error"],
}
SA_DBAPI = {"__init__": ["aiosqlite", "sqlite"], "connect": ["arg", "kw"]}
# The DBAPI cursor surface SQLAlchemy's adapter offers; OneHopCursor stands in
# for it (nextset: SQLite has one result set, and no SQLite path calls it).
SA_CURSOR_SURFACE = {
    "arraysize",
    "close",
    "description",
    "execute",
    "executemany",
    "fetchall",
    "fetchmany",
    "fetchone",
    "lastrowid",
    "nextset",
    "rowcount",
    "server_side",
    "setinputsizes",
}


def test_sqlalchemy_aiosqlite_adapter_still_has_what_one_hop_overrides() -> None:
    conn_cls = sa_aiosqlite.AsyncAdapt_aiosqlite_connection
    problems = _check_methods("sqlalchemy", conn_cls, SA_CONNECTION, sqlite_driver.OneHopConnection)
    problems += _check_methods(
        "sqlalchemy", sa_aiosqlite.AsyncAdapt_aiosqlite_dbapi, SA_DBAPI, sqlite_driver.OneHopDBAPI
    )
    # Attributes OneHop* read on the adapter: the execute lock, the aiosqlite
    # connection, the dbapi module.
    slots = {s for c in conn_cls.__mro__ for s in getattr(c, "__slots__", ())}
    init_sets: set[str] = set().union(
        *(
            _assign_targets(vars(c)["__init__"])
            for c in conn_cls.__mro__[:-1]
            if "__init__" in vars(c)
        )
    )
    problems += [
        f"{conn_cls.__qualname__} no longer has {a}"
        for a in ("_execute_mutex", "_connection", "dbapi")
        if a not in slots and a not in init_sets
    ]
    # SQLAlchemy's asyncio result awaits cursor._async_soft_close() (OneHopCursor
    # defines it); await_ runs our coroutines from the sync DBAPI calls.
    cursor_cls = sa_aiosqlite.AsyncAdapt_aiosqlite_cursor
    if not inspect.iscoroutinefunction(getattr(cursor_cls, "_async_soft_close", None)):
        problems.append(f"{cursor_cls.__qualname__}._async_soft_close is gone or not async")
    surface = {
        n
        for c in cursor_cls.__mro__
        if c is not object
        for n in [*vars(c), *getattr(c, "__slots__", ())]
        if not n.startswith("_")
    }
    if surface != SA_CURSOR_SURFACE:
        problems.append(
            f"the adapter's cursor surface changed: new {sorted(surface - SA_CURSOR_SURFACE)}, "
            f"gone {sorted(SA_CURSOR_SURFACE - surface)} (OneHopCursor must match)"
        )
    problems += [
        f"OneHopCursor lacks {n}"
        for n in sorted(SA_CURSOR_SURFACE - {"nextset"})
        if not hasattr(sqlite_driver.OneHopCursor, n)
    ]
    await_ = getattr(sqlalchemy.util.concurrency, "await_", None)
    if await_ is None or [n for n, _ in _params(await_)] != ["awaitable"]:
        problems.append("sqlalchemy.util.concurrency.await_(awaitable) is gone or changed")
    _fail("sqlalchemy", problems)


def test_aiosqlite_connection_still_has_what_one_hop_reaches_into() -> None:
    conn = aiosqlite.Connection
    problems = _check_methods("aiosqlite", conn, {"_execute": ["fn", "args", "kwargs"]})
    if not isinstance(inspect.getattr_static(conn, "_conn", None), property):
        problems.append("aiosqlite.Connection._conn is no longer a property")
    init_sets = _assign_targets(conn.__init__)
    problems += [
        f"aiosqlite.Connection.__init__ no longer sets self.{a}"
        for a in ("_tx", "_connection")
        if a not in init_sets
    ]
    # OneHopConnection.rollback queues (None, fn): the worker must accept a
    # missing future.
    worker = inspect.getsource(aiosqlite.core._connection_worker_thread)
    if "if future" not in worker:
        problems.append(
            "aiosqlite's worker thread may no longer accept a queued call without a "
            "future (OneHopConnection.rollback queues (None, rollback))"
        )
    _fail("aiosqlite", problems)


def test_the_checks_see_a_changed_signature() -> None:
    """Negative control: a base whose callback lost a parameter is reported."""

    class Base:
        def on_header(self, name: bytes) -> None: ...

    class Ours(Base):
        def on_header(self, name: bytes, value: bytes = b"") -> None: ...

    problems = _check_methods("uvicorn", Base, {"on_header": ["name", "value"], "gone": []}, Ours)
    tails = [p.rsplit("<locals>.", 1)[-1] for p in problems]
    assert tails == [
        "Base.on_header takes ['name'], the subclass expects ['name', 'value']",
        "Base.on_header takes ['name']",
        "Base.gone is gone",
    ]
    assert problems[1].startswith(Ours.__qualname__ + ".on_header takes ['name', 'value']")
