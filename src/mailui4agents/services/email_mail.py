"""A mail of a session as an RFC 5322 message: the one builder behind both the
e-mail of an agent's mail to a person (services/email_agent_mail.py) and the
export of a session as mbox (services/email_export.py), so the Message-IDs and
the threading headers of an exported thread are those of the e-mails sent
(docs/email.md, "Agents' mails by e-mail" and "Export").

- Message-ID `<mail.{mail id}@{domain}>`: one per mail, whoever it is mailed
  to (the outbox's unique key is the Message-ID with the address).
- In-Reply-To: the parent mail's Message-ID, else the session's thread root
  (services/email_message.thread_root); References: the root, then the
  ancestors oldest first, at most MAX_REFERENCES in all (the nearest kept),
  then the copy's reply token.
- From `"<sender>" <mail_from>`: the gateway speaks for every sender; To and
  Cc name the mail's recipients as empty groups (`bob:;`): their addresses are
  their own (docs/email.md, "Addresses"); only the copy's addressee is written
  with the address it goes to.
- Body: text/plain as written, and an HTML alternative by the web UI's Markdown
  rules (domain/markdown.py). Quoted-printable, attachments base64: 7-bit, so
  the outbox stores it as text. No line starts with `From `, so an mbox holds
  it unchanged.
"""

from __future__ import annotations

import email.policy
import email.utils
import html
import re
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from datetime import datetime
from email.headerregistry import Address, Group
from email.message import EmailMessage
from typing import Any, cast
from urllib.parse import urlsplit

from sqlalchemy import Table, literal, select
from sqlalchemy.ext.asyncio import AsyncSession

from mailui4agents.db.tables import MailRow
from mailui4agents.domain import markdown
from mailui4agents.domain.email_address import domain_of
from mailui4agents.services.email_message import Personal, subject_tag, thread_root

MAX_REFERENCES = 20  # Message-IDs in References, the thread root included
FALLBACK_DOMAIN = "agentmail.invalid"  # Message-IDs of a gateway that sends no e-mail
_TYPE = re.compile(r"([a-z0-9][a-z0-9!#$&^_.+-]*)/([a-z0-9][a-z0-9!#$&^_.+-]*)")


@dataclass(frozen=True)
class File:
    """An attachment of the mail, as the builder needs it."""

    attachment_id: str
    name: str
    content_type: str
    size: int
    sha256: str


@dataclass(frozen=True)
class ThreadMail:
    """What the builder reads of one mail of a session. `ancestors`: the parent
    first, then its parent, … (ids), as far as known."""

    mail_id: str
    session_id: str
    from_name: str
    subject: str
    body: str
    created_at: datetime
    alias: str | None
    workspace: str
    to: Sequence[str] = ()
    cc: Sequence[str] = ()
    ancestors: Sequence[str] = ()
    files: Sequence[File] = field(default_factory=tuple)


def mail_message_id(mail_id: str, mail_from: str) -> str:
    """The Message-ID of the mail `mail_id`, angle brackets included."""
    return f"<mail.{mail_id}@{domain_of(mail_from)}>"


def export_from(mail_from: str | None, public_url: str | None) -> str:
    """The From address of a gateway's messages: mail_from, or (a gateway that
    sends no e-mail) `agentmail@` the host of public_url, else of FALLBACK_DOMAIN."""
    if mail_from:
        return mail_from
    host = urlsplit(public_url).hostname if public_url else None
    return f"agentmail@{host or FALLBACK_DOMAIN}"


def carried(files: Sequence[File], max_bytes: int | None) -> list[File]:
    """The files an e-mail carries as MIME parts: in the mail's order, while
    their sizes together stay within `max_bytes` (None: all); the others are
    links."""
    if max_bytes is None:
        return list(files)
    out, total = [], 0
    for f in files:
        if total + f.size <= max_bytes:
            out.append(f)
            total += f.size
    return out


def references(mail: ThreadMail, mail_from: str) -> tuple[str, list[str]]:
    """In-Reply-To and the References list (without a reply token)."""
    root = thread_root(mail.session_id, mail_from)
    chain = [mail_message_id(m, mail_from) for m in mail.ancestors[: MAX_REFERENCES - 1]]
    parent = chain[0] if chain else root
    return parent, [root, *reversed(chain)]


def _recipients(names: Sequence[str], addressee: tuple[str, str] | None) -> list[Any]:
    out: list[Any] = []
    for name in dict.fromkeys(names):
        if addressee is not None and name == addressee[0]:
            out.append(Address(display_name=name, addr_spec=addressee[1]))
        else:
            out.append(Group(display_name=name))
    return out


def _content_type(text: str) -> tuple[str, str]:
    """An upload's type as MIME's main and sub type; anything else is octet-stream."""
    found = _TYPE.fullmatch(text.partition(";")[0].strip().lower())
    return (found.group(1), found.group(2)) if found else ("application", "octet-stream")


def build(
    mail: ThreadMail,
    *,
    mail_from: str,
    contents: Mapping[str, bytes],
    public_url: str | None,
    addressee: tuple[str, str] | None = None,
    personal: Personal | None = None,
    footer: str | None = None,
    body_html: str | None = None,
) -> EmailMessage:
    """The message of `mail`. `contents`: the bytes of the files carried as MIME
    parts, by attachment id; the other files are named with a link to the web
    UI. `addressee`: (name, address) of the person this copy goes to; `personal`:
    its reply address and token (services/email_tokens.py); `footer`: a last
    paragraph (what a reply does); `body_html`: `markdown.to_html(mail.body)`
    made already (once for all the copies of a mail)."""
    in_reply_to, refs = references(mail, mail_from)
    if personal is not None and personal.token_reference:
        refs.append(personal.token_reference)
    msg = EmailMessage()
    msg["Message-ID"] = mail_message_id(mail.mail_id, mail_from)
    msg["Date"] = email.utils.format_datetime(mail.created_at)
    msg["From"] = Address(display_name=mail.from_name, addr_spec=mail_from)
    to = _recipients(mail.to, addressee)
    if to:
        msg["To"] = to
    cc = _recipients(mail.cc, addressee)
    if cc:
        msg["Cc"] = cc
    subject = " ".join(mail.subject.split())
    msg["Subject"] = f"{subject_tag(mail.alias, mail.workspace)} {subject}".rstrip()
    msg["In-Reply-To"] = in_reply_to
    msg["References"] = " ".join(refs)
    if personal is not None and personal.reply_to:
        msg["Reply-To"] = personal.reply_to
    if personal is not None:
        msg["Auto-Submitted"] = "auto-generated"  # RFC 3834: no vacation replies to it
    base = public_url.rstrip("/") if public_url else None
    left = [f for f in mail.files if f.attachment_id not in contents]
    plain = [mail.body.rstrip("\n")]
    rich = [markdown.to_html(mail.body) if body_html is None else body_html]
    if left:
        lines, items = ["Attachments not in this e-mail:"], []
        for f in left:
            where = f"{base}/attachments/{f.attachment_id}" if base else "in agentmail"
            lines.append(f"- {f.name} ({f.size} bytes): {where}")
            name = html.escape(f"{f.name} ({f.size} bytes)")
            items.append(
                f'<li><a href="{html.escape(where, quote=True)}">{name}</a></li>'
                if base
                else f"<li>{name}, in agentmail</li>"
            )
        plain.append("\n".join(lines))
        rich.append(f"<p>Attachments not in this e-mail:</p><ul>{''.join(items)}</ul>")
    if footer:
        plain.append(f"-- \n{footer}")
        rich.append(f"<hr><p>{html.escape(footer)}</p>")
    msg.set_content("\n\n".join(plain) + "\n", cte="quoted-printable")
    msg.add_alternative(
        f"<!doctype html><html><body>{markdown.clean(''.join(rich))}</body></html>\n",
        subtype="html",
        cte="quoted-printable",
    )
    for f in mail.files:
        data = contents.get(f.attachment_id)
        if data is not None:
            main, sub = _content_type(f.content_type)
            msg.add_attachment(data, maintype=main, subtype=sub, filename=f.name)
    # Boundaries of the mail's own, not random: the same mail is the same bytes
    # (an export, the e-mail). `=_` never occurs in quoted-printable or base64.
    for n, part in enumerate(p for p in msg.walk() if p.is_multipart()):
        part.set_boundary(f"=_agentmail.{mail.mail_id}.{n}")
    return msg


def to_text(msg: EmailMessage) -> str:
    """The message as SMTP sends it (CRLF, 7-bit: stored as text). A line that
    starts with `From ` (only in a quoted-printable part: headers fold with a
    space first, base64 has none) gets its F written `=46`, which decodes the
    same: an mbox then needs no `>From` quoting, which readers do not undo."""
    data = msg.as_bytes(policy=email.policy.SMTP).replace(b"\r\nFrom ", b"\r\n=46rom ")
    return data.decode("ascii")


async def ancestors(s: AsyncSession, parent_mail_id: str | None) -> list[str]:
    """The ids of `parent_mail_id` and its ancestors, nearest first, at most
    MAX_REFERENCES - 1 (one recursive query)."""
    if parent_mail_id is None:
        return []
    mails = cast(Table, MailRow.__table__).c
    start = (
        select(mails.id, mails.parent_mail_id, literal(1).label("depth"))
        .where(mails.id == parent_mail_id)
        .cte("chain", recursive=True)
    )
    step = (
        select(mails.id, mails.parent_mail_id, (start.c.depth + 1).label("depth"))
        .join(start, mails.id == start.c.parent_mail_id)
        .where(start.c.depth < MAX_REFERENCES - 1)
    )
    chain = start.union_all(step)
    rows = (await s.execute(select(chain.c.id, chain.c.depth).order_by(chain.c.depth))).all()
    return [row[0] for row in rows] or [parent_mail_id]


def chain_in(by_id: Mapping[str, str | None], parent_mail_id: str | None) -> list[str]:
    """`ancestors` from a map mail id → parent id already loaded (a whole
    session's), nearest first; stops at a parent not in the map, or a loop."""
    out: list[str] = []
    at = parent_mail_id
    while at is not None and at not in out and len(out) < MAX_REFERENCES - 1:
        out.append(at)
        at = by_id.get(at)
    return out
