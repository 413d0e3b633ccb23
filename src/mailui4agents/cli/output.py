"""How mails and events look on a terminal. Pure functions, no I/O."""

from __future__ import annotations

import json
from datetime import datetime
from typing import Any

from mailui4agents.client import Event, MailOut
from mailui4agents.wire.events import EventType


def one_line(text: str) -> str:
    """Collapse whitespace runs (newlines included) so a value fits on one line."""
    return " ".join(text.split())


def when(moment: datetime) -> str:
    """A short UTC timestamp, e.g. ``2025-01-02 03:04``."""
    return moment.strftime("%Y-%m-%d %H:%M")


def mail_line(mail: MailOut) -> str:
    """One inbox row: unread marker, id, date, sender, subject."""
    marker = " " if mail.read else "*"
    return f"{marker} {mail.id}  {when(mail.created_at)}  {mail.from_}  {one_line(mail.subject)}"


def mail_text(mail: MailOut) -> str:
    """A mail with its headers, as ``read`` and ``thread`` print it."""
    session = f"{mail.session_alias} ({mail.session_id})" if mail.session_alias else mail.session_id
    headers = [
        ("From", mail.from_),
        ("To", ", ".join(mail.to)),
        ("Cc", ", ".join(mail.cc)),
        ("Subject", mail.subject),
        ("Date", when(mail.created_at)),
        ("Id", mail.id),
        ("Session", session),
        ("Reply to", mail.reply_address or ""),
    ]
    lines = [f"{name + ':':<10}{value}" for name, value in headers if value]
    for attachment in mail.attachments:
        lines.append(
            f"{'Attached:':<10}{attachment.name} ({attachment.size} bytes) "
            f"{attachment.attachment_id}"
        )
    body = mail.body + ("\n[… body truncated]" if mail.body_truncated else "")
    return "\n".join([*lines, "", body])


def event_line(event: Event) -> str:
    """One live event on one line: ``#id type  summary``."""
    return f"#{event.id if event.id is not None else '-'} {event.type}  {_summary(event)}"


def event_json(event: Event) -> str:
    """One live event as a JSON line."""
    return json.dumps({"id": event.id, "type": event.type, "data": event.data}, ensure_ascii=False)


def _summary(event: Event) -> str:
    data: dict[str, Any] = event.data
    if event.type == EventType.NEW_MAIL:
        to = ", ".join(str(address) for address in data.get("to") or [])
        return one_line(f"{data.get('from') or '?'} → {to or '?'}: {data.get('subject') or ''}")
    if event.type == EventType.PERMISSION_REQUEST:
        what = data.get("summary") or data.get("tool_name") or data.get("kind")
        return one_line(f"{what} (request {data.get('id')}, session {data.get('session_id')})")
    if event.type == EventType.PERMISSION_DECISION:
        by = f" by {data['decided_by']}" if data.get("decided_by") else ""
        return one_line(f"{data.get('decision')} for request {data.get('request_id')}{by}")
    if event.type == EventType.SESSION_UPDATE:
        parts = [data.get("alias") or data.get("id"), data.get("status")]
        if data.get("permission_mode"):
            parts.append(f"mode={data['permission_mode']}")
        return one_line(" ".join(str(part) for part in parts if part))
    return json.dumps(data, ensure_ascii=False, separators=(",", ":"))
