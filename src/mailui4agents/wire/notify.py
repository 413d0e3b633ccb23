"""Notification policy shapes (docs/remote.md, "Notification policy"): what a
person's own policy is, and what a page's presence beacon stored."""

from __future__ import annotations

from typing import Literal

from mailui4agents.wire.models import Lenient, Timestamp


class NotifyPolicyOut(Lenient):
    """The caller's policy (the defaults when never set). `quiet_start`/`quiet_end`:
    "HH:MM" wall-clock times in `timezone` (both or neither); the `*_after_min`
    fields are minutes, null: never."""

    push: bool = True
    email: bool = True
    email_mail: bool = True
    push_content: Literal["preview", "none"] = "preview"
    skip_when_visible: bool = True
    quiet_start: str | None = None
    quiet_end: str | None = None
    timezone: str = "UTC"
    remind_after_min: int | None = None
    escalate_after_min: int | None = None
    email_digest_hour: int | None = None  # the daily digest's local hour 0-23; null: none


class PresenceOut(Lenient):
    """Until when a push to the caller counts as seen on a page (null: not)."""

    visible_until: Timestamp | None = None
