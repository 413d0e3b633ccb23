"""Strict JSON: what a request body may contain beyond "it parses".

Python's `json` module accepts things that later break us or that other JSON
parsers read differently: a lone surrogate escape (`"\\ud800"`) decodes to a
string SQLite cannot store; `NaN` and `Infinity` are not JSON; `{"to": 1, "to": 2}`
keeps the last key where another parser keeps the first; a 5,000-digit number
raises a ValueError, 10,000 nested arrays a RecursionError; an integer past 2^63
overflows every database column. Each is refused here with the field it sits in.
"""

from __future__ import annotations

import json
import math
from dataclasses import dataclass
from typing import Any

MAX_DEPTH = 64
"""Deepest nesting of arrays and objects a body may have."""
INT_MIN, INT_MAX = -(2**63), 2**63 - 1
"""Integers a body may hold: what a signed 64-bit column stores."""
_MAX_INT_DIGITS = 20  # longer literals cannot be in range; never ask int() to parse them


class JsonProblem(ValueError):
    """Why a body is refused; `field` names where (`to[0]`, `options[1].label`)."""

    def __init__(self, field: str, message: str) -> None:
        super().__init__(message)
        self.field = field
        self.message = message


@dataclass(frozen=True)
class _Bad:
    """A value refused during parsing; reported with its path by the walk."""

    message: str


class _Duplicate(dict[str, Any]):
    """An object that had a key twice (the walk reports it with its path)."""

    def __init__(self, pairs: list[tuple[str, Any]], key: str) -> None:
        super().__init__(pairs)
        self.duplicate = key


def _pairs(pairs: list[tuple[str, Any]]) -> dict[str, Any]:
    seen: set[str] = set()
    for key, _ in pairs:
        if key in seen:
            return _Duplicate(pairs, key)
        seen.add(key)
    return dict(pairs)


def _int(text: str) -> int | _Bad:
    digits = text.lstrip("-")
    if len(digits) <= _MAX_INT_DIGITS:
        value = int(text)
        if INT_MIN <= value <= INT_MAX:
            return value
    return _Bad(f"integer {text[:24]}{'…' if len(text) > 24 else ''} is out of range ±2^63")


def _float(text: str) -> float | _Bad:
    value = float(text)
    return value if math.isfinite(value) else _Bad(f"number {text[:24]} is not finite")


def _constant(name: str) -> _Bad:
    return _Bad(f"{name} is not JSON (numbers must be finite)")


def _safe(key: str) -> str:
    """A key as it can be shown in an error: lone surrogates escaped, clipped."""
    shown = key.encode("utf-8", "backslashreplace").decode("utf-8").replace("\x00", "\\0")
    return shown if len(shown) <= 100 else shown[:100] + "…"


def _name(path: str, key: str | int) -> str:
    if isinstance(key, int):
        return f"{path}[{key}]"
    return f"{path}.{_safe(key)}" if path else _safe(key)


def _walk(value: Any) -> None:
    """Find the first refused value, depth-first; iterative (no recursion limit)."""
    stack: list[tuple[str, Any, int]] = [("", value, 0)]
    while stack:
        path, v, depth = stack.pop()
        if isinstance(v, str):
            _check_text(path or "body", v)
        elif isinstance(v, _Bad):
            raise JsonProblem(path or "body", f'field "{path or "body"}": {v.message}')
        elif isinstance(v, dict | list):
            if depth >= MAX_DEPTH:
                raise JsonProblem("body", f"the body is nested deeper than {MAX_DEPTH} levels")
            if isinstance(v, _Duplicate):
                where = _name(path, v.duplicate)
                raise JsonProblem(where, f'key "{_safe(v.duplicate)}" appears twice in one object')
            items = list(v.items()) if isinstance(v, dict) else list(enumerate(v))
            for key, item in reversed(items):  # reversed: the first item is checked first
                if isinstance(key, str):
                    _check_text(_name(path, key), key)
                stack.append((_name(path, key), item, depth + 1))


def _check_text(field: str, text: str) -> None:
    try:
        text.encode("utf-8")
    except UnicodeEncodeError:
        raise JsonProblem(
            field, f'field "{field}" holds a lone surrogate escape (\\ud800-\\udfff)'
        ) from None
    if "\x00" in text:  # PostgreSQL text cannot hold one (SQLite and FTS search badly)
        raise JsonProblem(field, f'field "{field}" holds a NUL (U+0000, \\u0000)')


def loads(raw: bytes) -> Any:
    """Parse a request body as strict JSON, or raise JsonProblem naming the field.

    Text that is not JSON at all raises json.JSONDecodeError, left to the caller
    (the body models already answer it)."""
    try:
        text = raw.decode("utf-8")
    except UnicodeDecodeError as e:
        raise JsonProblem("body", f"the body is not valid UTF-8 (byte {e.start})") from None
    try:
        value = json.loads(
            text, object_pairs_hook=_pairs, parse_int=_int, parse_float=_float,
            parse_constant=_constant,
        )  # fmt: skip
    except RecursionError:
        raise JsonProblem("body", f"the body is nested deeper than {MAX_DEPTH} levels") from None
    _walk(value)
    return value
