"""The credentials an outgoing e-mail carries to one person (docs/email.md):
its reply address `<local>+<token>@<domain>` (kind `reply`) and, in a request
e-mail, the one-click links (`approve`, `deny`). Each is bound to the person, the
address it was mailed to, and the request or the session it is about; only its
SHA-256 is stored (`email_tokens`).

A token is 160 random bits in lower-case base32 (32 characters of a-z and 2-7):
mail systems may change the case of a local part, and a local part holds at most
64 characters. The token also travels in References as `<t.{token}@{domain}>`,
so a reply whose client dropped the plus part still names it.
"""

from __future__ import annotations

import base64
import re
import secrets
from datetime import datetime

from sqlalchemy import select, update
from sqlalchemy.ext.asyncio import AsyncSession

from mailui4agents.db.reach_tables import EmailTokenRow
from mailui4agents.db.types import utcnow
from mailui4agents.domain.email_address import domain_of
from mailui4agents.services.identity import hash_token

KINDS = frozenset({"reply", "approve", "deny"})
TOKEN_CHARS = 32
_TOKEN = re.compile(rf"[a-z2-7]{{{TOKEN_CHARS}}}")
_IN_REFERENCES = re.compile(rf"<t\.([a-z2-7]{{{TOKEN_CHARS}}})@")


def new_token() -> str:
    return base64.b32encode(secrets.token_bytes(20)).decode("ascii").lower()


def is_token(text: str) -> bool:
    return _TOKEN.fullmatch(text) is not None


async def issue(
    s: AsyncSession,
    *,
    kind: str,
    user_id: str,
    address_id: str | None,
    expires_at: datetime,
    request_id: str | None = None,
    session_id: str | None = None,
    mail_id: str | None = None,
    message_id: str | None = None,
) -> str:
    """A new token (returned once, in clear) stored as its hash in the caller's
    transaction."""
    if kind not in KINDS:
        raise ValueError(f"unknown e-mail token kind {kind!r}")
    token = new_token()
    s.add(
        EmailTokenRow(
            token_hash=hash_token(token),
            kind=kind,
            user_id=user_id,
            address_id=address_id,
            request_id=request_id,
            session_id=session_id,
            mail_id=mail_id,
            message_id=message_id,
            expires_at=expires_at,
        )
    )
    return token


async def find(s: AsyncSession, token: str) -> EmailTokenRow | None:
    """The stored token, used or not, expired or not (the caller says which it
    refuses and why); None for anything that is not a token we issued."""
    token = token.lower()
    if not is_token(token):
        return None
    return (
        await s.execute(select(EmailTokenRow).where(EmailTokenRow.token_hash == hash_token(token)))
    ).scalar_one_or_none()


async def use(s: AsyncSession, row: EmailTokenRow, now: datetime | None = None) -> bool:
    """Mark a token used, once: a conditional UPDATE, so of two racing uses one
    wins (True) and the other gets False."""
    done = await s.execute(
        update(EmailTokenRow)
        .where(EmailTokenRow.id == row.id, EmailTokenRow.used_at.is_(None))
        .values(used_at=now or utcnow())
    )
    return bool(done.rowcount)  # type: ignore[attr-defined]


def reply_address(mail_from: str, token: str) -> str:
    """`agentmail+<token>@example.org` for mail_from `agentmail@example.org`."""
    local, _, domain = mail_from.rpartition("@")
    return f"{local.split('+', 1)[0]}+{token}@{domain}"


def reference(mail_from: str, token: str) -> str:
    """The token as a References entry: `<t.<token>@<domain>>`."""
    return f"<t.{token}@{domain_of(mail_from)}>"


def token_in_address(mail_from: str, address: str) -> str | None:
    """The token of a reply address of this gateway (`<local>+<token>@<domain>`,
    local and domain those of mail_from, compared without case), else None."""
    local, _, domain = address.strip().strip("<>").rpartition("@")
    own_local, _, own_domain = mail_from.rpartition("@")
    base, plus, token = local.partition("+")
    if not plus or base.lower() != own_local.split("+", 1)[0].lower():
        return None
    if domain.lower() != own_domain.lower():
        return None
    token = token.lower()
    return token if is_token(token) else None


def tokens_in_references(text: str) -> list[str]:
    """The tokens named in a References or In-Reply-To header, in order."""
    return _IN_REFERENCES.findall(text.lower())
