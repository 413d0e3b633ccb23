"""Automatic session aliases (docs/behaviour.md#sessions-and-aliases): slugs, collision candidates,
suggestions."""

from __future__ import annotations

import difflib
import unicodedata

DEFAULT_MAX_LEN = 48
"""Default upper bound for the length of an automatic alias."""


def slugify(text: str, max_len: int = DEFAULT_MAX_LEN) -> str:
    """Turn ``text`` into a slug made of Unicode letters, digits and ``-``.

    The text is NFC-normalized and lowercased (where the script has case).
    Letters and digits (categories ``L*`` and ``N*``) are kept, so Chinese stays
    Chinese; combining marks (``M*``) are kept when they follow a kept character
    (vowel signs of Indic scripts, accents). Every run of other characters
    becomes one ``-``, ``-`` is trimmed at both ends, and the result is cut to
    ``max_len`` characters (trailing ``-`` trimmed again).
    """
    parts: list[str] = []
    pending_dash = False
    for ch in unicodedata.normalize("NFC", text):
        category = unicodedata.category(ch)[0]
        keep = category in ("L", "N") or (category == "M" and parts and not pending_dash)
        if keep:
            if pending_dash and parts:
                parts.append("-")
            pending_dash = False
            parts.append(ch.lower())
        else:
            pending_dash = True
    slug = "".join(parts)
    return slug[: max(max_len, 0)].strip("-")


def auto_alias(name: str, subject: str, max_len: int = DEFAULT_MAX_LEN) -> str:
    """Build the automatic alias of a new session from recipient name and subject.

    ``("claude", "Fix login bug") -> "claude-fix-login-bug"``. Returns ``""``
    when the slug is empty or the reserved word ``new``; the caller then falls
    back to ``session-<uuid prefix>``.
    """
    slug = slugify(f"{name} {subject}", max_len)
    if slug == "new":
        return ""
    return slug


def fallback_alias(session_id: str) -> str:
    """``session-<first 8 hex chars of the session id, dashes removed>``."""
    return "session-" + session_id.replace("-", "")[:8].lower()


def alias_candidates(
    base: str,
    session_id: str,
    max_len: int = DEFAULT_MAX_LEN,
    attempts: int = 20,
) -> list[str]:
    """List the aliases to try, in order, when ``base`` may already be taken.

    ``[base, base-2, base-3, ..., base-<attempts>, session-<8 hex>]``. Every
    candidate fits ``max_len``: the base is cut, trailing ``-`` stripped, then
    the suffix added. With an empty base only the fallback is returned.
    """
    candidates: list[str] = []
    head = base[: max(max_len, 0)].rstrip("-")
    if head:
        candidates.append(head)
        for number in range(2, attempts + 1):
            suffix = f"-{number}"
            cut = base[: max(max_len - len(suffix), 0)].rstrip("-")
            if cut:
                candidates.append(cut + suffix)
    fallback = fallback_alias(session_id)
    if fallback not in candidates:
        candidates.append(fallback)
    return candidates


def close_matches(wanted: str, known: list[str], n: int = 5) -> list[str]:
    """Suggest known aliases for an unknown one, best first, at most ``n``.

    Candidates are the :func:`difflib.get_close_matches` results (cutoff 0.5)
    plus every known alias that starts with or contains ``wanted``
    (case-insensitive). Ranking: prefix matches, then substring matches, then
    by similarity; duplicates are removed.
    """
    if n <= 0:
        return []
    unique = list(dict.fromkeys(known))
    needle = wanted.casefold()
    chosen = set(difflib.get_close_matches(wanted, unique, n=n, cutoff=0.5))
    if needle:
        chosen.update(alias for alias in unique if needle in alias.casefold())

    def rank(alias: str) -> tuple[bool, bool, float, str]:
        folded = alias.casefold()
        ratio = difflib.SequenceMatcher(None, wanted, alias).ratio()
        return (
            not (needle and folded.startswith(needle)),
            not (needle and needle in folded),
            -ratio,
            alias,
        )

    return sorted(chosen, key=rank)[:n]
