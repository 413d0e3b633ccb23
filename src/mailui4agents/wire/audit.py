"""The audit trail's shapes (docs/api.md, "Audit trail"; docs/audit.md)."""

from __future__ import annotations

from mailui4agents.wire.models import Lenient, Timestamp


class AuditActor(Lenient):
    """Who or what decided: `kind` person | rule | grant | mode | sandbox | timeout
    | terminal | system; `name` a person's, the agent's (terminal) or the mode's;
    `id` a rule's or a grant's; where a person decided from: `channel` (web,
    api, cli, push, email…) and the paired `device`."""

    kind: str
    name: str | None = None
    id: str | None = None
    channel: str | None = None
    device: str | None = None


class AuditOut(Lenient):
    """One decision. `id` orders the trail (newest is highest). `request_id` is
    null when the mode answered without a request. `summary` (what was asked,
    masked, one line) is shown to the session's deciders only, like the request's
    input (docs/behaviour.md, "Who sees a request's input"); null for others."""

    id: int
    request_id: str | None = None
    session_id: str
    agent: str
    kind: str
    tool_name: str | None = None
    summary: str | None = None
    outcome: str
    decided_by: AuditActor
    permission_mode: str | None = None
    enforcement: str | None = None
    asked_at: Timestamp
    decided_at: Timestamp
    waited_ms: int
    reason: str | None = None
