"""Size limits per field (docs/limits.md), checked before any transaction.

Each size and count has a limit from settings: a 10 MB mail body, a 1 MB subject,
5 MB of tool_input and 50,000 question options were all once accepted, and
every later listing paid for them. A value too large is TooLarge (`too_large`), a
list too long Invalid (`invalid_value`); both name the field and carry the `limit`.
"""

from __future__ import annotations

import json
from collections.abc import Mapping, Sequence
from typing import Any

from mailui4agents.domain.errors import Invalid, TooLarge, invalid_value
from mailui4agents.domain.relay_keys import RELAY_KEY_MAX_BYTES
from mailui4agents.settings import Settings


def size(value: str) -> int:
    return len(value.encode("utf-8", "surrogatepass"))


def check_text(field: str, value: str | None, max_bytes: int) -> None:
    """Refuse (TooLarge) a text over `max_bytes` of UTF-8."""
    if value is not None and len(value) * 4 > max_bytes and size(value) > max_bytes:
        raise TooLarge(
            f'field "{field}" is {size(value)} bytes; at most {max_bytes}',
            field=field,
            limit=max_bytes,
        )


def check_count(field: str, items: Sequence[Any] | None, most: int) -> None:
    """Refuse (Invalid) a list of more than `most` items."""
    if items is not None and len(items) > most:
        raise invalid_value(
            field, f'field "{field}" has {len(items)} items; at most {most}', limit=most
        )


def json_size(value: Any) -> int:
    return len(json.dumps(value, separators=(",", ":"), ensure_ascii=False).encode())


def check_mail(settings: Settings, subject: str, body: str) -> None:
    check_text("subject", subject, settings.subject_max_bytes)
    check_text("body", body, settings.mail_body_max_bytes)


def check_permission(
    settings: Settings,
    *,
    tool_input: Mapping[str, Any] | None,
    summary: str | None,
    question: str | None,
    options: Sequence[Mapping[str, Any]] | None,
) -> None:
    check_text("summary", summary, settings.text_max_bytes)
    check_text("question", question, settings.text_max_bytes)
    check_count("options", options, settings.question_options_max)
    for i, option in enumerate(options or ()):
        check_text(
            f"options[{i}].description", option.get("description"), settings.option_max_bytes
        )
    if tool_input is not None:
        n = json_size(tool_input)
        if n > settings.tool_input_max_bytes:
            raise TooLarge(
                f'field "tool_input" is {n} bytes as JSON; at most {settings.tool_input_max_bytes}',
                field="tool_input",
                limit=settings.tool_input_max_bytes,
            )


def check_decision(
    settings: Settings, note: str | None, grant_pattern: str | None, answers: Sequence[str] | None
) -> None:
    check_text("note", note, settings.text_max_bytes)
    check_text("grant_pattern", grant_pattern, settings.text_max_bytes)
    check_count("answers", answers, settings.question_options_max)
    for i, answer in enumerate(answers or ()):
        check_text(f"answers[{i}]", answer, settings.text_max_bytes)


HEARTBEAT_TEXT_MAX = 200
"""Bytes of a heartbeat's status, platform and version (they are labels)."""
PLATFORM_SESSION_FIELD_MAX = 1024
"""Bytes of each text field of a reported platform session (a cwd is the longest)."""


def check_heartbeat(settings: Settings, body: Mapping[str, Any]) -> None:
    """A heartbeat is stored whole, and runs every few seconds per agent: it gets a
    total limit as well as limits per field and per list."""
    n = json_size(body)
    if n > settings.heartbeat_max_bytes:
        raise TooLarge(
            f"the heartbeat is {n} bytes as JSON; at most {settings.heartbeat_max_bytes}",
            field="body",
            limit=settings.heartbeat_max_bytes,
        )
    for field in ("status", "platform", "version"):
        value = body.get(field)
        if isinstance(value, str):
            check_text(field, value, HEARTBEAT_TEXT_MAX)
    for field in ("workspaces", "platform_sessions"):
        value = body.get(field)
        if isinstance(value, list):
            check_count(field, value, settings.heartbeat_list_max)
    for i, item in enumerate(body.get("platform_sessions") or ()):
        if isinstance(item, dict):
            for key, value in item.items():
                if isinstance(value, str):
                    check_text(f"platform_sessions[{i}].{key}", value, PLATFORM_SESSION_FIELD_MAX)


def check_relay_key(key: str) -> None:
    """A relay key fits in RELAY_KEY_MAX_BYTES (clients shorten longer ones with
    clamp_relay_key); refused (Invalid) otherwise."""
    size = len(key.encode())
    if size > RELAY_KEY_MAX_BYTES:
        raise Invalid(
            "relay_key",
            f"relay_key is {size} bytes; at most {RELAY_KEY_MAX_BYTES} "
            "(clients shorten long keys with ':sha256:<hex>')",
            code="relay_key_too_long",
        )
