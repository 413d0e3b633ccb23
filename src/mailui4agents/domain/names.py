"""Names of users and agents: what they may contain, and which look alike.

A name is part of every address and is what a human reads before approving an
agent's request, so it must look like what it is: no control characters, no
invisible format characters (U+200B ZERO WIDTH SPACE makes "ana" and "an\u200ba"
two principals that print the same), no bidi overrides (U+202E turns "alice-gpt"
around on screen), no line or paragraph separators, no unassigned, private or
surrogate code points. Names are stored in NFC, so "é" typed decomposed is the
same name as "é" typed composed.

Look-alikes are not refused (Cyrillic "а" has real users) but reported: the
skeleton below is a small version of Unicode TR39's (NFKC, a short table of the
Latin look-alikes that matter in names, casefold), and an admin who creates a
name whose skeleton equals an existing one's is warned.
"""

from __future__ import annotations

import unicodedata
from collections.abc import Iterable

REFUSED_CATEGORIES = {
    "Cc": "a control character",
    "Cf": "a format (invisible or bidi) character",
    "Cs": "a surrogate",
    "Co": "a private-use character",
    "Cn": "an unassigned code point",
    "Zl": "a line separator",
    "Zp": "a paragraph separator",
    "Zs": "a space",
}

# Characters that render like a Latin letter or digit in common fonts (from the
# TR39 confusables data, restricted to what is likely in a name).
_LOOKALIKES = str.maketrans(
    {
        # Cyrillic
        "а": "a", "в": "b", "е": "e", "ё": "e", "һ": "h", "і": "i", "ї": "i", "ј": "j",
        "к": "k", "ӏ": "l", "м": "m", "н": "h", "о": "o", "р": "p", "с": "c", "т": "t",
        "у": "y", "х": "x", "ѕ": "s", "ԁ": "d", "ԛ": "q", "ԝ": "w", "ь": "b",
        "А": "a", "В": "b", "Е": "e", "К": "k", "М": "m", "Н": "h", "О": "o", "Р": "p",
        "С": "c", "Т": "t", "Х": "x", "Ү": "y", "І": "l", "Ѕ": "s", "Ј": "j",
        # Greek
        "α": "a", "β": "b", "ε": "e", "ι": "i", "κ": "k", "ν": "v", "ο": "o", "ρ": "p",
        "τ": "t", "υ": "u", "χ": "x", "Α": "a", "Β": "b", "Ε": "e", "Η": "h", "Ι": "l",
        "Κ": "k", "Μ": "m", "Ν": "n", "Ο": "o", "Ρ": "p", "Τ": "t", "Χ": "x", "Υ": "y",
        "Ζ": "z",
        # Latin and digits that pass for each other
        "I": "l", "1": "l", "|": "l", "0": "o", "ı": "i",
    }
)  # fmt: skip
_SEQUENCES = (("rn", "m"), ("vv", "w"), ("cl", "d"))


class NameRefused(ValueError):
    """A name that cannot be used (the message says why)."""


def refused_character(text: str) -> str | None:
    """A description of the first character `text` may not hold, or None."""
    for ch in text:
        kind = REFUSED_CATEGORIES.get(unicodedata.category(ch))
        if kind is not None:
            label = unicodedata.name(ch, "")
            return f"U+{ord(ch):04X}{f' {label}' if label else ''} ({kind})"
    return None


def clean_name(raw: str) -> str:
    """The name in NFC, or NameRefused if it holds a refused character."""
    name = unicodedata.normalize("NFC", raw)
    bad = refused_character(name)
    if bad is not None:
        raise NameRefused(f"must not contain {bad}")
    return name


def skeleton(name: str) -> str:
    """What a name looks like, roughly: equal skeletons are easy to mistake."""
    text = unicodedata.normalize("NFKC", name).translate(_LOOKALIKES).casefold()
    text = "".join(c for c in unicodedata.normalize("NFD", text) if not unicodedata.combining(c))
    for seq, looks_like in _SEQUENCES:
        text = text.replace(seq, looks_like)
    return text


def look_alikes(name: str, existing: Iterable[str]) -> list[str]:
    """The existing names (other than `name` itself) that look like `name`."""
    mine = skeleton(name)
    return sorted(n for n in existing if n != name and skeleton(n) == mine)
