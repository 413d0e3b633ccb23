"""The e-mail the gateway writes (docs/email.md): whole RFC 5322 messages, made
once when queued, so every retry sends the same bytes with the same Message-ID.

A Message-ID is `<{outbox row id}@{domain of mail_from}>`: unique (a UUID),
stable (stored with the row), and on a domain the gateway speaks for.
"""

from __future__ import annotations

import email.policy
import email.utils
import html
import json
from dataclasses import dataclass
from email.message import EmailMessage
from typing import Any

import nh3

from mailui4agents.db.types import utcnow
from mailui4agents.domain.email_address import domain_of
from mailui4agents.domain.json_types import JsonObject
from mailui4agents.domain.masking import mask_secrets, mask_text


def message_id(outbox_id: str, mail_from: str) -> str:
    """The Message-ID header of the outbox row `outbox_id`, angle brackets included."""
    return f"<{outbox_id}@{domain_of(mail_from)}>"


def serialise(msg: EmailMessage) -> str:
    """The message as SMTP sends it (CRLF line ends); 7-bit, so it is stored as text:
    bodies are quoted-printable, headers RFC 2047-encoded where they need it."""
    data = msg.as_bytes(policy=email.policy.SMTP)
    return data.decode("ascii")


def verification_mail(
    *, outbox_id: str, mail_from: str, to: str, person: str, link: str, ttl_s: float
) -> tuple[str, str]:
    """The Message-ID and the text of the mail that verifies `to` for `person`."""
    mid = message_id(outbox_id, mail_from)
    hours = ttl_s / 3600
    until = f"{hours:g} hours" if hours >= 1 else f"{ttl_s / 60:g} minutes"
    msg = EmailMessage()
    msg["From"] = mail_from
    msg["To"] = to
    msg["Subject"] = "agentmail: confirm your e-mail address"
    msg["Date"] = email.utils.format_datetime(utcnow())
    msg["Message-ID"] = mid
    msg["Auto-Submitted"] = "auto-generated"  # RFC 3834: no vacation replies to this
    msg.set_content(
        f"Someone logged in to agentmail as {person} added this address.\n"
        "\n"
        "To receive agentmail's e-mail here, open this link and press the button\n"
        "on the page (opening the link alone changes nothing):\n"
        "\n"
        f"{link}\n"
        "\n"
        f"The link works once, for {until}. If you did not ask for this, ignore\n"
        "this mail: the address stays unverified and gets nothing more.\n",
        cte="quoted-printable",  # 7-bit whatever the names in it: stored as text
    )
    return mid, serialise(msg)


# --- a permission request or question --------------------------------------------------

MAX_INPUT_CHARS = 4000  # of the masked tool input shown in a request e-mail


def thread_root(session_id: str, mail_from: str) -> str:
    """The Message-ID every e-mail of a mail session refers to: one thread per
    session in the person's mail client (In-Reply-To and References name it;
    clients thread on a parent they never received, as on one they did)."""
    return f"<session.{session_id}@{domain_of(mail_from)}>"


def subject_tag(alias: str | None, workspace: str) -> str:
    """`[shop.fix-login]`: the workspace's last part and the session's alias, as
    in the session's address (`claude@/srv/shop.fix-login`); either alone when
    the other is missing."""
    place = workspace.rstrip("/").rsplit("/", 1)[-1]
    name = ".".join(p for p in (place, alias or "") if p) or "agentmail"
    return f"[{' '.join(name.split())}]"


@dataclass(frozen=True)
class RequestText:
    """What a request e-mail says, already masked (domain/masking.py)."""

    subject: str
    lines: list[str]  # the plain text, paragraph by paragraph
    shown: str  # the tool input or the question, masked, as a block
    link: str | None


def request_text(
    *,
    kind: str,
    agent: str,
    tool_name: str | None,
    tool_input: JsonObject | None,
    summary: str | None,
    question: str | None,
    options: list[dict[str, Any]] | None,
    alias: str | None,
    workspace: str,
    link: str | None,
) -> RequestText:
    """The words of a request e-mail; the tool input masked as in the web UI
    (again, although the stored input is masked already) and cut at MAX_INPUT_CHARS."""
    tag = subject_tag(alias, workspace)
    if kind == "question":
        subject = f"{tag} Question from {agent}"
        lines = [f"{agent} asks, in {workspace or 'its session'}:"]
        shown = mask_text(question or "")
        labels = [str(o.get("label", "")) for o in options or []]
        if labels:
            shown += "\n\n" + "\n".join(f"{i}. {label}" for i, label in enumerate(labels, 1))
    else:
        subject = f"{tag} Approval: {tool_name} from {agent}"
        lines = [f"{agent} wants to use {tool_name}, in {workspace or 'its session'}:"]
        masked = mask_secrets(tool_input or {})
        shown = mask_text(json.dumps(masked, ensure_ascii=False, indent=2, sort_keys=True))
        if summary:
            lines.append(mask_text(summary))
    if len(shown) > MAX_INPUT_CHARS:
        shown = shown[: MAX_INPUT_CHARS - 1] + "…"
    return RequestText(" ".join(mask_text(subject).split()), lines, shown, link)


@dataclass(frozen=True)
class Personal:
    """What one recipient's copy of an e-mail carries that another's does not
    (services/email_tokens.py): the reply address, its token in References, and
    a request's one-click links."""

    reply_to: str | None = None
    token_reference: str | None = None
    approve_link: str | None = None
    deny_link: str | None = None


def request_links(text: RequestText, personal: Personal) -> list[tuple[str, str]]:
    """The links of a request e-mail, labelled (docs/email.md, "One-click
    links"): this copy's Approve and Deny (each opens a page with one button;
    a question has none: its options, several or free text, are answered on
    the web or by a reply), then Open, the request on the Approvals page."""
    out: list[tuple[str, str]] = []
    if personal.approve_link:
        out.append(("Approve", personal.approve_link))
    if personal.deny_link:
        out.append(("Deny (with a note)", personal.deny_link))
    if text.link:
        out.append(("Open", text.link))
    return out


def request_mail(
    *,
    outbox_id: str,
    mail_from: str,
    to: str,
    session_id: str,
    text: RequestText,
    personal: Personal | None = None,
) -> tuple[str, str]:
    """The Message-ID and text of a request e-mail: text/plain and a sanitised
    HTML alternative saying the same, in the session's thread."""
    personal = personal or Personal()
    mid = message_id(outbox_id, mail_from)
    root = thread_root(session_id, mail_from)
    links = request_links(text, personal)
    if links:
        decide = "\n".join(f"{label}: {url}" for label, url in links)
        link_html = "".join(
            f'<p><a href="{html.escape(url, quote=True)}">{html.escape(label)}</a></p>'
            for label, url in links
        )
    else:
        decide = "Decide in agentmail: the Approvals page, or `agentmail permissions`."
        link_html = f"<p>{html.escape(decide)}</p>"
    plain = "\n\n".join([*text.lines, _indent(text.shown), decide]) + "\n"
    paragraphs = "".join(f"<p>{html.escape(p)}</p>" for p in text.lines)
    body_html = nh3.clean(
        f"{paragraphs}<pre>{html.escape(text.shown)}</pre>{link_html}",
        tags={"p", "pre", "a"},
        attributes={"a": {"href"}},
        url_schemes={"http", "https"},
    )
    msg = EmailMessage()
    msg["From"] = mail_from
    msg["To"] = to
    msg["Subject"] = text.subject
    msg["Date"] = email.utils.format_datetime(utcnow())
    msg["Message-ID"] = mid
    msg["In-Reply-To"] = root
    msg["References"] = " ".join(r for r in (root, personal.token_reference) if r)
    if personal.reply_to:
        msg["Reply-To"] = personal.reply_to
    msg["Auto-Submitted"] = "auto-generated"
    msg.set_content(plain, cte="quoted-printable")
    msg.add_alternative(
        f"<!doctype html><html><body>{body_html}</body></html>",
        subtype="html",
        cte="quoted-printable",
    )
    return mid, serialise(msg)


def _indent(text: str) -> str:
    return "\n".join(f"    {line}" for line in text.splitlines())


# --- an answer to a person's e-mail ----------------------------------------------------

MAX_REFERENCES = 20  # Message-IDs an answer's References carries (the newest)


def answer_mail(
    *,
    outbox_id: str,
    mail_from: str,
    to: str,
    subject: str,
    in_reply_to: str | None,
    references: list[str],
    text: str,
) -> tuple[str, str]:
    """The Message-ID and text of the gateway's answer to a person's e-mail
    (services/email_inbound.py): in its thread (In-Reply-To their Message-ID,
    References theirs and it), marked an automatic reply (RFC 3834) so that no
    vacation notice answers it back."""
    mid = message_id(outbox_id, mail_from)
    bare = " ".join(subject.split())[:200] or "agentmail"
    msg = EmailMessage()
    msg["From"] = mail_from
    msg["To"] = to
    msg["Subject"] = bare if bare.lower().startswith("re:") else f"Re: {bare}"
    msg["Date"] = email.utils.format_datetime(utcnow())
    msg["Message-ID"] = mid
    if in_reply_to:
        msg["In-Reply-To"] = in_reply_to
    refs = [*references, *([in_reply_to] if in_reply_to else [])][-MAX_REFERENCES:]
    if refs:
        msg["References"] = " ".join(dict.fromkeys(refs))
    msg["Auto-Submitted"] = "auto-replied"
    msg.set_content(text, cte="quoted-printable")
    return mid, serialise(msg)


# --- the daily digest ------------------------------------------------------------------


@dataclass(frozen=True)
class DigestSection:
    """One part of a digest: a heading, how many there are, the lines listed
    (each with an optional link); the rest are "and M more"."""

    heading: str
    count: int
    items: list[tuple[str, str | None]]

    @property
    def more(self) -> int:
        return self.count - len(self.items)


def digest_mail(
    *,
    outbox_id: str,
    mail_from: str,
    to: str,
    subject: str,
    intro: str,
    sections: list[DigestSection],
) -> tuple[str, str]:
    """The Message-ID and text of a daily digest (services/email_digest.py):
    text/plain and a sanitised HTML alternative saying the same."""
    mid = message_id(outbox_id, mail_from)
    plain_parts = [intro]
    html_parts = [f"<p>{html.escape(intro)}</p>"]
    for sec in sections:
        lines = [f"- {text}" + (f"\n  Open: {link}" if link else "") for text, link in sec.items]
        if sec.more:
            lines.append(f"and {sec.more} more")
        plain_parts.append(f"{sec.heading}: {sec.count}\n" + "\n".join(lines))
        items = "".join(
            f"<li>{html.escape(text)}"
            + (f' <a href="{html.escape(link, quote=True)}">Open</a>' if link else "")
            + "</li>"
            for text, link in sec.items
        )
        if sec.more:
            items += f"<li>and {sec.more} more</li>"
        html_parts.append(f"<p>{html.escape(sec.heading)}: {sec.count}</p><ul>{items}</ul>")
    body_html = nh3.clean(
        "".join(html_parts),
        tags={"p", "ul", "li", "a"},
        attributes={"a": {"href"}},
        url_schemes={"http", "https"},
    )
    msg = EmailMessage()
    msg["From"] = mail_from
    msg["To"] = to
    msg["Subject"] = " ".join(subject.split())
    msg["Date"] = email.utils.format_datetime(utcnow())
    msg["Message-ID"] = mid
    msg["Auto-Submitted"] = "auto-generated"
    msg.set_content("\n\n".join(plain_parts) + "\n", cte="quoted-printable")
    msg.add_alternative(
        f"<!doctype html><html><body>{body_html}</body></html>",
        subtype="html",
        cte="quoted-printable",
    )
    return mid, serialise(msg)
