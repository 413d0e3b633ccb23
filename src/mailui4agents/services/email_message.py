"""The e-mail the gateway writes (docs/email.md): whole RFC 5322 messages, made
once when queued, so every retry sends the same bytes with the same Message-ID.

A Message-ID is `<{outbox row id}@{domain of mail_from}>`: unique (a UUID),
stable (stored with the row), and on a domain the gateway speaks for.
"""

from __future__ import annotations

import email.policy
import email.utils
from email.message import EmailMessage

from mailui4agents.db.types import utcnow
from mailui4agents.domain.email_address import domain_of


def message_id(outbox_id: str, mail_from: str) -> str:
    """The Message-ID header of the outbox row `outbox_id`, angle brackets included."""
    return f"<{outbox_id}@{domain_of(mail_from)}>"


def serialise(msg: EmailMessage) -> str:
    """The message as SMTP sends it (CRLF line ends); 7-bit, so it is stored as text.
    Non-ASCII bodies go as quoted-printable or base64, headers RFC 2047-encoded."""
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
        "this mail: the address stays unverified and gets nothing more.\n"
    )
    return mid, serialise(msg)
