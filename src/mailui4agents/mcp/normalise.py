"""Normalise what a model writes for a list argument (docs/behaviour.md#attachments).

Models write lists of ids in many shapes: a real list, the list JSON-encoded
in a string (sometimes twice), one bare id, or ids separated by commas or
spaces. The gateway stays strict, so the MCP server turns every such shape
into a plain ``list[str]`` first. (A model once wrote the list as a JSON
string six times in a row and gave up the whole task.)
"""

from __future__ import annotations

import json
import re
from collections.abc import Iterable, Mapping
from typing import Any

# Separators between ids written as one string; ids never contain these.
_ID_SEPARATORS = re.compile(r"[\s,;]+")
# Addresses may hold spaces (a path like "/home/ana/my project"): split on these only.
_ADDRESS_SEPARATORS = re.compile(r"[,;\n]+")
# Left over around a token when a list was written loosely, e.g. "[a, 'b']".
_WRAPPING = "[](){}\"'`"
# The keys under which an upload answer or a mail's attachment entry holds its id.
_ID_KEYS = ("attachment_id", "id")
# JSON nested deeper than this is not a list a model meant to write.
_MAX_DEPTH = 16


def normalise_ids(value: Any) -> list[str]:
    """Every id in ``value``, in order, each once.

    Accepts ``None`` or ``""`` (no ids), one id, a list or tuple (nested lists
    are flattened), a JSON-encoded list or string (also encoded several times),
    ids separated by commas, semicolons or whitespace, and objects with an
    ``attachment_id`` or ``id`` key (an upload's answer passed back as is).
    Raises ``ValueError`` for anything else (a number, a boolean, an object
    without an id), naming what was given.
    """
    return _dedupe(_flatten(value, _ID_SEPARATORS, 0))


def normalise_addresses(value: Any) -> list[str]:
    """Addresses from a list, a JSON-encoded list, one address, or a string
    separated by commas, semicolons or newlines (not spaces: a workspace path
    may contain one). Order is kept; duplicates are dropped."""
    return _dedupe(_flatten(value, _ADDRESS_SEPARATORS, 0))


def _flatten(value: Any, separators: re.Pattern[str], depth: int) -> list[str]:
    if depth > _MAX_DEPTH:
        raise ValueError("the list is nested too deeply")
    if value is None:
        return []
    if isinstance(value, bool) or not isinstance(value, str | Mapping | Iterable):
        raise ValueError(f"expected a list of strings, got {value!r:.80}")
    if isinstance(value, str):
        return _from_text(value, separators, depth)
    if isinstance(value, Mapping):
        for key in _ID_KEYS:
            if isinstance(value.get(key), str):
                return _from_text(value[key], separators, depth)
        raise ValueError(f"expected an id, got an object without one: {value!r:.80}")
    found: list[str] = []
    for item in value:
        found.extend(_flatten(item, separators, depth + 1))
    return found


def _from_text(text: str, separators: re.Pattern[str], depth: int) -> list[str]:
    stripped = text.strip()
    if not stripped:
        return []
    if stripped[0] in '["{':
        try:
            decoded = json.loads(stripped)
        except json.JSONDecodeError:
            pass  # written loosely, e.g. "[a, b]": split it below
        else:
            if decoded != stripped:  # guards against a string decoding to itself
                return _flatten(decoded, separators, depth + 1)
    tokens = (token.strip().strip(_WRAPPING).strip() for token in separators.split(stripped))
    return [token for token in tokens if token]


def _dedupe(values: Iterable[str]) -> list[str]:
    return list(dict.fromkeys(values))
