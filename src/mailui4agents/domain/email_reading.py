"""Reading an inbound e-mail (docs/email.md, "Replies"): its bytes parsed with the
standard `email` package (policy.default) into the few things the gateway looks
at. Pure, no I/O. Nothing in it is trusted: every header may be forged, and
services/email_inbound.py checks each against what the gateway issued.

The text of the body is the text/plain part, else the text/html part made text
with a real HTML parser (never a regular expression): block elements end lines,
`script` and `style` are dropped, and what a `blockquote` or a client's quote
container holds (Gmail's `gmail_quote`, Outlook's `divRplyFwdMsg`, Yahoo's
`yahoo_quoted`) comes out quoted with `> `, as in plain text.
"""

from __future__ import annotations

import email
import email.policy
import email.utils
import re
from dataclasses import dataclass, field
from email.message import EmailMessage, Message
from html.parser import HTMLParser

from mailui4agents.domain.email_parts import InboundFile

MAX_HEADER_CHARS = 8000  # of References, In-Reply-To or a recipient header looked at
MAX_SUBJECT_CHARS = 300
MAX_FILES = 20  # attachments of one e-mail kept; more: the e-mail is refused
_MESSAGE_ID = re.compile(r"<([^<>\s]{1,296})>")
_AUTO_PRECEDENCE = {"bulk", "auto_reply", "junk", "list"}


class Malformed(ValueError):
    """Not an e-mail the gateway can read (the message says what)."""


@dataclass(frozen=True)
class Inbound:
    """What the gateway reads of one e-mail."""

    message_id: str | None  # `<…>`, as written (case kept), None when absent or odd
    from_headers: int  # how many From headers it has
    from_addresses: list[str]  # the addr-specs of its From header(s), as written
    recipients: list[str]  # of To, Cc, Delivered-To, X-Original-To, in that order
    references: str  # References then In-Reply-To, as one text
    subject: str
    auto: bool  # an auto-reply, a list or bulk mail (RFC 3834): never acted on
    text: str  # the body as text (see the module text)
    files: list[InboundFile] = field(default_factory=list)


def parse(raw: bytes) -> EmailMessage:
    """The message; Malformed when the `email` package cannot read it at all."""
    try:
        msg = email.message_from_bytes(raw, policy=email.policy.default)
    except Exception as exc:  # the parser is lenient; whatever it still raises
        raise Malformed(f"not readable as an e-mail: {exc!r}") from None
    assert isinstance(msg, EmailMessage)
    return msg


def _header(msg: Message, name: str) -> list[str]:
    return [str(v)[:MAX_HEADER_CHARS] for v in msg.get_all(name, [])]


def normal_message_id(value: str | None) -> str | None:
    """The `<…>` of a Message-ID header, else None."""
    if not value:
        return None
    found = _MESSAGE_ID.search(value)
    return f"<{found.group(1)}>" if found else None


def is_auto(msg: Message) -> bool:
    """An auto-reply, a vacation notice, a list or bulk mail (RFC 3834)."""
    auto = " ".join(_header(msg, "Auto-Submitted")).strip().lower()
    if auto and auto.split(";", 1)[0].strip() != "no":
        return True
    precedence = " ".join(_header(msg, "Precedence")).strip().lower()
    if precedence in _AUTO_PRECEDENCE:
        return True
    return any(msg.get(h) is not None for h in ("X-Autoreply", "X-Autorespond"))


def read(raw: bytes) -> Inbound:
    """The parts of `raw` the gateway looks at; Malformed when it cannot."""
    msg = parse(raw)
    try:
        froms = _header(msg, "From")
        addresses = [a for _, a in email.utils.getaddresses(froms)]
        recipients = [
            a
            for name in ("To", "Cc", "Delivered-To", "X-Original-To")
            for _, a in email.utils.getaddresses(_header(msg, name))
            if a
        ]
        references = " ".join(_header(msg, "References") + _header(msg, "In-Reply-To"))
        subject = " ".join(" ".join(_header(msg, "Subject")).split())[:MAX_SUBJECT_CHARS]
        mid = normal_message_id(" ".join(_header(msg, "Message-ID")))
        return Inbound(
            message_id=mid,
            from_headers=len(froms),
            from_addresses=addresses,
            recipients=recipients,
            references=references,
            subject=subject,
            auto=is_auto(msg),
            text=body_text(msg),
            files=attachments(msg),
        )
    except Malformed:
        raise
    except Exception as exc:  # a header or part the parser chokes on
        raise Malformed(f"not readable as an e-mail: {exc!r}") from None


def _content(part: EmailMessage) -> str:
    try:
        content = part.get_content()
    except (LookupError, UnicodeError, ValueError):  # an unknown or lying charset
        payload = part.get_payload(decode=True)
        content = payload.decode("utf-8", "replace") if isinstance(payload, bytes) else ""
    return content if isinstance(content, str) else ""


def body_text(msg: EmailMessage) -> str:
    """The text of the body: text/plain, else text/html as text, else ""."""
    part = msg.get_body(preferencelist=("plain", "html"))
    if not isinstance(part, EmailMessage):
        return ""
    content = _content(part)
    if part.get_content_type() == "text/html":
        return html_text(content)
    return content


def attachments(msg: EmailMessage) -> list[InboundFile]:
    """The attached files, in order; Malformed over MAX_FILES."""
    out: list[InboundFile] = []
    for part in msg.iter_attachments():
        if not isinstance(part, EmailMessage) or part.is_multipart():
            continue
        data = part.get_payload(decode=True)
        if not isinstance(data, bytes):
            continue
        if len(out) == MAX_FILES:
            raise Malformed(f"more than {MAX_FILES} attachments")
        name = part.get_filename() or "attachment"
        out.append(InboundFile(name=name, content_type=part.get_content_type(), data=data))
    return out


# --- HTML as text ----------------------------------------------------------------------

_BLOCK = {
    "address", "article", "aside", "blockquote", "br", "dd", "div", "dl", "dt", "footer",
    "h1", "h2", "h3", "h4", "h5", "h6", "header", "hr", "li", "ol", "p", "pre", "section",
    "table", "tbody", "td", "th", "thead", "tr", "ul",
}  # fmt: skip
_VOID = {"area", "base", "br", "col", "embed", "hr", "img", "input", "link", "meta", "param",
         "source", "track", "wbr"}  # fmt: skip
_HIDDEN = {"script", "style", "head", "title", "template"}
_QUOTE_MARKS = ("gmail_quote", "yahoo_quoted", "divrplyfwdmsg", "moz-cite-prefix", "appendonsend")


class _Text(HTMLParser):
    def __init__(self) -> None:
        super().__init__(convert_charrefs=True)
        self.lines: list[str] = []
        self._line: list[str] = []
        self._stack: list[tuple[str, bool, bool]] = []  # tag, quotes, hides
        self._depth = 0
        self._hidden = 0
        self._pre = 0

    def _flush(self) -> None:
        text = "".join(self._line)
        self._line = []
        if self._pre:
            parts = text.split("\n")
        else:
            parts = [" ".join(text.split())]
        for part in parts:
            self.lines.append(("> " * self._depth) + part if part.strip() else "")

    def handle_starttag(self, tag: str, attrs: list[tuple[str, str | None]]) -> None:
        if tag in _BLOCK:
            self._flush()
        if tag in _VOID:
            return
        marks = " ".join(v or "" for k, v in attrs if k in ("class", "id", "type")).lower()
        quotes = tag == "blockquote" or any(m in marks for m in _QUOTE_MARKS)
        hides = tag in _HIDDEN
        self._stack.append((tag, quotes, hides))
        self._depth += quotes
        self._hidden += hides
        self._pre += tag == "pre"

    def handle_startendtag(self, tag: str, attrs: list[tuple[str, str | None]]) -> None:
        if tag in _BLOCK:
            self._flush()

    def handle_endtag(self, tag: str) -> None:
        if not any(t == tag for t, _, _ in self._stack):
            return  # a stray end tag
        if tag in _BLOCK:
            self._flush()
        while self._stack:
            t, quotes, hides = self._stack.pop()
            self._depth -= quotes
            self._hidden -= hides
            self._pre -= t == "pre"
            if t == tag:
                break

    def handle_data(self, data: str) -> None:
        if not self._hidden:
            self._line.append(data)


def html_text(markup: str) -> str:
    """An HTML body as plain text, quotes marked `> ` (see the module text)."""
    parser = _Text()
    parser.feed(markup)
    parser.close()
    parser._flush()
    return "\n".join(parser.lines).strip("\n")
