"""The builder of a mail's message (services/email_mail.py) on its own: 7-bit
whatever the names and text, no line that an mbox would have to quote, the
References bound, a file past the cap named without a link when there is no
public_url, an odd content type sent as octet-stream."""

from __future__ import annotations

import email
import email.policy
from datetime import UTC, datetime
from email.message import EmailMessage

from mailui4agents.services import email_mail

MAIL_FROM = "agentmail@gw.test"


def mail(**extra: object) -> email_mail.ThreadMail:
    values: dict[str, object] = {
        "mail_id": "m-1",
        "session_id": "s-1",
        "from_name": "José",
        "subject": "Ré: ça marche",
        "body": "From the start:\nFrom here on ✓\n\n> From quoted\n",
        "created_at": datetime(2026, 12, 2, 10, 0, tzinfo=UTC),
        "alias": "fix-login",
        "workspace": "/srv/shop",
        "to": ["ana"],
        **extra,
    }
    return email_mail.ThreadMail(**values)  # type: ignore[arg-type]


def parse(text: str) -> EmailMessage:
    msg = email.message_from_bytes(text.encode("ascii"), policy=email.policy.default)
    assert isinstance(msg, EmailMessage)
    return msg


def test_the_message_is_7_bit_and_mbox_safe_and_reads_back_the_same() -> None:
    files = [email_mail.File("a-1", "résumé.pdf", "application/pdf", 3, "0" * 64)]
    text = email_mail.to_text(
        email_mail.build(
            mail(files=files),
            mail_from=MAIL_FROM,
            contents={"a-1": b"\x00\x01\xff"},
            public_url=None,
        )
    )
    assert text.isascii()
    assert "\r\nFrom " not in text and not text.startswith("From ")
    msg = parse(text)
    assert msg["Subject"] == "[shop.fix-login] Ré: ça marche"
    assert msg["From"].addresses[0].display_name == "José"
    assert msg["Date"] == "Wed, 02 Dec 2026 10:00:00 +0000"
    body = msg.get_body(("plain",))
    assert body is not None
    assert (
        body.get_content().replace("\r\n", "\n")
        == "From the start:\nFrom here on ✓\n\n> From quoted\n"
    )
    [part] = list(msg.iter_attachments())
    assert part.get_filename() == "résumé.pdf" and part.get_content() == b"\x00\x01\xff"
    assert part.get_content_type() == "application/pdf"


def test_references_are_bounded_and_keep_the_nearest() -> None:
    chain = [f"p{i}" for i in range(50)]  # p0 the parent, p49 the oldest
    msg = email_mail.build(mail(ancestors=chain), mail_from=MAIL_FROM, contents={}, public_url=None)
    refs = str(msg["References"]).split()
    assert len(refs) == email_mail.MAX_REFERENCES
    assert refs[0] == "<session.s-1@gw.test>"
    assert refs[-1] == "<mail.p0@gw.test>" and refs[1] == "<mail.p18@gw.test>"
    assert msg["In-Reply-To"] == "<mail.p0@gw.test>"


def test_a_file_left_out_is_named_and_an_odd_type_is_octet_stream() -> None:
    files = [
        email_mail.File("a-1", "x.bin", "not a type; really", 4, "0" * 64),
        email_mail.File("a-2", "big.iso", "application/x-iso9660-image", 10**9, "1" * 64),
    ]
    assert [f.attachment_id for f in email_mail.carried(files, 100)] == ["a-1"]
    assert email_mail.carried(files, 0) == []
    msg = parse(
        email_mail.to_text(
            email_mail.build(
                mail(files=files),
                mail_from=MAIL_FROM,
                contents={"a-1": b"data"},
                public_url=None,
            )
        )
    )
    [part] = list(msg.iter_attachments())
    assert part.get_content_type() == "application/octet-stream"
    body = msg.get_body(("plain",))
    assert body is not None
    assert f"- big.iso ({10**9} bytes): in agentmail" in body.get_content()


def test_message_ids_without_mail_from() -> None:
    assert email_mail.export_from(None, "https://mail.example.org/gw") == (
        "agentmail@mail.example.org"
    )
    assert email_mail.export_from(None, None) == "agentmail@agentmail.invalid"
    assert email_mail.export_from(MAIL_FROM, "https://x.example") == MAIL_FROM
