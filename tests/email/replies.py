"""Helpers of the reply tests: a team whose request e-mails arrive at the
recording relay, and replies built as a mail client builds them (a new
EmailMessage, Subject "Re: …", In-Reply-To and References of the original, the
original quoted below with `>`), signed with dkimpy when a test asks."""

from __future__ import annotations

import base64
import email.utils
import time
import uuid
from dataclasses import dataclass
from email.message import EmailMessage
from email.policy import SMTP
from typing import Any

import anyio
import dkim
from cryptography.hazmat.primitives import serialization
from cryptography.hazmat.primitives.asymmetric import rsa

from tests.conftest import Api
from tests.email.conftest import link_token
from tests.fakes.smtp_relay import Received, Relay


async def verify(api: Api, relay: Relay, who: str, address: str) -> None:
    """Add `address` for `who` and open its verification link."""
    r = await api.http.post("/api/v1/me/emails", json={"address": address}, headers=api.auth(who))
    assert r.status_code == 201, r.text
    got = await mails_to(relay, address, 1)
    body = got[-1].message.get_body(("plain",))
    assert body is not None
    done = await api.http.post(f"/verify-email/{link_token(body.get_content())}")
    assert done.status_code == 200, done.text


async def mails_to(relay: Relay, address: str, n: int, within_s: float = 10.0) -> list[Received]:
    """The relay's messages to `address` once there are `n` of them."""
    deadline = time.monotonic() + within_s
    while True:
        got = [m for m in relay.messages if m.rcpt_tos == [address]]
        if len(got) >= n:
            return got
        left = deadline - time.monotonic()
        assert left > 0, f"{len(got)} of {n} messages to {address} within {within_s} s"
        await relay.wait_async(len(relay.messages) + 1, left)


async def ask(api: Api, sid: str, command: str = "make deploy", **extra: Any) -> str:
    body = {"session_id": sid, "relay_key": uuid.uuid4().hex, "tool_name": "Bash",
            "tool_input": {"command": command}, **extra}  # fmt: skip
    r = await api.http.post("/api/v1/agent/permissions", json=body, headers=api.auth("agent-a"))
    assert r.status_code == 201, r.text
    rid: str = r.json()["id"]
    return rid


async def request_of(api: Api, rid: str) -> dict[str, Any]:
    """The request as its agent reads it (the API a waiting hook polls)."""
    r = await api.http.get(f"/api/v1/agent/permissions/{rid}", headers=api.auth("agent-a"))
    assert r.status_code == 200, r.text
    out: dict[str, Any] = r.json()
    return out


def quote(text: str) -> str:
    return "\n".join(f"> {line}" if line else ">" for line in text.splitlines())


def reply(
    original: EmailMessage,
    text: str,
    *,
    sender: str = "Ana <ana@example.org>",
    to: str | None = None,
    references: str | None = None,
    headers: dict[str, str] | None = None,
    files: list[tuple[str, str, bytes]] = (),  # type: ignore[assignment]
) -> bytes:
    """A reply to `original`, as a mail client writes it: `text` on top, the
    original quoted below its attribution line."""
    msg = EmailMessage()
    msg["From"] = sender
    msg["To"] = to if to is not None else original["Reply-To"] or original["From"]
    msg["Subject"] = f"Re: {original['Subject']}"
    msg["Date"] = email.utils.formatdate(localtime=True)
    msg["Message-ID"] = email.utils.make_msgid(domain="example.org")
    msg["In-Reply-To"] = original["Message-ID"]
    refs = (
        references
        if references is not None
        else f"{original['References'] or ''} {original['Message-ID']}"
    )
    if refs.strip():
        msg["References"] = refs.strip()
    for name, value in (headers or {}).items():
        msg[name] = value
    plain = original.get_body(("plain",))
    said = plain.get_content() if plain is not None else ""
    when = email.utils.format_datetime(email.utils.parsedate_to_datetime(original["Date"]))
    msg.set_content(f"{text}\n\nOn {when}, agentmail <{original['From']}> wrote:\n{quote(said)}\n")
    for name, ctype, data in files:
        maintype, subtype = ctype.split("/")
        msg.add_attachment(data, maintype=maintype, subtype=subtype, filename=name)
    return msg.as_bytes(policy=SMTP)


@dataclass
class Signer:
    """A DKIM key of a domain, and its TXT record as that domain publishes it."""

    domain: str
    selector: str
    private_pem: bytes
    record: bytes

    def sign(self, raw: bytes) -> bytes:
        header = dkim.sign(
            raw,
            self.selector.encode(),
            self.domain.encode(),
            self.private_pem,
            include_headers=[b"from", b"to", b"subject", b"date", b"message-id", b"references"],
        )
        return bytes(header) + raw


def signer(domain: str, selector: str = "s1") -> Signer:
    key = rsa.generate_private_key(public_exponent=65537, key_size=2048)
    pem = key.private_bytes(
        serialization.Encoding.PEM,
        serialization.PrivateFormat.TraditionalOpenSSL,
        serialization.NoEncryption(),
    )
    der = key.public_key().public_bytes(
        serialization.Encoding.DER, serialization.PublicFormat.SubjectPublicKeyInfo
    )
    return Signer(domain, selector, pem, b"v=DKIM1; k=rsa; p=" + base64.b64encode(der))


class Resolver:
    """The DNS as the tests publish it: TXT records by name (dkimpy's dnsfunc)."""

    def __init__(self) -> None:
        self.txt: dict[str, bytes] = {}
        self.asked: list[str] = []

    def publish(self, s: Signer, record: bytes | None = None) -> None:
        self.txt[f"{s.selector}._domainkey.{s.domain}"] = record or s.record

    def __call__(self, name: bytes, timeout: float = 5) -> bytes | None:
        key = name.decode("ascii").rstrip(".").lower()
        self.asked.append(key)
        return self.txt.get(key)


class Stopped(BaseException):
    """The gateway stopping in the middle of an action (killed, or cancelled by a
    shutdown): not an exception `receive` records as an error, it just ends."""


def once_then_stop(real: Any) -> Any:
    """`real`, which raises Stopped after its first call has done its work (so
    the transaction around it holds that work when the gateway stops)."""
    calls = 0

    async def stopping(*args: Any, **kwargs: Any) -> Any:
        nonlocal calls
        calls += 1
        out = await real(*args, **kwargs)
        if calls == 1:
            raise Stopped
        return out

    return stopping


def all_past_the_look_up(monkeypatch: Any, n: int = 2, within_s: float = 10.0) -> None:
    """Hold each receive() after its look-up of the message's key until `n` have
    made it: every copy then finds no row, and only the unique key in the
    acting transaction can keep a second one from acting."""
    from mailui4agents.services import email_inbound

    real = email_inbound._received_before
    arrived = 0
    everyone = anyio.Event()

    async def held(*args: Any) -> bool:
        nonlocal arrived
        found: bool = await real(*args)
        arrived += 1
        if arrived >= n:
            everyone.set()
        with anyio.fail_after(within_s):
            await everyone.wait()
        return found

    monkeypatch.setattr(email_inbound, "_received_before", held)
