"""Services speak in domain terms: no web framework, no HTTP errors; and every
domain error has exactly one HTTP status, in mailui4agents/errors.py (api/errors.py
answers with it)."""

from __future__ import annotations

import ast

import pytest

from mailui4agents.api.errors import STATUS, as_api_error, status_of
from mailui4agents.domain import errors as domain_errors
from tests.architecture.test_import_graph import ROOT, module_name

FORBIDDEN = ("fastapi", "starlette", "mailui4agents.errors", "mailui4agents.api")


def _imports(package: str) -> dict[str, set[str]]:
    out: dict[str, set[str]] = {}
    for path in (ROOT / package).rglob("*.py"):
        names: set[str] = set()
        for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
            if isinstance(node, ast.Import):
                names.update(a.name for a in node.names)
            elif isinstance(node, ast.ImportFrom) and node.module and not node.level:
                names.add(node.module)
        out[module_name(path)] = names
    return out


@pytest.mark.parametrize("package", ["services", "domain", "events"])
def test_the_core_imports_no_web_framework_and_no_http_error(package: str) -> None:
    bad = {
        mod: sorted(n for n in names if n.split(".")[0] in FORBIDDEN or n.startswith(FORBIDDEN))
        for mod, names in _imports(package).items()
    }
    assert {m: b for m, b in bad.items() if b} == {}


def test_the_walker_sees_a_forbidden_import() -> None:
    assert "fastapi" in _imports("api")["mailui4agents.api.agent"]


def test_every_domain_error_has_one_status() -> None:
    classes = [
        c
        for c in vars(domain_errors).values()
        if isinstance(c, type) and issubclass(c, domain_errors.DomainError)
    ]
    assert {c.__name__: status_of(c.__new__(c)) for c in classes} == {
        "DomainError": 400,
        "Invalid": 400,
        "Missing": 400,
        "Forbidden": 403,
        "NotFound": 404,
        "Conflict": 409,
        "TooLarge": 413,
        "RateLimited": 429,
    }
    assert set(STATUS) <= set(classes)


def test_rate_limited_carries_retry_after_as_a_header_and_in_the_body() -> None:
    err = as_api_error(domain_errors.RateLimited("slow down", retry_after=7))
    assert (err.status, err.headers) == (429, {"Retry-After": "7"})
    assert err.body() == {
        "error": {"code": "rate_limited", "message": "slow down", "retry_after": 7}
    }


def test_a_conflict_keeps_its_reason_and_code() -> None:
    err = as_api_error(domain_errors.Conflict("archived", reason="archived", code="hop_limit"))
    assert err.body() == {
        "error": {"code": "hop_limit", "message": "archived", "reason": "archived"}
    }
    assert as_api_error(domain_errors.Missing("to", "give to")).body() == {
        "error": {"code": "missing_field", "message": "give to", "field": "to"}
    }
