"""Compact text for models: one mail as a short header plus its body, one line
per item in lists. Every mail names the exact address to reply to — clients
must never build addresses themselves (docs/behaviour.md#addresses: a typo silently opens a new
session)."""

from __future__ import annotations

from collections.abc import Iterable, Mapping, Sequence
from datetime import datetime
from typing import Any

from pydantic import BaseModel

from mailui4agents.client import AttachmentRef, MailOut
from mailui4agents.domain.times import parse_rfc3339
from mailui4agents.wire.models import ContactOut, ParticipantOut, Suggestions

PREVIEW_CHARS = 120
_UNITS = ("KB", "MB", "GB", "TB")


def when(value: datetime | str | None) -> str:
    """``2025-03-01 14:05 UTC`` (minutes are enough for a model)."""
    if value is None:
        return "?"
    if isinstance(value, str):
        try:
            parsed = parse_rfc3339(value)
        except ValueError:
            return value
        return parsed.strftime("%Y-%m-%d %H:%M UTC")
    return value.strftime("%Y-%m-%d %H:%M UTC")


def size(n: int) -> str:
    """A byte count people read: ``512 B``, ``12.3 KB``, ``4.0 MB``."""
    if n < 1024:
        return f"{n} B"
    value = n / 1024
    for unit in _UNITS[:-1]:
        if value < 1024:
            return f"{value:.1f} {unit}"
        value /= 1024
    return f"{value:.1f} {_UNITS[-1]}"


def session_label(mail: MailOut) -> str:
    alias = mail.session_alias or "(no alias yet)"
    where = f", workspace {mail.workspace}" if mail.workspace else ""
    return f"{alias} (id {mail.session_id}{where})"


def attachment_line(att: AttachmentRef) -> str:
    kind = f", {att.content_type}" if att.content_type else ""
    return f"  - {att.attachment_id}  {att.name} ({size(att.size)}{kind})"


def mail_header(mail: MailOut) -> list[str]:
    sender = "human" if mail.from_human else "agent"
    lines = [
        f"mail {mail.id} ({mail.type}) — {when(mail.created_at)}",
        f"from: {mail.from_} ({sender})",
        f"to: {', '.join(mail.to) or '-'}",
    ]
    if mail.cc:
        lines.append(f"cc: {', '.join(mail.cc)}")
    lines.append(f"subject: {mail.subject}")
    lines.append(f"session: {session_label(mail)}")
    if mail.parent_mail_id:
        lines.append(f"in reply to: {mail.parent_mail_id}")
    if mail.reply_address:
        lines.append(
            f"reply: send_mail(to=[{mail.reply_address!r}], parent_mail_id={mail.id!r}) "
            "— use this address exactly"
        )
    if mail.self_address:
        lines.append(f"your address here: {mail.self_address}")
    if mail.attachments:
        lines.append(f"attachments ({len(mail.attachments)}):")
        lines.extend(attachment_line(a) for a in mail.attachments)
    return lines


def format_mail(mail: MailOut) -> str:
    """One mail with its whole body (or what the body limit let through)."""
    lines = mail_header(mail)
    lines.append("")
    lines.append(mail.body if mail.body else "(empty body)")
    if mail.body_truncated:
        lines.append("")
        lines.append(f"[body truncated: read_mail({mail.id!r}) shows all of it]")
    return "\n".join(lines)


def preview(body: str, limit: int = PREVIEW_CHARS) -> str:
    flat = " ".join(body.split())
    return flat if len(flat) <= limit else flat[: limit - 1] + "…"


def mail_line(mail: MailOut) -> str:
    """One line per mail for lists: enough to decide which to read."""
    parts = [
        mail.id,
        when(mail.created_at),
        f"from {mail.from_}{' (human)' if mail.from_human else ''}",
        f"subject {mail.subject!r}",
        f"session {mail.session_alias or mail.session_id}",
    ]
    if mail.reply_address:
        parts.append(f"reply to {mail.reply_address}")
    if mail.attachments:
        parts.append(f"{len(mail.attachments)} attachment(s)")
    if not mail.read:
        parts.append("unread")
    line = " | ".join(parts)
    if mail.body:
        line += f"\n    {preview(mail.body)}"
    return line


def format_inbox(
    mails: Sequence[MailOut], *, status: str, more: bool, scope: str | None, marked: bool
) -> str:
    where = f" in session {scope}" if scope else ""
    if not mails:
        return f"No {'unread ' if status == 'unread' else ''}mail{where}."
    what = "unread mail" if status == "unread" else "mail"
    head = f"{len(mails)} {what}{where}, oldest first"
    if marked:
        head += " (now marked read)"
    lines = [head + ":"] + [mail_line(m) for m in mails]
    if more:
        lines.append(
            "More mail waiting: read these first (read_mail marks them read), "
            "or call read_inbox with a larger limit."
        )
    lines.append("Call read_mail(mail_id) for the whole mail and how to reply.")
    return "\n".join(lines)


def format_thread(mails: Sequence[MailOut]) -> str:
    if not mails:
        return "The thread is empty."
    first = mails[0]
    head = f"thread of session {session_label(first)}: {len(mails)} mail(s), oldest first"
    blocks = [format_mail(m) for m in mails]
    return head + "\n\n" + "\n\n----\n\n".join(blocks)


def format_sent(mail: MailOut) -> str:
    lines = [
        f"sent mail {mail.id} to {', '.join(mail.to + mail.cc)}",
        f"subject: {mail.subject}",
        f"session: {session_label(mail)}",
    ]
    if mail.self_address:
        lines.append(f"your address there: {mail.self_address}")
    if mail.attachments:
        lines.append(f"attachments ({len(mail.attachments)}):")
        lines.extend(attachment_line(a) for a in mail.attachments)
    return "\n".join(lines)


def as_mapping(item: Any) -> Mapping[str, Any]:
    """A typed model or a plain dict as a mapping (discovery answers come as either)."""
    if isinstance(item, BaseModel):
        return item.model_dump(by_alias=True)
    if isinstance(item, Mapping):
        return item
    raise TypeError(f"expected an object, got {type(item).__name__}")


def items_of(data: Any) -> list[Mapping[str, Any]]:
    """The items of a list answer: a list, a Page, or ``{"items": [...]}``."""
    if isinstance(data, BaseModel) and hasattr(data, "items") and not callable(data.items):
        data = data.items
    elif isinstance(data, Mapping) and "items" in data:
        data = data["items"]
    return [as_mapping(item) for item in data]


def format_participants(items: Iterable[ParticipantOut], session: str) -> str:
    rows = list(items)
    if not rows:
        return f"Nobody takes part in session {session} yet."
    lines = [f"{len(rows)} participant(s) of session {session}:"]
    for p in rows:
        roles = ",".join(p.roles) or "-"
        sent = p.mails_sent
        spoken = f"{sent} mail(s) sent" if sent else "not yet spoken"
        lines.append(f"{p.name} ({p.kind}) | address {p.address or '-'} | roles {roles} | {spoken}")
    return "\n".join(lines)


def format_contacts(items: Iterable[ContactOut]) -> str:
    rows = list(items)
    if not rows:
        return "No contacts yet."
    lines = [f"{len(rows)} contact(s):"]
    for c in rows:
        line = f"{c.name} ({c.kind}) | last address {c.last_address or '-'}"
        if c.last_mail_at:
            line += f" | last mail {when(c.last_mail_at)}"
        if c.unread:
            line += f" | {c.unread} unread"
        lines.append(line)
    return "\n".join(lines)


def format_suggestions(data: Suggestions, partial: str) -> str:
    names, paths, sessions = data.names, data.paths, data.sessions
    if not (names or paths or sessions):
        return f"No address matches {partial!r}."
    lines = [f"addresses matching {partial!r}:"]
    if names:
        lines.append("names:")
        lines.extend(f"  {n.name} ({n.kind})" for n in names)
    if paths:
        lines.append("workspaces (most recent first):")
        for p in paths:
            extra = " (declared)" if p.declared else ""
            lines.append(f"  {p.address or p.path}{extra}")
    if sessions:
        lines.append("sessions:")
        for s in sessions:
            if s.adoptable:
                title = f" — {s.title}" if s.title else ""
                lines.append(f"  {s.address} (a platform session, adopted on first mail{title})")
            else:
                status = f", {s.status}" if s.status else ""
                lines.append(f"  {s.address} (session {s.session_id}{status})")
    lines.append("Send to `name@path.new` to start a new session.")
    return "\n".join(lines)


def format_search(mails: Sequence[Mapping[str, Any]], query: str) -> str:
    if not mails:
        return f"No mail matches {query!r}."
    lines = [f"{len(mails)} mail(s) match {query!r}:"]
    for m in mails:
        human = " (human)" if m.get("from_human") else ""
        session = m.get("session_alias") or m.get("session_id")
        lines.append(
            f"{m.get('id')} | {when(m.get('created_at'))} | from {m.get('from')}{human} "
            f"| subject {m.get('subject')!r} | session {session}"
        )
        snippet = m.get("snippet") or preview(str(m.get("body") or ""))
        if snippet:
            lines.append(f"    {' '.join(str(snippet).split())}")
    lines.append("Call read_mail(mail_id) for the whole mail and how to reply.")
    return "\n".join(lines)
