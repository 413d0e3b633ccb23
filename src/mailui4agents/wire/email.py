"""E-mail shapes (docs/api.md, "E-mail addresses"): a person's addresses and the
e-mail sender's counters."""

from __future__ import annotations

from pydantic import Field

from mailui4agents.wire.models import Lenient, Timestamp


class MailOutcome(Lenient):
    """The last e-mail the gateway queued to an address and what became of it:
    `state` queued | sending | handed | sent | failed | unknown; `status_code` and
    `detail`: the relay's answer (or why there was none)."""

    kind: str
    state: str
    status_code: int | None = None
    detail: str | None = None
    message_id: str
    queued_at: Timestamp
    done_at: Timestamp | None = None


class EmailAddressOut(Lenient):
    """One of your addresses. It counts (gets mail) only once `verified`."""

    id: str
    address: str
    verified: bool
    verified_at: Timestamp | None = None
    verify_expires_at: Timestamp | None = None
    created_at: Timestamp
    last_mail: MailOutcome | None = None


class EmailRemoved(Lenient):
    """The id of the address just removed."""

    removed: str


class EmailStatsOut(Lenient):
    """`counts`: this process's outcomes since it started; `queue`: the outbox
    rows in each state, all replicas together (final ones kept a day);
    `inbound`: this process's outcomes of e-mail that came in
    (services/email_inbound.py)."""

    configured: bool
    relay: str | None = None
    counts: dict[str, int]
    queue: dict[str, int]
    inbound: dict[str, int] = Field(default_factory=dict)


class WorkspaceAliasOut(Lenient):
    """A workspace alias the admin keeps for new work by e-mail: a mail to
    `<agent>+<alias>@<domain>` starts a session in `workspace` (docs/email.md,
    "New work by e-mail"). `created_by`: the admin who set it (None once that
    user is gone)."""

    alias: str
    workspace: str
    created_by: str | None = None
    created_at: Timestamp


class WorkspaceAliasRemoved(Lenient):
    """The alias just removed."""

    removed: str
