"""Shapes of rules before the human (docs/api.md, "Rules"; docs/rules.md)."""

from __future__ import annotations

from mailui4agents.wire.models import Lenient, Timestamp


class RuleOut(Lenient):
    """A rule. `builtin`: one of the built-in deny rules (id `builtin-…`; only
    `enabled` changes). `source`: "api", "file" (from an accepted
    `.agentmail/rules.toml`) or "builtin". `covers` says the pattern in words."""

    id: str
    effect: str
    tool_name: str
    pattern: str | None = None
    scope: str
    session_id: str | None = None
    workspace: str | None = None
    author: str
    reason: str | None = None
    enabled: bool = True
    builtin: bool = False
    source: str = "api"
    covers: str | None = None
    created_at: Timestamp | None = None


class RuleFileOut(Lenient):
    """The accepted `.agentmail/rules.toml` of a workspace."""

    workspace: str
    sha256: str
    accepted_by: str
    accepted_at: Timestamp
    rules: list[RuleOut]
