""" "Waiting for you" from an interactive session (docs/platforms.md,
"Interactive sessions"): the agent's turn is over, or its permission dialog is
up, and nobody at the terminal reacts, so the session's deciders get a push
with the agent's last words (POST /agent/sessions/{id}/waiting, once per turn).

- Claude Code ``Notification``: ``notification_type`` ``idle_prompt`` (about
  60 s after a turn ends with nobody typing) is a notice of kind ``input``,
  ``permission_prompt`` (a dialog unanswered for a few seconds) of kind
  ``permission``; the turn is ``prompt_id``; the last words are the last
  assistant text of the JSONL transcript at ``transcript_path``, read from its
  end (at most TAIL_BYTES).
- Codex ``Stop``: the turn is over, so a notice of kind ``input``; the turn is
  ``turn_id``, the last words ``last_assistant_message``.

Only with ``AGENTMAIL_INTERACTIVE=1`` and outside a bridge turn
(hooks/race.py ``interactive``). Best effort: it prints nothing and never
blocks the agent; a failure goes to stderr (hooks/events.py ``dispatch``).
Standard library only.
"""

from __future__ import annotations

import json
import os
from collections.abc import Callable, Mapping
from typing import Any

from mailui4agents.hooks.events import NOTHING, event_call, settings_for
from mailui4agents.hooks.platform import Platform
from mailui4agents.hooks.race import interactive

#: Seconds the whole notice may take (binding the session included): the
#: installer gives these events a 15 s hook timeout (cli/install_interactive.py).
SEND_S = 5.0
TAIL_BYTES = 256 * 1024  # of the transcript, read from its end
MAX_EXCERPT = 2000  # characters sent (the gateway's limit)
MAX_MESSAGE = 200
MAX_TURN = 200

CLAUDE_KINDS = {"idle_prompt": "input", "permission_prompt": "permission"}

Handler = Callable[[dict[str, Any], Mapping[str, str]], tuple[str, int]]


def _text_of(entry: Any) -> str | None:
    """The text of one transcript line if it is an assistant message with text."""
    if not isinstance(entry, dict) or entry.get("type") != "assistant":
        return None
    message = entry.get("message")
    content = message.get("content") if isinstance(message, dict) else None
    if isinstance(content, str):
        return content.strip() or None
    if not isinstance(content, list):
        return None
    parts = [
        part["text"]
        for part in content
        if isinstance(part, dict)
        and part.get("type") == "text"
        and isinstance(part.get("text"), str)
    ]
    text = "\n".join(parts).strip()
    return text or None


def last_assistant_text(path: str, tail_bytes: int = TAIL_BYTES) -> str | None:
    """The last assistant text of a Claude Code JSONL transcript, from its last
    `tail_bytes` (a line cut by that bound is skipped); None when there is none
    or the file cannot be read."""
    try:
        with open(path, "rb") as f:
            size = f.seek(0, os.SEEK_END)
            f.seek(max(0, size - tail_bytes))
            chunk = f.read(tail_bytes)
    except OSError:
        return None
    lines = chunk.split(b"\n")
    if size > tail_bytes:
        lines = lines[1:]  # the first line is cut
    for line in reversed(lines):
        if b'"assistant"' not in line:
            continue
        try:
            text = _text_of(json.loads(line))
        except ValueError:
            continue
        if text is not None:
            return text[-MAX_EXCERPT:]
    return None


def send(
    platform: Platform,
    data: dict[str, Any],
    env: Mapping[str, str],
    *,
    kind: str,
    message: str,
    turn: str,
    excerpt: str | None,
) -> bool | None:
    """Send the notice for this platform session: True when deduplicated, None
    when there is nothing to send it to (no owner, not an agent's key)."""
    from mailui4agents.client import lite
    from mailui4agents.hooks.gateway import connect, mail_session

    settings = settings_for(platform, data, env)
    if not settings.coordinates.is_agent:
        return None
    gateway = connect(settings)
    until = lite.clock() + SEND_S
    try:
        session_id = mail_session(gateway, event_call(data), settings, until)
        if session_id is None:
            return None
        return gateway.waiting(
            session_id,
            kind,
            message[:MAX_MESSAGE],
            excerpt[-MAX_EXCERPT:] if excerpt else None,
            turn[:MAX_TURN],
            until=until,
        )
    finally:
        gateway.abort()


def _str(data: Mapping[str, Any], key: str) -> str | None:
    value = data.get(key)
    return value if isinstance(value, str) and value else None


def notification(platform: Platform) -> Handler:
    """Claude Code's ``Notification`` handler."""

    def handle(data: dict[str, Any], env: Mapping[str, str]) -> tuple[str, int]:
        kind = CLAUDE_KINDS.get(_str(data, "notification_type") or "")
        turn = _str(data, "prompt_id")
        if not interactive(env) or kind is None or turn is None:
            return NOTHING
        path = _str(data, "transcript_path")
        excerpt = last_assistant_text(path) if path else None
        message = _str(data, "message") or "waiting"
        send(platform, data, env, kind=kind, message=message, turn=turn, excerpt=excerpt)
        return NOTHING

    return handle


def codex_stop(platform: Platform) -> Handler:
    """Codex's ``Stop`` handler: the turn is over, the agent waits for input."""

    def handle(data: dict[str, Any], env: Mapping[str, str]) -> tuple[str, int]:
        turn = _str(data, "turn_id")
        if not interactive(env) or turn is None:
            return NOTHING
        excerpt = _str(data, "last_assistant_message")
        send(
            platform,
            data,
            env,
            kind="input",
            message="waiting for input",
            turn=turn,
            excerpt=excerpt,
        )
        return NOTHING

    return handle
