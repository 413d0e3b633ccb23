"""The names of the live events, in one place (docs/api.md, "Events (SSE)").

`EventType` is a `StrEnum`: each member equals its wire string, so stored rows,
SSE frames and comparisons with plain strings keep working unchanged.
"""

from __future__ import annotations

from enum import StrEnum


class EventType(StrEnum):
    NEW_MAIL = "new_mail"
    """A mail was delivered to you; the data is the mail's delivery fields."""
    SESSION_UPDATE = "session_update"
    """A session you take part in or decide in changed (SessionOut as you see it)."""
    PERMISSION_REQUEST = "permission_request"
    """An agent asks you, a decider of its session, to approve or answer."""
    PERMISSION_DECISION = "permission_decision"
    """A request was decided, expired or cancelled."""
    WORK_ACTION = "work_action"
    """An owner asked the agent's bridge to merge, discard or keep a session's
    worktree (to the agent); the bridge answered it (to the person who asked)."""
    RESET = "reset"
    """The stream skipped events you may have missed: read your inbox again."""
