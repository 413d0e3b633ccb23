"""Send budgets and hop limits: what keeps agents from talking forever
(docs/behaviour.md#replies-relays-budgets-loops).

Two agents that auto-reply to each other once thanked each other for six rounds.
The hop limit stops relay chains; the budget bounds what one agent may send in a
session between two human interventions.
"""

from __future__ import annotations

from sqlalchemy import and_, exists, func, select
from sqlalchemy.ext.asyncio import AsyncSession

from mailui4agents.db.tables import MailRow, RecipientRow, SessionRow
from mailui4agents.domain.errors import Conflict
from mailui4agents.domain.mail_types import BUDGETED, MailType
from mailui4agents.services.principals import Principal
from mailui4agents.settings import Settings


def work_cap(settings: Settings) -> int:
    """The `work` mails one agent may send in a session between two human mails."""
    return 2 * settings.send_budget


async def _check_work_cap(
    s: AsyncSession, settings: Settings, sender: Principal, session: SessionRow
) -> None:
    since = await _last_human_seq(s, session.id)
    n = await s.scalar(
        select(func.count(MailRow.seq)).where(
            MailRow.session_id == session.id,
            MailRow.from_name == sender.name,
            MailRow.seq > since,
            MailRow.type == MailType.WORK,
        )
    )
    cap = work_cap(settings)
    if int(n or 0) >= cap:
        raise Conflict(
            f"'{sender.name}' sent {cap} work mails in session '{session.alias}' since a "
            "person last wrote there (twice the send budget); a human's mail opens a new count",
            code="budget_exhausted",
            budget=cap,
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
            MailRow.type.in_(BUDGETED),
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
            MailRow.type == MailType.MESSAGE,
        )
    )
    n = await s.scalar(
        select(func.count(MailRow.seq)).where(
            MailRow.session_id == session_id,
            MailRow.relay.is_(True),
            MailRow.seq > (last_plain or 0),
            # A bridge's record of a turn's diff is no hop (docs/review.md).
            MailRow.type != MailType.WORK,
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
    type_: MailType = MailType.MESSAGE,
) -> None:
    """Refuse (Conflict) a send over the hop limit or the budget. Nothing is written
    before this check, so a refused relay keeps its key free for a later retry.
    A `work` mail (a turn's diff, docs/review.md) is neither a hop nor budgeted:
    it goes with the turn's relay, which is counted. It has a cap of its own,
    `work_cap`: one per turn would never come near it, a flood does."""
    if sender.kind != "agent":
        return
    if type_ == MailType.WORK:
        await _check_work_cap(s, settings, sender, session)
        return
    if relay and await trailing_relays(s, session.id) >= session.hop_limit:
        raise Conflict(
            f"session '{session.alias}' reached its hop limit of {session.hop_limit} "
            "relays in a row; it continues when someone writes a message of their own",
            code="hop_limit",
            hop_limit=session.hop_limit,
        )
    if not counts_toward_budget(relay, recipients_human):
        return
    used = await budget_used(s, sender.name, session.id)
    if used >= settings.send_budget:
        raise Conflict(
            f"'{sender.name}' used its budget of {settings.send_budget} sends in session "
            f"'{session.alias}'; a human's mail there opens a new budget",
            code="budget_exhausted",
            budget=settings.send_budget,
        )
