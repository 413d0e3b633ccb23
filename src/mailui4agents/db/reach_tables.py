"""The tables of reaching people away from the gateway: paired devices, push
subscriptions and their outbox, each request's delivery tracking, notification
policies, e-mail addresses and the e-mail outbox (docs/remote.md, docs/email.md).
Row classes are named `…Row`; they never leave services/."""

from __future__ import annotations

from datetime import datetime
from typing import Any

from sqlalchemy import JSON, Boolean, ForeignKey, Index, Integer, String, Text, UniqueConstraint
from sqlalchemy.orm import Mapped, mapped_column

from mailui4agents.db.base import Base, new_id
from mailui4agents.db.types import SerialId, UTCDateTime, utcnow


class DeviceRow(Base):
    """A named web session: a phone or browser paired by QR (services/devices.py).
    Its login is the user token `token_id` (named after the device); revoking the
    device revokes that token, so its cookie stops working at the next request."""

    __tablename__ = "devices"
    id: Mapped[str] = mapped_column(String(36), primary_key=True, default=new_id)
    user_id: Mapped[str] = mapped_column(ForeignKey("users.id", ondelete="CASCADE"), index=True)
    name: Mapped[str] = mapped_column(String(200))
    token_id: Mapped[str] = mapped_column(
        ForeignKey("user_tokens.id", ondelete="CASCADE"), unique=True
    )
    created_at: Mapped[datetime] = mapped_column(UTCDateTime, default=utcnow)
    last_seen_at: Mapped[datetime | None] = mapped_column(UTCDateTime, nullable=True)
    # Why push to this device stopped (its push service answered 404/410), shown
    # to its owner until it subscribes again (services/push_send.py).
    push_notice: Mapped[str | None] = mapped_column(Text, nullable=True)


class DevicePairingRow(Base):
    """A one-time pairing code (only its SHA-256 is kept): single use, short-lived.
    `used_at` is set by the conditional UPDATE that redeems it."""

    __tablename__ = "device_pairings"
    id: Mapped[str] = mapped_column(String(36), primary_key=True, default=new_id)
    code_hash: Mapped[str] = mapped_column(String(64), unique=True)
    user_id: Mapped[str] = mapped_column(ForeignKey("users.id", ondelete="CASCADE"), index=True)
    name: Mapped[str] = mapped_column(String(200))
    created_by: Mapped[str] = mapped_column(String(200))
    created_at: Mapped[datetime] = mapped_column(UTCDateTime, default=utcnow)
    expires_at: Mapped[datetime] = mapped_column(UTCDateTime)
    used_at: Mapped[datetime | None] = mapped_column(UTCDateTime, nullable=True)


class PushSubscriptionRow(Base):
    """A device's Web Push subscription (RFC 8030): one per device, replaced on
    re-subscribe, removed when the push service answers 404/410 (services/push_send.py)."""

    __tablename__ = "push_subscriptions"
    id: Mapped[str] = mapped_column(String(36), primary_key=True, default=new_id)
    device_id: Mapped[str] = mapped_column(
        ForeignKey("devices.id", ondelete="CASCADE"), unique=True
    )
    endpoint: Mapped[str] = mapped_column(Text)
    p256dh: Mapped[str] = mapped_column(String(200))  # the browser's public key (base64url)
    auth: Mapped[str] = mapped_column(String(100))  # the browser's auth secret (base64url)
    created_at: Mapped[datetime] = mapped_column(UTCDateTime, default=utcnow)
    last_ok_at: Mapped[datetime | None] = mapped_column(UTCDateTime, nullable=True)


class PushOutboxRow(Base):
    """A push to send: written in the transaction that made it necessary (a new
    request, a reminder, a decision that withdraws the others' notifications),
    sent after commit, claimed by a conditional UPDATE (one replica sends it)."""

    __tablename__ = "push_outbox"
    __table_args__ = (Index("ix_push_outbox_state_next_at", "state", "next_at"),)
    id: Mapped[str] = mapped_column(String(36), primary_key=True, default=new_id)
    subscription_id: Mapped[str] = mapped_column(
        ForeignKey("push_subscriptions.id", ondelete="CASCADE"), index=True
    )
    request_id: Mapped[str | None] = mapped_column(
        ForeignKey("permissions.id", ondelete="CASCADE"), nullable=True, index=True
    )
    # permission_request | reminder | escalation | decided | withdrawn | test | waiting
    kind: Mapped[str] = mapped_column(String(20))
    payload: Mapped[dict[str, Any]] = mapped_column(JSON)  # the plaintext, encrypted at send
    state: Mapped[str] = mapped_column(String(10), default="queued")  # queued|sending|sent|failed
    attempts: Mapped[int] = mapped_column(Integer, default=0)
    next_at: Mapped[datetime] = mapped_column(UTCDateTime, default=utcnow)
    claimed_until: Mapped[datetime | None] = mapped_column(UTCDateTime, nullable=True)
    status_code: Mapped[int | None] = mapped_column(Integer, nullable=True)
    detail: Mapped[str | None] = mapped_column(Text, nullable=True)
    created_at: Mapped[datetime] = mapped_column(UTCDateTime, default=utcnow)


class PushActionTokenRow(Base):
    """A single-use credential for one notification action: bound to one request and
    one device, expiring with the request; only its SHA-256 is kept."""

    __tablename__ = "push_action_tokens"
    id: Mapped[str] = mapped_column(String(36), primary_key=True, default=new_id)
    token_hash: Mapped[str] = mapped_column(String(64), unique=True)
    request_id: Mapped[str] = mapped_column(
        ForeignKey("permissions.id", ondelete="CASCADE"), index=True
    )
    device_id: Mapped[str] = mapped_column(ForeignKey("devices.id", ondelete="CASCADE"), index=True)
    expires_at: Mapped[datetime] = mapped_column(UTCDateTime)
    used_at: Mapped[datetime | None] = mapped_column(UTCDateTime, nullable=True)


class RequestDeliveryRow(Base):
    """What happened to a request on each channel and device, in order: queued,
    sent (the push service's answer and latency), failed, shown, opened, decided,
    withdrawn (GET /api/v1/permissions/{id}/deliveries)."""

    __tablename__ = "request_deliveries"
    __table_args__ = (Index("ix_request_deliveries_request_id_id", "request_id", "id"),)
    id: Mapped[int] = mapped_column(SerialId, primary_key=True, autoincrement=True)
    request_id: Mapped[str] = mapped_column(ForeignKey("permissions.id", ondelete="CASCADE"))
    channel: Mapped[str] = mapped_column(String(10))  # push | email | web | terminal
    person: Mapped[str | None] = mapped_column(String(200), nullable=True)
    device_id: Mapped[str | None] = mapped_column(String(36), nullable=True)  # no FK: kept after
    device_name: Mapped[str | None] = mapped_column(String(200), nullable=True)
    state: Mapped[str] = mapped_column(String(10))
    detail: Mapped[str | None] = mapped_column(Text, nullable=True)
    latency_us: Mapped[int | None] = mapped_column(Integer, nullable=True)  # push answer time
    at: Mapped[datetime] = mapped_column(UTCDateTime, default=utcnow)


class GatewayKeyRow(Base):
    """Keys the gateway makes once and all replicas share (PostgreSQL); on SQLite the
    VAPID key lives in a 0600 file in the data dir instead (services/push_keys.py)."""

    __tablename__ = "gateway_keys"
    name: Mapped[str] = mapped_column(String(50), primary_key=True)
    private_pem: Mapped[str] = mapped_column(Text)
    created_at: Mapped[datetime] = mapped_column(UTCDateTime, default=utcnow)


class NotifyPolicyRow(Base):
    """A person's notification policy (services/notify_policy.py); no row = defaults."""

    __tablename__ = "notify_policies"
    user_id: Mapped[str] = mapped_column(
        ForeignKey("users.id", ondelete="CASCADE"), primary_key=True
    )
    push: Mapped[bool] = mapped_column(Boolean, default=True)
    email: Mapped[bool] = mapped_column(Boolean, default=True)  # request e-mails
    email_mail: Mapped[bool] = mapped_column(Boolean, default=True)  # agents' mails
    push_content: Mapped[str] = mapped_column(String(10), default="preview")  # preview | none
    skip_when_visible: Mapped[bool] = mapped_column(Boolean, default=True)
    quiet_start: Mapped[str | None] = mapped_column(String(5), nullable=True)  # "22:00"
    quiet_end: Mapped[str | None] = mapped_column(String(5), nullable=True)  # "07:00"
    timezone: Mapped[str] = mapped_column(String(64), default="UTC")
    remind_after_min: Mapped[int | None] = mapped_column(Integer, nullable=True)
    escalate_after_min: Mapped[int | None] = mapped_column(Integer, nullable=True)
    # The daily digest (services/email_digest.py): the local hour 0-23, NULL none;
    # the local date (YYYY-MM-DD) of the last one, claimed by a conditional UPDATE.
    email_digest_hour: Mapped[int | None] = mapped_column(Integer, nullable=True)
    digest_sent_on: Mapped[str | None] = mapped_column(String(10), nullable=True)
    # Until when one of the person's pages reported itself visible (POST
    # /api/v1/me/presence); no push while it is in the future, if skip_when_visible.
    visible_until: Mapped[datetime | None] = mapped_column(UTCDateTime, nullable=True)
    updated_at: Mapped[datetime] = mapped_column(UTCDateTime, default=utcnow)


class EmailAddressRow(Base):
    """A person's e-mail address (services/email_addresses.py). It counts once
    `verified_at` is set, by the POST of the link mailed to it; the link's token
    is kept only as its SHA-256 and cleared when used."""

    __tablename__ = "email_addresses"
    __table_args__ = (UniqueConstraint("user_id", "address"),)
    id: Mapped[str] = mapped_column(String(36), primary_key=True, default=new_id)
    user_id: Mapped[str] = mapped_column(ForeignKey("users.id", ondelete="CASCADE"), index=True)
    address: Mapped[str] = mapped_column(String(254), index=True)  # lower-cased, IDNA domain
    verified_at: Mapped[datetime | None] = mapped_column(UTCDateTime, nullable=True)
    token_hash: Mapped[str | None] = mapped_column(String(64), unique=True, nullable=True)
    token_expires_at: Mapped[datetime | None] = mapped_column(UTCDateTime, nullable=True)
    created_at: Mapped[datetime] = mapped_column(UTCDateTime, default=utcnow)


class EmailOutboxRow(Base):
    """An e-mail to send (services/email_send.py): the whole RFC 5322 message,
    written in the transaction that made it necessary, claimed like a push
    (services/outbox.py). `handed`: DATA was sent to the relay and its answer is
    not recorded yet; such a row is never sent again (docs/email.md, "Never twice").
    `message` is erased once the row is final (it may hold a verification link)."""

    __tablename__ = "email_outbox"
    __table_args__ = (
        Index("ix_email_outbox_state_next_at", "state", "next_at"),
        # One mail to several people is one Message-ID (`<mail.{id}@domain>`,
        # services/email_message.py), sent once to each.
        UniqueConstraint("message_id", "to_addr"),
    )
    id: Mapped[str] = mapped_column(String(36), primary_key=True, default=new_id)
    user_id: Mapped[str] = mapped_column(ForeignKey("users.id", ondelete="CASCADE"), index=True)
    # NULL once the address is removed: the row stays, so that removing and
    # adding an address again does not reset email_verify_per_hour.
    address_id: Mapped[str | None] = mapped_column(
        ForeignKey("email_addresses.id", ondelete="SET NULL"), nullable=True, index=True
    )
    request_id: Mapped[str | None] = mapped_column(
        ForeignKey("permissions.id", ondelete="CASCADE"), nullable=True, index=True
    )
    kind: Mapped[str] = mapped_column(String(20))  # verify | request | mail | answer | digest
    # The mail session it belongs to (its thread), and the mail it carries.
    session_id: Mapped[str | None] = mapped_column(
        ForeignKey("sessions.id", ondelete="CASCADE"), nullable=True, index=True
    )
    mail_id: Mapped[str | None] = mapped_column(String(36), nullable=True)
    to_addr: Mapped[str] = mapped_column(String(254))
    message_id: Mapped[str] = mapped_column(String(300))  # with its <>
    message: Mapped[str | None] = mapped_column(Text, nullable=True)
    # queued | sending | handed | sent | failed | unknown
    state: Mapped[str] = mapped_column(String(10), default="queued")
    attempts: Mapped[int] = mapped_column(Integer, default=0)
    next_at: Mapped[datetime] = mapped_column(UTCDateTime, default=utcnow)
    claimed_until: Mapped[datetime | None] = mapped_column(UTCDateTime, nullable=True)
    status_code: Mapped[int | None] = mapped_column(Integer, nullable=True)  # the relay's
    detail: Mapped[str | None] = mapped_column(Text, nullable=True)
    created_at: Mapped[datetime] = mapped_column(UTCDateTime, default=utcnow)
    done_at: Mapped[datetime | None] = mapped_column(UTCDateTime, nullable=True)


class EmailTokenRow(Base):
    """A credential an outgoing e-mail carries to one person: its reply address
    `gateway+<token>@domain` (kind `reply`) or a one-click link (`approve`,
    `deny`). Bound to the person, the address it was mailed to, and the request
    or session it is about; only its SHA-256 is kept. A request's tokens work
    once (`used_at`); every token ends at `expires_at` (docs/email.md)."""

    __tablename__ = "email_tokens"
    id: Mapped[str] = mapped_column(String(36), primary_key=True, default=new_id)
    token_hash: Mapped[str] = mapped_column(String(64), unique=True)
    kind: Mapped[str] = mapped_column(String(10))  # reply | approve | deny
    user_id: Mapped[str] = mapped_column(ForeignKey("users.id", ondelete="CASCADE"), index=True)
    address_id: Mapped[str | None] = mapped_column(
        ForeignKey("email_addresses.id", ondelete="SET NULL"), nullable=True, index=True
    )
    request_id: Mapped[str | None] = mapped_column(
        ForeignKey("permissions.id", ondelete="CASCADE"), nullable=True, index=True
    )
    session_id: Mapped[str | None] = mapped_column(
        ForeignKey("sessions.id", ondelete="CASCADE"), nullable=True, index=True
    )
    mail_id: Mapped[str | None] = mapped_column(String(36), nullable=True)  # replied to
    message_id: Mapped[str | None] = mapped_column(String(300), nullable=True)  # that carried it
    expires_at: Mapped[datetime] = mapped_column(UTCDateTime)
    used_at: Mapped[datetime | None] = mapped_column(UTCDateTime, nullable=True)
    created_at: Mapped[datetime] = mapped_column(UTCDateTime, default=utcnow)


class EmailInboundRow(Base):
    """Each e-mail that came in (by IMAP or the SMTP listener), accepted or
    refused, and why: the log of inbound mail, shown to its person and counted.
    `dedupe_key` (its Message-ID, else `sha256:` of its bytes) makes a second
    copy of one message do nothing (an IMAP re-fetch, a replay)."""

    __tablename__ = "email_inbound"
    __table_args__ = (Index("ix_email_inbound_user_id_received_at", "user_id", "received_at"),)
    id: Mapped[str] = mapped_column(String(36), primary_key=True, default=new_id)
    dedupe_key: Mapped[str] = mapped_column(String(300), unique=True)
    via: Mapped[str] = mapped_column(String(10))  # imap | smtp
    from_addr: Mapped[str | None] = mapped_column(String(254), nullable=True)
    to_addr: Mapped[str | None] = mapped_column(String(254), nullable=True)
    subject: Mapped[str | None] = mapped_column(String(300), nullable=True)
    user_id: Mapped[str | None] = mapped_column(
        ForeignKey("users.id", ondelete="SET NULL"), nullable=True
    )
    token_id: Mapped[str | None] = mapped_column(
        ForeignKey("email_tokens.id", ondelete="SET NULL"), nullable=True
    )
    request_id: Mapped[str | None] = mapped_column(
        ForeignKey("permissions.id", ondelete="SET NULL"), nullable=True, index=True
    )
    session_id: Mapped[str | None] = mapped_column(
        ForeignKey("sessions.id", ondelete="SET NULL"), nullable=True
    )
    mail_id: Mapped[str | None] = mapped_column(String(36), nullable=True)  # the mail it made
    # decided | posted | started | refused
    outcome: Mapped[str] = mapped_column(String(10))
    reason: Mapped[str | None] = mapped_column(String(40), nullable=True)  # why refused
    detail: Mapped[str | None] = mapped_column(Text, nullable=True)
    received_at: Mapped[datetime] = mapped_column(UTCDateTime, default=utcnow)


class WorkspaceAliasRow(Base):
    """A name for a workspace that new work by e-mail may use: a mail to
    `claude+shop@domain` starts a session of agent `claude` in the workspace the
    admin named `shop` (docs/email.md)."""

    __tablename__ = "workspace_aliases"
    alias: Mapped[str] = mapped_column(String(64), primary_key=True)
    workspace: Mapped[str] = mapped_column(Text)
    created_by: Mapped[str | None] = mapped_column(
        ForeignKey("users.id", ondelete="SET NULL"), nullable=True
    )
    created_at: Mapped[datetime] = mapped_column(UTCDateTime, default=utcnow)


class WaitingNoticeRow(Base):
    """One "waiting for you" notice of a session (services/waiting.py): the key
    makes a repeat of the same turn's notice a no-op, whichever replica gets it."""

    __tablename__ = "waiting_notices"
    session_id: Mapped[str] = mapped_column(
        ForeignKey("sessions.id", ondelete="CASCADE"), primary_key=True
    )
    kind: Mapped[str] = mapped_column(String(10), primary_key=True)  # input | permission
    turn: Mapped[str] = mapped_column(String(200), primary_key=True)
    pushed: Mapped[int] = mapped_column(Integer, default=0)
    created_at: Mapped[datetime] = mapped_column(UTCDateTime, default=utcnow, index=True)
