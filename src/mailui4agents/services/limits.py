"""Send budgets and hop limits: what keeps agents from talking forever (SPEC §6).

Two agents that auto-reply to each other once thanked each other for six rounds.
The hop limit stops relay chains; the budget bounds what one agent may send in a
session between two human interventions.
"""

from __future__ import annotations

from sqlalchemy import and_, exists, func, select
from sqlalchemy.ext.asyncio import AsyncSession

from mailui4agents.db.tables import MailRow, RecipientRow, SessionRow
from mailui4agents.domain.relay_keys import RELAY_KEY_MAX_BYTES
from mailui4agents.errors import ApiError
from mailui4agents.services.principals import Principal
from mailui4agents.settings import Settings


def check_relay_key(key: str) -> None:
    """A relay key fits in RELAY_KEY_MAX_BYTES (clients shorten longer ones with
    clamp_relay_key); refused with 400 otherwise."""
    size = len(key.encode())
    if size > RELAY_KEY_MAX_BYTES:
        raise ApiError(
            400,
            "relay_key_too_long",
            f"relay_key is {size} bytes; at most {RELAY_KEY_MAX_BYTES} "
            "(clients shorten long keys with ':sha256:<hex>')",
            field="relay_key",
        )


def counts_toward_budget(relay: bool, recipients_human: list[bool]) -> bool:
    """Relays to humans are free (they are answers); everything else counts,
    relays to agents included."""
    return not (relay and recipients_human and all(recipients_human))


async def _last_human_seq(s: AsyncSession, session_id: str) -> int:
    seq = await s.scalar(
        select(func.max(MailRow.seq)).where(
            MailRow.session_id == session_id, MailRow.from_human.is_(True)
        )
    )
    return int(seq or 0)


async def budget_used(s: AsyncSession, agent: str, session_id: str) -> int:
    """The agent's counted sends in the session since the last human mail there.

    A human's mail opens a new budget: the budget bounds an agent's autonomy
    between interventions, and a refused send can succeed after a human replies.
    """
    since = await _last_human_seq(s, session_id)
    to_an_agent = exists().where(
        RecipientRow.mail_seq == MailRow.seq, RecipientRow.is_human.is_(False)
    )
    free = and_(MailRow.relay.is_(True), ~to_an_agent)
    n = await s.scalar(
        select(func.count(MailRow.seq)).where(
            MailRow.session_id == session_id,
            MailRow.from_name == agent,
            MailRow.seq > since,
            MailRow.type.in_(("message", "relay")),
            ~free,
        )
    )
    return int(n or 0)


async def trailing_relays(s: AsyncSession, session_id: str) -> int:
    """The length of the run of relay mails at the end of the session. Any
    non-relay message (a human, or an agent writing on its own) ends the run."""
    last_plain = await s.scalar(
        select(func.max(MailRow.seq)).where(
            MailRow.session_id == session_id,
            MailRow.relay.is_(False),
            MailRow.type == "message",
        )
    )
    n = await s.scalar(
        select(func.count(MailRow.seq)).where(
            MailRow.session_id == session_id,
            MailRow.relay.is_(True),
            MailRow.seq > (last_plain or 0),
        )
    )
    return int(n or 0)


async def check_send(
    s: AsyncSession,
    settings: Settings,
    sender: Principal,
    session: SessionRow,
    relay: bool,
    recipients_human: list[bool],
) -> None:
    """Refuse (409) a send over the hop limit or the budget. Nothing is written
    before this check, so a refused relay keeps its key free for a later retry."""
    if sender.kind != "agent":
        return
    if relay and await trailing_relays(s, session.id) >= session.hop_limit:
        raise ApiError(
            409,
            "hop_limit",
            f"session '{session.alias}' reached its hop limit of {session.hop_limit} "
            "relays in a row; it continues when someone writes a message of their own",
            hop_limit=session.hop_limit,
        )
    if not counts_toward_budget(relay, recipients_human):
        return
    used = await budget_used(s, sender.name, session.id)
    if used >= settings.send_budget:
        raise ApiError(
            409,
            "budget_exhausted",
            f"'{sender.name}' used its budget of {settings.send_budget} sends in session "
            f"'{session.alias}'; a human's mail there opens a new budget",
            budget=settings.send_budget,
        )
