"""The two HTTP adapters, api/ (REST) and web/ (the pages), are thin: each turns
a request into service calls and renders the answer. So neither imports the
other (what both need of HTTP is in http/, of the gateway in services/), and
neither touches the database: no SQLAlchemy, no mailui4agents.db — the queries
live in services/ (CONTRIBUTING.md, "Layers").

Imports are read with ast, anywhere in a module (top level, in functions,
under TYPE_CHECKING); `from pkg import sub` counts as importing pkg.sub."""

from __future__ import annotations

import ast
from pathlib import Path

import pytest

from tests.architecture.test_import_graph import ROOT

DATABASE = ("sqlalchemy", "mailui4agents.db")
RULES: dict[str, tuple[str, ...]] = {
    "web": ("mailui4agents.api", *DATABASE),
    "api": ("mailui4agents.web", *DATABASE),
}
# Imports a rule still lets through, module → names. Empty, and it may only
# shrink: a new entry needs a reason written here.
ALLOWED: dict[str, set[str]] = {}


def imports_in(path: Path) -> set[str]:
    """Every absolute module name `path` imports, and pkg.name for each
    `from pkg import name` (a submodule imported that way counts)."""
    found: set[str] = set()
    for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
        if isinstance(node, ast.Import):
            found.update(a.name for a in node.names)
        elif isinstance(node, ast.ImportFrom) and node.module and not node.level:
            found.add(node.module)
            found.update(f"{node.module}.{a.name}" for a in node.names)
    return found


def _hits(name: str, forbidden: tuple[str, ...]) -> bool:
    return any(name == f or name.startswith(f + ".") for f in forbidden)


def violations(root: Path, package: str, forbidden: tuple[str, ...]) -> dict[str, list[str]]:
    """The forbidden imports of each module of `root/package`, less ALLOWED."""
    out: dict[str, list[str]] = {}
    for path in sorted((root / package).rglob("*.py")):
        module = ".".join(path.relative_to(root.parent).with_suffix("").parts)
        allowed = ALLOWED.get(module, set())
        bad = sorted(n for n in imports_in(path) if _hits(n, forbidden) and n not in allowed)
        if bad:
            out[module] = bad
    return out


@pytest.mark.parametrize("package", sorted(RULES))
def test_an_adapter_imports_neither_the_other_adapter_nor_the_database(package: str) -> None:
    assert violations(ROOT, package, RULES[package]) == {}


def test_the_walker_sees_each_kind_of_forbidden_import(tmp_path: Path) -> None:
    """A module of a fake adapter with each way of importing something forbidden,
    one of them inside a function: each is reported, nothing else is."""
    root = tmp_path / "mailui4agents"
    (root / "web").mkdir(parents=True)
    (root / "web" / "page.py").write_text(
        "from typing import TYPE_CHECKING\n"
        "import sqlalchemy.orm\n"
        "from mailui4agents import db\n"
        "from mailui4agents.services import mail\n"
        "if TYPE_CHECKING:\n"
        "    from mailui4agents.db.tables import MailRow\n"
        "def handler():\n"
        "    from mailui4agents.api import deps\n",
        encoding="utf-8",
    )
    assert violations(root, "web", RULES["web"]) == {
        "mailui4agents.web.page": [
            "mailui4agents.api",
            "mailui4agents.api.deps",
            "mailui4agents.db",
            "mailui4agents.db.tables",
            "mailui4agents.db.tables.MailRow",
            "sqlalchemy.orm",
        ]
    }


def test_the_walker_sees_the_database_in_the_services() -> None:
    """On the real tree: the services do query (so the walker reads real modules)."""
    found = violations(ROOT, "services", DATABASE)
    assert "sqlalchemy" in found["mailui4agents.services.sessions"]
    assert "mailui4agents.db.tables" in found["mailui4agents.services.sessions"]
