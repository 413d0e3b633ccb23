"""Gateway settings: one typed object, built by the CLI or a test, never at import time."""

from __future__ import annotations

import os
from pathlib import Path

from pydantic import BaseModel, ConfigDict, Field, SecretStr, field_validator, model_validator

MIN_SCRAPE_TOKEN = 16
# Settings that were read once and are gone: set, they stop the start rather
# than be ignored (from_env).
GONE = {
    "AGENTMAIL_METRICS_PUBLIC": "/metrics is never open to anonymous callers: give the "
    "scraper a token with AGENTMAIL_METRICS_TOKEN (docs/metrics.md)",
}


class Settings(BaseModel):
    """Everything the gateway can be told. Each field says what it is for."""

    model_config = ConfigDict(extra="forbid", frozen=True)

    data_dir: Path = Field(
        default=Path("./agentmail-data"),
        description="Directory for the SQLite database and blobs.",
    )
    database_url: str | None = Field(
        default=None,
        description="SQLAlchemy URL; None means SQLite at <data_dir>/agentmail.db. "
        "postgresql://… is rewritten to postgresql+asyncpg://….",
    )
    admin_password: str | None = Field(
        default=None,
        description="Password of the first admin created on an empty database; "
        "generated and printed once when unset.",
    )
    session_rate_limit: int = Field(
        default=30, ge=1, description="Sessions one sender may create per window."
    )
    session_rate_window_s: float = Field(
        default=60.0, gt=0, description="Length of the session-creation rate window."
    )
    sse_ping_s: float = Field(
        default=15.0, gt=0, description="Seconds between SSE keep-alive comments."
    )
    sse_batch: int = Field(
        default=500, ge=1, description="Most events read from the log in one query."
    )
    event_retention_days: int = Field(
        default=30,
        ge=0,
        le=3650,
        description="Events older than this many days are compacted by the hourly sweep; "
        "a stream that resumes from before that window gets `reset` (catch up from the "
        "inbox), never a silent gap. 0 keeps every event.",
    )
    read_log_retention_days: int = Field(
        default=90,
        ge=0,
        le=36500,
        description="Rows of the read log (who read which mail, when) older than this many "
        "days are deleted by the hourly sweep. 0 keeps them all.",
    )
    request_retention_days: int = Field(
        default=365,
        ge=0,
        le=36500,
        description="Finished permission requests (decided, expired or cancelled) whose "
        "deadline is older than this many days are deleted by the hourly sweep, with their "
        "deliveries; the audit log and the thread's mail keep them. 0 keeps them all.",
    )
    sse_queue_max: int = Field(
        default=1000,
        ge=1,
        description="Events one stream may have waiting in memory; a stream whose "
        "client falls further behind drops them and re-reads the log.",
    )
    sse_token_recheck_s: float = Field(
        default=15.0,
        gt=0,
        description="Seconds between re-checks of an open stream's token (revocations "
        "in this process re-check at once; expiry ends the stream at its time; the "
        "timer covers revocations made by another gateway process).",
    )
    login_window_s: float = Field(
        default=900.0, gt=0, description="Sliding window of the login attempt limits (15 min)."
    )
    login_failures_per_user: int = Field(
        default=10, ge=1, description="Failed logins one username may have per window."
    )
    login_failures_per_address: int = Field(
        default=50, ge=1, description="Failed logins one client address may have per window."
    )
    login_attempts_per_address: int = Field(
        default=300,
        ge=1,
        description="Logins (failed or not) one client address may make per window.",
    )
    password_checks_at_once: int = Field(
        default=2,
        ge=1,
        description="Argon2 hashes computed at the same time (each holds argon2_memory_kib).",
    )
    web_session_ttl_s: float = Field(
        default=7 * 86400.0,
        gt=0,
        description="Lifetime of a web UI login (its cookie and its server-side session).",
    )
    login_token_ttl_s: float = Field(
        default=30 * 86400.0,
        gt=0,
        description="Lifetime of a token from POST /auth/login (30 days); named "
        "tokens from POST /auth/tokens last until revoked.",
    )
    default_hop_limit: int = Field(default=5, ge=1, description="Hop limit given to new sessions.")
    argon2_time_cost: int = Field(
        default=3, ge=1, description="Argon2id passes for password hashes."
    )
    argon2_memory_kib: int = Field(
        default=65536, ge=8, description="Argon2id memory per password hash, KiB."
    )
    scheduler_interval_s: float = Field(
        default=1.0, gt=0, description="Seconds between scheduler passes (request expiry)."
    )
    send_budget: int = Field(
        default=50,
        ge=1,
        description="Sends one agent may make in a session between two human mails "
        "(relays to humans are free).",
    )
    # Metrics (docs/metrics.md). Never open to anonymous callers: an admin's token
    # or the scrape token.
    metrics_enabled: bool = Field(
        default=True,
        description="Serve GET /metrics (to an admin's token or metrics_token); false: 404.",
    )
    metrics_token: SecretStr | None = Field(
        default=None,
        description="A bearer token a Prometheus scraper may read /metrics with (at least "
        "16 characters; from the environment only). None: admins' tokens only.",
    )
    attachment_max_bytes: int = Field(
        default=25 * 1024 * 1024, ge=1, description="Largest file one upload may hold, bytes."
    )
    blob_grace_s: float = Field(
        default=172800.0,
        ge=0,
        description="Age (seconds) after which an upload no mail references is swept, "
        "with its blob; long enough for a mail in progress to reference it (48 h).",
    )

    # Limits (docs/limits.md lists them all, with why).
    body_max_bytes: int = Field(
        default=1024 * 1024,
        ge=1024,
        description="Largest request body of every route but uploads, bytes; refused "
        "(413) before it is read.",
    )
    max_recipients: int = Field(
        default=100, ge=1, description="Most addresses one mail may have in to + cc together."
    )
    mail_body_max_bytes: int = Field(
        default=256 * 1024, ge=1, description="Largest mail body (UTF-8 bytes)."
    )
    subject_max_bytes: int = Field(
        default=1000, ge=1, description="Largest mail subject (UTF-8 bytes)."
    )
    text_max_bytes: int = Field(
        default=16 * 1024,
        ge=1,
        description="Largest free text of approvals: summary, question, note, answer, "
        "grant pattern, forward note (UTF-8 bytes).",
    )
    tool_input_max_bytes: int = Field(
        default=64 * 1024, ge=2, description="Largest tool_input of a request (compact JSON)."
    )
    question_options_max: int = Field(
        default=50, ge=1, description="Most options (and answers) one question may have."
    )
    option_max_bytes: int = Field(
        default=1000, ge=1, description="Largest description of a question option (bytes)."
    )
    heartbeat_max_bytes: int = Field(
        default=256 * 1024, ge=1024, description="Largest heartbeat (compact JSON, stored whole)."
    )
    heartbeat_list_max: int = Field(
        default=200, ge=1, description="Most workspaces and platform_sessions in a heartbeat."
    )
    inbox_preview_chars: int = Field(
        default=4000,
        ge=1,
        description="Body characters an inbox or mailbox item carries unless the client "
        "asks for more (body_limit; 0 = full bodies).",
    )
    header_timeout_s: float = Field(
        default=10.0,
        gt=0,
        description="Seconds a connection may take to send a complete request header "
        "(`agentmail serve`); slower ones are closed. Also how long an idle kept-alive "
        "connection stays open: keep it above clients' keep-alive (httpx: 5 s).",
    )
    body_timeout_s: float = Field(
        default=60.0,
        gt=0,
        description="Seconds a request body may take to arrive whole after its header "
        "(`agentmail serve`); a client that stalls or dribbles it is closed. An upload "
        "of attachment_max_bytes (25 MiB) needs about 0.5 MB/s at the default.",
    )

    # Calendar (docs/behaviour.md#calendar, docs/limits.md).
    calendar_horizon_days: int = Field(
        default=366,
        ge=1,
        le=3660,
        description="How far ahead a calendar entry's first occurrence may lie, and the "
        "window in which its occurrences are counted (days).",
    )
    calendar_max_occurrences: int = Field(
        default=1000,
        ge=1,
        description="Most occurrences one calendar entry may have within the horizon.",
    )
    calendar_min_gap_s: float = Field(
        default=60.0, ge=1, description="Shortest time between two occurrences of an entry."
    )
    calendar_max_entries: int = Field(
        default=200,
        ge=1,
        description="Most scheduled calendar entries one human or agent may have at once.",
    )
    calendar_late_after_s: float = Field(
        default=60.0,
        ge=0,
        description="An occurrence delivered more than this long after its time is marked "
        "late (the gateway was down or behind).",
    )

    # Web Push (docs/remote.md, "Push").
    push_endpoint_allow: tuple[str, ...] = Field(
        default=(),
        description="URL prefixes of push endpoints allowed besides the default rule "
        "(https to public addresses only); `agentmail serve --push-endpoint-allow`. "
        "From the environment: separated by spaces or commas.",
    )
    vapid_subject: str | None = Field(
        default=None,
        description="The VAPID `sub` (RFC 8292) push services may contact: a mailto: or "
        "https: URL; default mailto:agentmail@localhost.",
    )
    push_poll_s: float = Field(
        default=5.0,
        gt=0,
        description="Seconds between the push sender's passes when nothing wakes it "
        "(retries falling due, pushes queued by other replicas).",
    )
    push_retry_base_s: float = Field(
        default=2.0,
        gt=0,
        description="First wait before a push is retried (429, 5xx, no answer); doubled "
        "each attempt, Retry-After honoured.",
    )

    # E-mail (docs/email.md).
    smtp_url: str | None = Field(
        default=None,
        description="The relay outgoing e-mail goes to: smtp://user@host:port (STARTTLS "
        "when offered, required unless the host is loopback) or smtps://… (implicit "
        "TLS); no password in it. None: the gateway sends no e-mail.",
    )
    smtp_password_file: Path | None = Field(
        default=None,
        description="A file whose first line is the SMTP password (`agentmail serve "
        "--smtp-password-file`); else AGENTMAIL_SMTP_PASSWORD.",
    )
    smtp_password: SecretStr | None = Field(
        default=None,
        description="The SMTP password, from the environment only (never a flag: the "
        "command line is visible to every local user).",
    )
    smtp_ca_file: Path | None = Field(
        default=None,
        description="PEM certificates to trust for the relay's TLS instead of the "
        "system's (a relay with a private CA).",
    )
    mail_from: str | None = Field(
        default=None,
        description="The From address of the gateway's e-mail, e.g. agentmail@example.org; "
        "needed with smtp_url. Its domain is the right side of every Message-ID.",
    )
    public_url: str | None = Field(
        default=None,
        description="The gateway's address as people open it (https://agentmail.example.org): "
        "the link in request e-mails. None: they name the Approvals page without a link.",
    )
    email_max_addresses: int = Field(
        default=5, ge=1, description="Most e-mail addresses one person may have, verified or not."
    )
    email_verify_per_hour: int = Field(
        default=5, ge=1, description="Most verification e-mails one person may be sent per hour."
    )
    email_verify_ttl_s: float = Field(
        default=86400.0, gt=0, description="Lifetime of a verification link (24 h)."
    )
    email_poll_s: float = Field(
        default=5.0,
        gt=0,
        description="Seconds between the e-mail sender's passes when nothing wakes it "
        "(retries falling due, e-mail queued by other replicas).",
    )
    email_retry_base_s: float = Field(
        default=30.0,
        gt=0,
        description="First wait before an e-mail is retried (a 4xx answer, no "
        "connection); doubled each attempt.",
    )
    email_attach_max_bytes: int = Field(
        default=5 * 1024 * 1024,
        ge=0,
        description="Most bytes of attachments one e-mail of an agent's mail carries as "
        "MIME parts (together, in the mail's order); the rest are links to the web UI "
        "(public_url). 0: links only.",
    )
    email_reply_ttl_s: float = Field(
        default=14 * 86400.0,
        gt=0,
        description="How long the reply address of an e-mailed agent's mail stays valid (14 days).",
    )
    # E-mail in (docs/email.md, "Replies").
    imap_url: str | None = Field(
        default=None,
        description="The gateway's own mailbox that replies arrive in: "
        "imaps://user@host:port/MAILBOX (or imap://… with STARTTLS, required unless "
        "loopback); no password in it. IDLE where the server offers it, else a poll "
        "every imap_poll_s. None: no IMAP.",
    )
    imap_password_file: Path | None = Field(
        default=None,
        description="A file whose first line is the IMAP password; else AGENTMAIL_IMAP_PASSWORD.",
    )
    imap_password: SecretStr | None = Field(
        default=None, description="The IMAP password, from the environment only."
    )
    imap_ca_file: Path | None = Field(
        default=None, description="PEM certificates to trust for the IMAP server's TLS."
    )
    imap_poll_s: float = Field(
        default=60.0,
        gt=0,
        description="Seconds between polls of the IMAP mailbox when the server has no "
        "IDLE (and the longest an IDLE waits before it is renewed).",
    )
    smtp_listen: str | None = Field(
        default=None,
        description="HOST:PORT of an SMTP listener that takes the replies (for those "
        "who run an MX that forwards to it). None: no listener.",
    )
    email_in_per_pass: int = Field(
        default=50,
        ge=1,
        description="Most messages the IMAP fetcher takes from the mailbox in one pass "
        "(a full pass is followed by another at once).",
    )
    require_dkim: bool = Field(
        default=False,
        description="Accept a reply only with a DKIM signature of the From address's "
        "domain that verifies.",
    )
    email_in_max_bytes: int = Field(
        default=10 * 1024 * 1024,
        ge=1024,
        description="Largest inbound e-mail read, in bytes (10 MiB); a larger one is "
        "refused (`too_big`) before it is parsed. The SMTP listener refuses it (552), the "
        "IMAP fetcher leaves it in the mailbox unread.",
    )
    email_links_require_login: bool = Field(
        default=False,
        description="One-click links in request e-mails decide only for a person "
        "logged in to the web UI in that browser.",
    )

    @field_validator("push_endpoint_allow", mode="before")
    @classmethod
    def _split_prefixes(cls, value: object) -> object:
        if isinstance(value, str):
            return tuple(p for p in value.replace(",", " ").split() if p)
        return value

    @field_validator("push_endpoint_allow")
    @classmethod
    def _prefixes(cls, value: tuple[str, ...]) -> tuple[str, ...]:
        # The host must end inside the prefix ("http://10.0.0.5:8080/", not
        # "http://10.0.0.5:80", which "http://10.0.0.5:8080.evil.example/" extends).
        for prefix in value:
            scheme, sep, rest = prefix.partition("://")
            if scheme not in ("http", "https") or not sep or "/" not in rest.lstrip("/"):
                raise ValueError(
                    f"push endpoint prefix {prefix!r} must be an http(s) URL with a path, "
                    "e.g. http://127.0.0.1:8080/"
                )
        return value

    @field_validator("metrics_token")
    @classmethod
    def _metrics_token(cls, value: SecretStr | None) -> SecretStr | None:
        if value is not None and len(value.get_secret_value().strip()) < MIN_SCRAPE_TOKEN:
            raise ValueError(f"metrics_token must have at least {MIN_SCRAPE_TOKEN} characters")
        return value

    @field_validator("vapid_subject")
    @classmethod
    def _subject(cls, value: str | None) -> str | None:
        if value is not None and not value.startswith(("mailto:", "https://")):
            raise ValueError("vapid_subject must be a mailto: or https:// URL")
        return value

    @field_validator("smtp_url")
    @classmethod
    def _smtp_url(cls, value: str | None) -> str | None:
        if value is not None:
            from mailui4agents.domain.email_address import parse_relay

            parse_relay(value)  # ValueError says what is wrong
        return value

    @field_validator("imap_url")
    @classmethod
    def _imap_url(cls, value: str | None) -> str | None:
        if value is not None:
            from mailui4agents.domain.email_address import parse_mailbox

            parse_mailbox(value)  # ValueError says what is wrong
        return value

    @field_validator("smtp_listen")
    @classmethod
    def _smtp_listen(cls, value: str | None) -> str | None:
        if value is not None:
            from mailui4agents.domain.email_address import parse_listen

            parse_listen(value)
        return value

    @field_validator("public_url")
    @classmethod
    def _public_url(cls, value: str | None) -> str | None:
        if value is not None and not value.startswith(("https://", "http://")):
            raise ValueError(
                "public_url must be an http(s) URL, e.g. https://agentmail.example.org"
            )
        return value

    @field_validator("mail_from")
    @classmethod
    def _mail_from(cls, value: str | None) -> str | None:
        if value is None:
            return None
        from mailui4agents.domain.email_address import BadAddress, normalise_address

        try:
            return normalise_address(value)
        except BadAddress as exc:
            raise ValueError(f"mail_from: {exc}") from None

    @model_validator(mode="after")
    def _email_complete(self) -> Settings:
        if self.smtp_url is not None and self.mail_from is None:
            raise ValueError("smtp_url needs mail_from (agentmail serve --mail-from ADDRESS)")
        if self.smtp_password_file is not None and self.smtp_password is not None:
            raise ValueError("give the SMTP password by a file or by the environment, not both")
        if self.imap_password_file is not None and self.imap_password is not None:
            raise ValueError("give the IMAP password by a file or by the environment, not both")
        for name in ("imap_url", "smtp_listen"):
            if getattr(self, name) is not None and self.mail_from is None:
                # Replies come to mail_from's address (plus a token): its domain is the
                # one the listener accepts and the one receive() reads tokens from.
                raise ValueError(f"{name} needs mail_from (agentmail serve --mail-from ADDRESS)")
        return self

    def vapid_subject_or_default(self) -> str:
        return self.vapid_subject or "mailto:agentmail@localhost"

    @classmethod
    def from_env(cls, **overrides: object) -> Settings:
        """Build settings from AGENTMAIL_<FIELD> variables; explicit overrides win."""
        for variable, why in GONE.items():
            if variable in os.environ:
                raise ValueError(f"{variable} is no longer read: {why}")
        values: dict[str, object] = {}
        for name in cls.model_fields:
            env_value = os.environ.get(f"AGENTMAIL_{name.upper()}")
            if env_value is not None:
                values[name] = env_value
        values.update({k: v for k, v in overrides.items() if v is not None})
        return cls.model_validate(values)

    def resolved_database_url(self) -> str:
        """The async SQLAlchemy URL this gateway uses."""
        url = self.database_url
        if url is None:
            return f"sqlite+aiosqlite:///{(self.data_dir / 'agentmail.db').resolve()}"
        for prefix in ("postgresql://", "postgres://"):
            if url.startswith(prefix):
                return "postgresql+asyncpg://" + url[len(prefix) :]
        if url.startswith("sqlite:///"):
            return "sqlite+aiosqlite:///" + url[len("sqlite:///") :]
        return url
