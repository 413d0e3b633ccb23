"""create_app(settings) -> the ASGI app. Nothing is built at import time."""

from __future__ import annotations

from collections.abc import AsyncIterator, Sequence
from contextlib import asynccontextmanager
from pathlib import Path

import anyio
from fastapi import FastAPI
from fastapi.exceptions import RequestValidationError
from starlette.exceptions import HTTPException

from mailui4agents import __version__, data_lock
from mailui4agents.api import (
    admin,
    agent,
    agent_sessions,
    agents,
    attachments,
    audit,
    auth,
    calendar,
    devices,
    discovery,
    docs_page,
    emails,
    events,
    health,
    mail,
    metrics,
    notify,
    permissions,
    push,
    push_actions,
    rules,
    sessions,
    work,
)
from mailui4agents.api.body_guard import BodyGuard
from mailui4agents.api.errors import error_handler
from mailui4agents.api.http_errors import http_error_handler, internal_error_handler
from mailui4agents.api.openapi import document_errors
from mailui4agents.api.validation import validation_handler
from mailui4agents.db import migrate
from mailui4agents.db.engine import Database
from mailui4agents.domain.errors import DomainError
from mailui4agents.errors import ApiError
from mailui4agents.events import log as event_log
from mailui4agents.events import pg_listen
from mailui4agents.events.hub import EventHub
from mailui4agents.http.observe import Observe
from mailui4agents.http.uploads import FRAMING_SLACK, UPLOAD_PATHS
from mailui4agents.metrics import GatewayMetrics
from mailui4agents.private_files import private_dir, private_file
from mailui4agents.services import email_send, identity, push_keys, push_send, scheduler
from mailui4agents.services.rate_limits import LoginGuard
from mailui4agents.settings import Settings
from mailui4agents.state import Gateway
from mailui4agents.web import (
    audit_page,
    calendar_page,
    devices_page,
    email_links_page,
    email_page,
    emails_page,
    export_page,
    notify_page,
    pwa,
    review_page,
    rules_page,
)
from mailui4agents.web import views as web_views

SQLITE_PREFIX = "sqlite+aiosqlite:///"


async def start_gateway(settings: Settings) -> tuple[Gateway, str | None]:
    """Open the database, migrate it, and make sure an admin exists.

    Returns the gateway and, only on a brand-new database without a configured
    admin password, the generated one (to print once).
    """
    url = settings.resolved_database_url()
    private_dir(settings.data_dir)
    # Held until the lifespan ends: `agentmail restore` refuses a data dir in use.
    lock = data_lock.hold_shared(settings.data_dir)
    try:
        return await _start_gateway(settings, url, lock)
    except BaseException:
        data_lock.release(lock)
        raise


async def _start_gateway(settings: Settings, url: str, lock: int) -> tuple[Gateway, str | None]:
    if url.startswith(SQLITE_PREFIX) and ":memory:" not in url:
        private_file(Path(url[len(SQLITE_PREFIX) :]))  # before SQLite creates it 0644
    db = Database(url)
    await migrate.upgrade(db)
    hasher = identity.password_hasher(settings.argon2_time_cost, settings.argon2_memory_kib)
    hub = EventHub(
        max_queue=settings.sse_queue_max,
        batch=settings.sse_batch,
        poll_s=settings.sse_ping_s,
        ping_s=settings.sse_ping_s,
        recheck_s=settings.sse_token_recheck_s,
    )
    gw = Gateway(
        settings=settings,
        db=db,
        hub=hub,
        hasher=hasher,
        logins=LoginGuard(settings),
        hash_slots=anyio.CapacityLimiter(settings.password_checks_at_once),
        data_lock=lock,
    )
    gw.attach_hub()
    key = await push_keys.load_or_create(db, settings.data_dir)  # docs/remote.md, "Push"
    gw.push = push_send.PushSender(settings, db, key)
    if settings.smtp_url is not None:  # docs/email.md
        gw.email = email_send.EmailSender(settings, db, email_send.load_password(settings))
    inbound(gw)
    async with gw.write() as s:
        await event_log.take_event_lock(s)  # replicas starting together: one admin
        generated = await identity.ensure_admin(s, hasher, settings.admin_password)
    return gw, generated


def inbound(gw: Gateway) -> None:
    """The transports of inbound e-mail (docs/email.md, "Receiving"), each handing
    what it got to email_inbound.receive."""
    settings = gw.settings
    if settings.imap_url is not None:
        from mailui4agents.services import email_fetch, email_inbound

        async def from_imap(raw: bytes) -> email_inbound.Received:
            return await email_inbound.receive(gw, raw, via="imap")

        password = email_fetch.load_password(settings)
        gw.imap = email_fetch.ImapFetcher(settings, password, from_imap)
    if settings.smtp_listen is not None:
        from mailui4agents.services import email_inbound, email_listen

        async def from_smtp(raw: bytes, rcpt_tos: Sequence[str]) -> email_inbound.Received:
            return await email_inbound.receive(gw, raw, via="smtp", envelope_to=rcpt_tos)

        gw.smtp_in = email_listen.SmtpListener(settings, from_smtp)


def fixed_at_build(settings: Settings) -> tuple[int, int]:
    """The settings `create_app` builds into the app (the middleware's body
    limits); every other setting is read when the lifespan starts."""
    return settings.body_max_bytes, settings.attachment_max_bytes


def create_app(settings: Settings, *, on_admin_password: object = None) -> FastAPI:
    """Build the app. `on_admin_password(pw)` is called once if one was generated.

    The lifespan starts the gateway of `app.state.settings`, so an app whose
    lifespan has ended may be started again on other settings, provided they
    agree on what is fixed here (`fixed_at_build`): the test suite does, because
    FastAPI builds each route's dependency state on the first request that
    reaches it in each app (about 0.1 s per app)."""

    @asynccontextmanager
    async def lifespan(app: FastAPI) -> AsyncIterator[None]:
        gw, generated = await start_gateway(app.state.settings)
        if generated and callable(on_admin_password):
            on_admin_password(generated)
        app.state.gateway = gw
        gw.metrics = app.state.metrics  # docs/metrics.md
        gw.metrics.watch(gw)
        stop = anyio.Event()
        async with anyio.create_task_group() as tg:
            tg.start_soon(scheduler.run, gw, stop)
            tg.start_soon(gw.hub.run)
            if gw.push is not None:
                tg.start_soon(gw.push.run, stop)
            if gw.email is not None:
                tg.start_soon(gw.email.run, stop)
            if gw.imap is not None:
                tg.start_soon(gw.imap.run, stop)
            if gw.smtp_in is not None:
                await gw.smtp_in.start()  # a port already taken stops the start here
            if not gw.db.is_sqlite:  # replicas wake each other (docs/postgres.md)
                tg.start_soon(pg_listen.listen, gw.db.url, gw.hub, stop)
            try:
                yield
            finally:
                stop.set()  # the pass in progress finishes; nothing is cut midway
                gw.hub.close()
                if gw.smtp_in is not None:
                    await gw.smtp_in.stop()
        await gw.db.dispose()
        if gw.data_lock is not None:
            data_lock.release(gw.data_lock)
            gw.data_lock = None

    app = FastAPI(
        title="MailUI4Agents",
        version=__version__,
        openapi_url="/api/v1/openapi.json",
        docs_url=None,  # api/docs_page.py serves it, with its security headers
        redoc_url=None,
        lifespan=lifespan,
    )
    app.state.settings = settings
    app.add_exception_handler(ApiError, error_handler)
    app.add_exception_handler(DomainError, error_handler)
    app.add_exception_handler(RequestValidationError, validation_handler)
    app.add_exception_handler(HTTPException, http_error_handler)
    app.add_exception_handler(Exception, internal_error_handler)
    json_max, attachment_max = fixed_at_build(settings)
    upload_max = attachment_max + FRAMING_SLACK
    app.add_middleware(
        BodyGuard,
        json_max=json_max,
        streamed=dict.fromkeys(UPLOAD_PATHS, upload_max),
    )
    # Outermost: the request id, metrics and log line of every answer, the body
    # guard's too (http/observe.py). One registry per app (metrics.py).
    app.state.metrics = GatewayMetrics()
    app.add_middleware(Observe, metrics=app.state.metrics)
    # A request is matched against the routes in this order, one by one (FastAPI),
    # and no two routers' routes overlap (tests/architecture/test_routes.py): the
    # busiest routes first — an agent's mail and heartbeats, sends, permission
    # requests and decisions, event streams — cut what every request pays
    # before it reaches its handler (docs/design.md, "The fixed cost of a request").
    for module in (agent, mail, permissions, events, auth, health, agent_sessions, sessions, admin):
        app.include_router(module.router)
    app.include_router(agents.router)  # docs/api.md, "Who may set an agent to work"
    app.include_router(rules.router)  # docs/api.md, "Rules"
    app.include_router(audit.router)  # docs/audit.md
    app.include_router(work.router)  # docs/review.md
    app.include_router(discovery.router)
    app.include_router(attachments.router)
    app.include_router(calendar.router)  # docs/api.md, "Calendar"
    app.include_router(calendar.agent_router)
    app.include_router(devices.router)  # docs/api.md, "Devices"
    app.include_router(push.router)  # docs/remote.md, "Push"
    app.include_router(notify.router)  # docs/remote.md, "Notification policy"
    app.include_router(push_actions.router)  # docs/remote.md, "Approving from a notification"
    app.include_router(emails.router)  # docs/email.md
    app.include_router(emails.stats_router)
    app.include_router(web_views.router)  # the web UI (docs/web.md)
    app.include_router(calendar_page.router)
    app.include_router(devices_page.router)  # docs/web.md, "Pairing a phone"
    app.include_router(rules_page.router)  # docs/rules.md
    app.include_router(notify_page.router)
    app.include_router(email_page.router)  # docs/email.md, "Addresses"
    app.include_router(emails_page.router)
    app.include_router(email_links_page.router)  # docs/email.md, "One-click links"
    app.include_router(export_page.router)  # docs/email.md, "Export"
    app.include_router(audit_page.router)  # docs/audit.md
    app.include_router(review_page.router)  # docs/review.md, "Reading and commenting in the web UI"
    app.include_router(pwa.router)  # docs/web.md, "Install on your phone"
    app.include_router(docs_page.router)
    app.include_router(metrics.router)  # docs/metrics.md
    document_errors(app)
    return app
