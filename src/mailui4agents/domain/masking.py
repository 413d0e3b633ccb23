"""Mask secrets in tool input before it is shown to humans (docs/behaviour.md#approval-round-trip).

An approval request carries the tool input into a mail, the web UI and
possibly a phone notification. Agents routinely put credentials in commands
(``GITHUB_TOKEN=… git push``, ``curl -H "Authorization: Bearer …"``), and a
mail is copied to places a terminal never was. Masking errs towards hiding:
a false positive costs the approver a glance at "***", a false negative
leaks a key.

This is display hygiene, not a security boundary: it only recognises common
shapes, and a secret whose unquoted value contains a separator (``&;|<>,``)
may be masked only up to that character.

``mask_secrets`` never raises: on any unexpected failure it returns "***" for
the part it could not handle, rather than the unmasked value.
"""

from __future__ import annotations

import re
from collections.abc import Callable, Mapping

MASK = "***"
_MAX_DEPTH = 64

# Key names that hold secrets when found anywhere in the key, after lowering it
# and dropping separators ("x-api-key" → "xapikey", "GITHUB_TOKEN" → "githubtoken").
_SECRET_KEY_PARTS: tuple[str, ...] = (
    "password",
    "passwd",
    "passphrase",
    "secret",
    "token",
    "apikey",
    "authorization",
    "privatekey",
    "accesskey",
    "credential",
)
# Key names that hold secrets only as a whole word: "auth" alone or in
# "auth_header", but not inside "author".
_SECRET_KEY_WORDS: frozenset[str] = frozenset({"auth", "oauth", "pwd"})

_SEPARATORS = re.compile(r"[^a-z0-9]+")
_CAMEL_BOUNDARY = re.compile(r"(?<=[a-z0-9])(?=[A-Z])")


def is_secret_key(key: str) -> bool:
    """True when a key or option name looks like it holds a secret."""
    lowered = key.lower()
    compact = _SEPARATORS.sub("", lowered)
    if any(part in compact for part in _SECRET_KEY_PARTS):
        return True
    words = _SEPARATORS.split(_CAMEL_BOUNDARY.sub("_", key).lower())
    return any(word in _SECRET_KEY_WORDS for word in words)


# A value as written in a command or text: a quoted string, or a run of
# characters up to whitespace or a shell/URL separator. An auth scheme word in
# front ("Bearer abc") is part of the value.
_VALUE = r"""(?:(?:bearer|basic|token)\s+)?(?:"[^"\n]*"|'[^'\n]*'|[^\s"'&;|<>,)]+)"""


def _masked_value(value: str) -> str:
    """The mask, keeping the value's quotes so quoted JSON or shell stays well formed."""
    if len(value) >= 2 and value[0] == value[-1] and value[0] in "\"'":
        return value[0] + MASK + value[0]
    return MASK


_PATTERNS: tuple[tuple[re.Pattern[str], Callable[[re.Match[str]], str]], ...] = (
    # PEM private key blocks.
    (
        re.compile(
            r"-----BEGIN [A-Z0-9 ]*PRIVATE KEY-----.*?(?:-----END [A-Z0-9 ]*PRIVATE KEY-----|\Z)",
            re.DOTALL,
        ),
        lambda m: MASK,
    ),
    # Our own credentials (services/identity.py prefixes).
    (re.compile(r"\bam_(agent|user)_[A-Za-z0-9_\-]+"), lambda m: f"am_{m.group(1)}_{MASK}"),
    # Authorization schemes.
    (
        re.compile(r"(?i)\b(bearer|basic)\s+[A-Za-z0-9._~+/=\-]+"),
        lambda m: f"{m.group(1)} {MASK}",
    ),
    # Well-known key shapes: OpenAI/Anthropic sk-…, GitHub, Slack, AWS access keys.
    (re.compile(r"\bsk-[A-Za-z0-9_\-]{6,}"), lambda m: MASK),
    (re.compile(r"\b(?:gh[pousr]_|github_pat_)[A-Za-z0-9_]{6,}"), lambda m: MASK),
    (re.compile(r"\bxox[a-z]?-[A-Za-z0-9\-]{6,}"), lambda m: MASK),
    (re.compile(r"\b(?:AKIA|ASIA)[0-9A-Z]{16}\b"), lambda m: MASK),
    # Credentials in URLs: scheme://user:password@host.
    (re.compile(r"(://[^/\s:@]+:)[^/\s@]+@"), lambda m: f"{m.group(1)}{MASK}@"),
    # Options: --password value, --token=value, -api-key value.
    (
        re.compile(r"(?i)(?<![\w-])(--?[a-z][a-z0-9_-]*)(=|[ \t]+)(" + _VALUE + ")"),
        lambda m: (
            m.group(1) + m.group(2) + _masked_value(m.group(3))
            if is_secret_key(m.group(1))
            else m.group(0)
        ),
    ),
    # Assignments and key/value text: TOKEN=value, "password": "value", api_key: value.
    (
        # The look-behind makes a key start only at a word start, which keeps the
        # scan linear on long unbroken text (a base64 file body, say).
        re.compile(
            r"""(?i)(["']?)(?<![a-z0-9_.\-])([a-z_][a-z0-9_.\-]*)\1([ \t]*[:=][ \t]*)("""
            + _VALUE
            + ")"
        ),
        lambda m: (
            m.group(1) + m.group(2) + m.group(1) + m.group(3) + _masked_value(m.group(4))
            if is_secret_key(m.group(2))
            else m.group(0)
        ),
    ),
)


def mask_text(text: str) -> str:
    """``text`` with every recognised secret replaced by "***"."""
    for pattern, replace in _PATTERNS:
        text = pattern.sub(replace, text)
    return text


def _mask(value: object, depth: int) -> object:
    if depth > _MAX_DEPTH:
        return MASK  # too deep to be real tool input (or a cycle): hide it
    if isinstance(value, str):
        return mask_text(value)
    if isinstance(value, bool | int | float) or value is None:
        return value
    if isinstance(value, Mapping):
        result: dict[object, object] = {}
        for key, item in value.items():
            if isinstance(key, str) and is_secret_key(key):
                result[key] = MASK
            else:
                result[key] = _mask(item, depth + 1)
        return result
    if isinstance(value, list):
        return [_mask(item, depth + 1) for item in value]
    if isinstance(value, tuple):
        return tuple(_mask(item, depth + 1) for item in value)
    if isinstance(value, bytes | bytearray):
        return mask_text(bytes(value).decode("utf-8", "replace"))
    # Not JSON-like: show its text form, masked, rather than an object whose
    # representation we have not checked.
    try:
        text = str(value)
    except Exception:
        return MASK
    return mask_text(text)


def mask_secrets(value: object) -> object:
    """A deep copy of JSON-like ``value`` with secrets replaced by "***".

    Values under secret-looking keys (password, token, api_key, authorization,
    ``auth`` as a word, ..., case-insensitive, also inside longer names such as
    ``github_token``) become "***" whatever their type. Inside strings, our
    ``am_agent_…``/``am_user_…`` credentials, ``Bearer …``, ``sk-…``, ``ghp_…``,
    ``xox…-…``, ``AKIA…`` keys, URL passwords, PEM private keys, and secret
    ``KEY=value`` / ``--password value`` / ``--token=value`` pieces of shell
    commands are masked.
    """
    try:
        return _mask(value, 0)
    except Exception:
        return MASK
