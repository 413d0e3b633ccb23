"""The audit trail: one row per decision on a tool call or a question, as it was
made (docs/audit.md). Rows are only ever inserted (services/audit.py); migration
0022 makes the database refuse an UPDATE or a DELETE of one.

No foreign keys: a decision stays recorded whatever becomes of its request,
session or agent."""

from __future__ import annotations

from datetime import datetime

from sqlalchemy import BigInteger, Index, String, Text
from sqlalchemy.orm import Mapped, mapped_column

from mailui4agents.db.base import Base
from mailui4agents.db.types import SerialId, UTCDateTime


class AuditRow(Base):
    """Who or what decided (actor_kind + actor, through channel and device), what
    (outcome), on which request in which session, when (`at`), in which mode and
    enforcement, and how long the agent waited."""

    __tablename__ = "audit_decisions"
    __table_args__ = (
        # The filters of a page newest first (services/audit.py, `page_of`).
        Index("ix_audit_decisions_session_id_id", "session_id", "id"),
        Index("ix_audit_decisions_agent_name_id", "agent_name", "id"),
        Index("ix_audit_decisions_actor_id", "actor", "id"),
        Index("ix_audit_decisions_at", "at"),
    )
    # Orders the trail and is the cursor of its pages.
    id: Mapped[int] = mapped_column(SerialId, primary_key=True, autoincrement=True)
    at: Mapped[datetime] = mapped_column(UTCDateTime)  # when it was decided
    asked_at: Mapped[datetime] = mapped_column(UTCDateTime)  # when the agent asked
    # The request decided; NULL when the mode answered and no request was written.
    request_id: Mapped[str | None] = mapped_column(String(36), nullable=True)
    session_id: Mapped[str] = mapped_column(String(36))
    agent_name: Mapped[str] = mapped_column(String(200))
    kind: Mapped[str] = mapped_column(String(20))  # approval | question
    tool_name: Mapped[str | None] = mapped_column(String(200), nullable=True)
    # What was asked, on one line, masked (domain/masking.py), at most 200 characters.
    summary: Mapped[str | None] = mapped_column(Text, nullable=True)
    # approved | denied | answered | expired | cancelled | withdrawn | mode_allows
    # | mode_forbids | no_human (services/audit.py OUTCOMES).
    outcome: Mapped[str] = mapped_column(String(20))
    # person | rule | grant | mode | sandbox | timeout | terminal | system.
    actor_kind: Mapped[str] = mapped_column(String(10))
    # The person's or the agent's name, the rule's or the grant's id; NULL for
    # the gateway's own (a timeout, the mode, the sandbox).
    actor: Mapped[str | None] = mapped_column(String(200), nullable=True)
    channel: Mapped[str | None] = mapped_column(String(10), nullable=True)
    device: Mapped[str | None] = mapped_column(String(200), nullable=True)
    # The session's mode and enforcement at that moment.
    permission_mode: Mapped[str | None] = mapped_column(String(20), nullable=True)
    enforcement: Mapped[str | None] = mapped_column(String(20), nullable=True)
    waited_ms: Mapped[int] = mapped_column(BigInteger)
    reason: Mapped[str | None] = mapped_column(Text, nullable=True)
