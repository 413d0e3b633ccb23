"""The tables of rules before the human (docs/rules.md): rules people write,
the switches of the built-in rules, and accepted rule files."""

from __future__ import annotations

from datetime import datetime

from sqlalchemy import Boolean, ForeignKey, Index, String, Text
from sqlalchemy.orm import Mapped, mapped_column

from mailui4agents.db.base import Base, new_id
from mailui4agents.db.types import UTCDateTime, utcnow


class RuleRow(Base):
    """A rule: `effect` allow|deny|ask for `tool_name` (and `pattern`, the grant
    syntax) in one session, a workspace or everywhere (`scope`). `source` is
    "api" or "file": a rule of an accepted `.agentmail/rules.toml`
    (RuleFileRow; `file_sha256` is the content it came from)."""

    __tablename__ = "rules"
    __table_args__ = (
        Index("ix_rules_tool_name_scope", "tool_name", "scope"),
        Index("ix_rules_session_id", "session_id"),
        Index("ix_rules_workspace", "workspace"),
        Index("ix_rules_author", "author"),
    )
    id: Mapped[str] = mapped_column(String(36), primary_key=True, default=new_id)
    effect: Mapped[str] = mapped_column(String(10))
    tool_name: Mapped[str] = mapped_column(String(200))
    pattern: Mapped[str | None] = mapped_column(Text, nullable=True)
    scope: Mapped[str] = mapped_column(String(10))
    session_id: Mapped[str | None] = mapped_column(
        ForeignKey("sessions.id", ondelete="CASCADE"), nullable=True
    )
    workspace: Mapped[str | None] = mapped_column(Text, nullable=True)
    author: Mapped[str] = mapped_column(String(200))
    reason: Mapped[str | None] = mapped_column(Text, nullable=True)
    enabled: Mapped[bool] = mapped_column(Boolean, default=True)
    source: Mapped[str] = mapped_column(String(10), default="api")
    file_sha256: Mapped[str | None] = mapped_column(String(64), nullable=True)
    created_at: Mapped[datetime] = mapped_column(UTCDateTime, default=utcnow)


class BuiltinRuleSwitchRow(Base):
    """A built-in rule (domain/rules.BUILTINS) an admin switched: no row means
    on, so a built-in added by an upgrade is on without a migration."""

    __tablename__ = "builtin_rule_switches"
    id: Mapped[str] = mapped_column(String(40), primary_key=True)
    enabled: Mapped[bool] = mapped_column(Boolean)
    changed_by: Mapped[str] = mapped_column(String(200))
    changed_at: Mapped[datetime] = mapped_column(UTCDateTime, default=utcnow)


class RuleFileRow(Base):
    """The accepted content of a workspace's `.agentmail/rules.toml`: accepted by
    a person (`accepted_by`) for exactly this SHA-256. One per workspace."""

    __tablename__ = "rule_files"
    workspace: Mapped[str] = mapped_column(Text, primary_key=True)
    sha256: Mapped[str] = mapped_column(String(64))
    content: Mapped[str] = mapped_column(Text)
    accepted_by: Mapped[str] = mapped_column(String(200))
    accepted_at: Mapped[datetime] = mapped_column(UTCDateTime, default=utcnow)
