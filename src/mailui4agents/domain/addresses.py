"""Parsing and formatting of mail addresses ``name@path.session`` (docs/behaviour.md#addresses).

* ``name`` is everything before the first ``@``.
* Of the rest, the session is after the LAST ``.`` and the path before it.
  Without any ``.`` the rest is the path and there is no session part.
* An empty session part (``ana@.``) means "no session part".

Formatting is the inverse of parsing: ``parse_address(format_address(a)) == a``
for every address that :func:`format_address` accepts.
"""

from __future__ import annotations

from dataclasses import dataclass

from mailui4agents.domain.names import refused_character

NEW_SESSION = "new"
"""The session part that asks the gateway to start a new session."""

MAX_ALIAS_LEN = 64
"""Upper bound for the length of a session alias."""


class AddressError(ValueError):
    """An address (or one of its parts) is malformed."""


@dataclass(frozen=True)
class Address:
    """A parsed address.

    Attributes:
        name: The user or agent (never empty, no ``@``, no whitespace).
        path: The workspace path; may be empty and may contain dots, ``@`` etc.
        session: The session alias; ``None`` when there is no session part and
            the literal ``"new"`` to start a new session.
    """

    name: str
    path: str
    session: str | None


def _has_space(text: str) -> bool:
    return any(ch.isspace() for ch in text)


def _check_name(name: str, address: str) -> None:
    if not name:
        raise AddressError(f"address {address!r} has an empty name before '@'")
    if "@" in name:
        raise AddressError(f"address {address!r}: name {name!r} must not contain '@'")
    if _has_space(name):
        raise AddressError(f"address {address!r}: name {name!r} must not contain whitespace")


def parse_address(text: str) -> Address:
    """Parse ``name@path.session`` into an :class:`Address`.

    Surrounding whitespace is ignored. The session is the text after the last
    ``.`` of the part after the first ``@``; an empty session part means ``None``.

    Raises:
        AddressError: if there is no ``@``, the name is empty or the name
            contains whitespace.
    """
    stripped = text.strip()
    name, at, rest = stripped.partition("@")
    if not at:
        raise AddressError(f"address {text!r} has no '@' (expected name@path.session)")
    _check_name(name, text)
    path, dot, session = rest.rpartition(".")
    if not dot:
        return Address(name=name, path=rest, session=None)
    return Address(name=name, path=path, session=session or None)


def format_parts(name: str, path: str, session: str | None) -> str:
    """Format the three address parts; see :func:`format_address`."""
    _check_name(name, f"{name}@{path}")
    if session is None:
        # A trailing "." keeps the path whole when parsing: without it the text
        # after the path's last dot would be read as a session, and trailing
        # whitespace of the path would be stripped away.
        if "." in path or (path and path[-1].isspace()):
            return f"{name}@{path}."
        return f"{name}@{path}"
    if not session:
        raise AddressError("session part must not be empty (use None for no session)")
    if "." in session:
        raise AddressError(f"session {session!r} must not contain '.'")
    if session[-1].isspace():
        raise AddressError(f"session {session!r} must not end with whitespace")
    return f"{name}@{path}.{session}"


def format_address(addr: Address) -> str:
    """Format an :class:`Address` so that :func:`parse_address` gives it back.

    ``name@path.session``; with no session ``name@path``, or ``name@path.``
    when the path contains a ``.`` (or ends with whitespace). An empty path with
    a session keeps both separators: ``admin@.sprint-review``. ``new`` is only
    written when ``session == "new"`` was given explicitly.

    Raises:
        AddressError: if the parts cannot round-trip (bad name; session empty,
            containing ``.`` or ending with whitespace).
    """
    return format_parts(addr.name, addr.path, addr.session)


def is_valid_alias(alias: str) -> bool:
    """Tell whether ``alias`` may name a session.

    Non-empty, at most 64 characters, no ``.``, no ``@``, no whitespace, no
    control or format characters (domain/names.py), and not the reserved word ``new``.
    """
    return (
        0 < len(alias) <= MAX_ALIAS_LEN
        and alias != NEW_SESSION
        and "." not in alias
        and "@" not in alias
        and not _has_space(alias)
        and refused_character(alias) is None
    )
