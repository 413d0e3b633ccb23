"""Every call the web UI makes into the services, in one place.

The pages never touch the database themselves: they call these functions, which
call the same service functions as the API routes (src/mailui4agents/api/).
Keeping them here means a change of a service signature is fixed once.

The services answer wire models; the pages render their JSON form (`to_json`:
the same keys and values a client of the API receives), made here. Two reads
no API route makes are here as queries of their own: a thread's requests for
their cards (`thread_requests`) and the kinds of request mails (`request_kinds`).
"""

from __future__ import annotations

from typing import Any

import anyio
from fastapi import Request
from fastapi.responses import StreamingResponse
from sqlalchemy import false, select

from mailui4agents.api import attachments as api_attachments
from mailui4agents.api import events as api_events
from mailui4agents.api.errors import as_api_error
from mailui4agents.db.tables import PermissionRow, SessionDeciderRow
from mailui4agents.domain.errors import DomainError
from mailui4agents.domain.results import Sent
from mailui4agents.errors import ApiError
from mailui4agents.services import (
    access,
    agent_accounts,
    content,
    discovery,
    identity,
    mail,
    permission_decisions,
    permissions,
    reading,
    session_view,
    sessions,
)
from mailui4agents.services import grants as grant_service
from mailui4agents.services.principals import Principal
from mailui4agents.state import Gateway
from mailui4agents.wire.models import to_json

# What the web layer raises for a caller's mistake (status, code, message, field),
# and everything a page catches: services raise domain errors (domain/errors.py).
ServiceError = ApiError
Choice = permission_decisions.Choice  # what a decider chose, as the pages send it
Refusal = (ApiError, DomainError)


def as_service_error(err: ApiError | DomainError) -> ApiError:
    """A domain error as the status and body the API would answer with."""
    return err if isinstance(err, ApiError) else as_api_error(err)


MAX_SESSIONS = 100
MAX_PENDING = 200
MAX_THREAD = 500


def client_address(request: Request) -> str:
    return request.client.host if request.client is not None else "unknown"


async def login(gw: Gateway, request: Request, username: str, password: str) -> str:
    """A web session token for a correct password, limited like the API login
    (services/limits.py: per username and per client address)."""
    attempt = gw.logins.begin(username, client_address(request))
    async with gw.read() as s:
        user = await identity.user_by_name(s, username)
    stored = None if user is None else user.password_hash
    async with gw.hash_slots:
        ok = await anyio.to_thread.run_sync(identity.password_matches, gw.hasher, stored, password)
    if not ok or user is None:
        raise ApiError(401, "unauthorized", "wrong username or password")
    attempt.succeeded()
    async with gw.write() as s:
        return await identity.issue_user_token(
            s, user.id, "web", ttl_s=gw.settings.web_session_ttl_s
        )


async def authenticate(gw: Gateway, token: str) -> Principal | None:
    async with gw.read() as s:
        who = await identity.authenticate(s, token)
    return who if who is not None and who.kind == "user" else None


async def logout(gw: Gateway, who: Principal, token: str) -> None:
    """Revoke the web session's token (its open streams end too)."""
    async with gw.write() as s:
        for t in await identity.list_user_tokens(s, who.id, token):
            if t.current:
                await identity.revoke_user_token(s, who, t.id)


async def session_list(gw: Gateway, who: Principal, status: str | None) -> list[dict[str, Any]]:
    async with gw.read() as s:
        items, _ = await sessions.list_sessions(s, who, status, None, None, MAX_SESSIONS, None)
    return [to_json(i) for i in items]


async def recent_mail(gw: Gateway, who: Principal, limit: int = 300) -> list[dict[str, Any]]:
    """Mail addressed to `who`, newest first, with body previews."""
    async with gw.write() as s:
        items, _ = await reading.inbox(
            s,
            who,
            status="all",
            session_id=None,
            limit=limit,
            cursor=None,
            newest_first=True,
            mark=False,
            body_limit=gw.settings.inbox_preview_chars,
        )
    return items  # JSON objects already (services/views.page_items)


async def pending(
    gw: Gateway, who: Principal, session_id: str | None = None
) -> list[dict[str, Any]]:
    """Pending requests this person may decide (deciders only: docs/access.md)."""
    async with gw.write() as s:
        await permissions.expire_due(s, session_id)
        items = await permissions.list_for_human(s, who, "pending", session_id, MAX_PENDING)
    return [to_json(i) for i in items]


async def session(gw: Gateway, who: Principal, session_id: str) -> tuple[dict[str, Any], bool]:
    """SessionOut and whether `who` may decide in it (404 when not readable)."""
    async with gw.read() as s:
        row = await session_view.get_session(s, session_id)
        reader = access.Reader(who)
        await reader.ensure_read(s, row, f"session '{session_id}'")
        out = await session_view.describe(s, row, who.name)
        return to_json(out), await reader.can_decide(s, row)


async def thread(gw: Gateway, who: Principal, session_id: str) -> list[dict[str, Any]]:
    """Every mail of the session, oldest first; marks them read for `who`."""
    async with gw.write() as s:
        items, _ = await reading.session_thread(
            s, access.Reader(who), session_id, limit=MAX_THREAD, cursor=None
        )
        await reading.mark_read_request(s, who, session_id, None)
    return items


async def thread_requests(
    gw: Gateway, who: Principal, session: dict[str, Any], mails: list[dict[str, Any]]
) -> dict[str, dict[str, Any]]:
    """The requests behind the thread's request mails, by mail id, in one query
    for the page (none without request mails). For the session's deciders each
    is a PermissionOut (JSON) with where it was asked and `decided_channel` /
    `decided_device` (read from the row: where the first answer came from), and
    `card`: the thread shows it as the request's card. Anyone else reads a
    request mail without its input (docs/behaviour.md#who-sees-a-requests-input,
    the same test as services/request_input.hidden, in the query): for them only
    the request's kind, which names the mail's type ("question")."""
    ids = [str(m["id"]) for m in mails if m.get("type") == "permission_request"]
    if not ids:
        return {}
    decides: Any = false()
    if who.is_human:
        decides = (
            select(SessionDeciderRow.name)
            .where(
                SessionDeciderRow.session_id == PermissionRow.session_id,
                SessionDeciderRow.name == who.name,
            )
            .exists()
        )
    stmt = select(PermissionRow, decides).where(
        PermissionRow.session_id == session["id"], PermissionRow.mail_id.in_(ids)
    )
    async with gw.read() as s:
        rows = (await s.execute(stmt)).all()
    out: dict[str, dict[str, Any]] = {}
    for row, sees in rows:
        if row.mail_id is None:
            continue
        if not sees:
            out[row.mail_id] = {"kind": row.kind}
            continue
        item = to_json(permissions.permission_out(row))
        item.update(
            session_alias=session.get("alias"),
            workspace=session.get("workspace"),
            permission_mode=session.get("permission_mode"),
            decided_channel=row.decided_channel,
            decided_device=row.decided_device,
            card=True,
        )
        out[row.mail_id] = item
    return out


async def request_kinds(gw: Gateway, mails: list[dict[str, Any]]) -> dict[str, str]:
    """The kind (approval | question) of each request mail among `mails`, by
    mail id, in one query (none without request mails): a mail's type in words
    (web/render.type_word). The kind tells nothing of the input."""
    ids = [str(m["id"]) for m in mails if m.get("type") == "permission_request"]
    if not ids:
        return {}
    stmt = select(PermissionRow.mail_id, PermissionRow.kind).where(PermissionRow.mail_id.in_(ids))
    async with gw.read() as s:
        return {str(mail_id): kind for mail_id, kind in (await s.execute(stmt)).all()}


async def send(gw: Gateway, who: Principal, form: dict[str, Any]) -> dict[str, Any]:
    content.check_mail(gw.settings, form["subject"], form["body"])
    async with gw.read() as r:
        recipients = await mail.resolve_recipients(r, gw.settings, form["to"], form["cc"])
    async with gw.write() as s:
        result = await mail.send_mail(
            s,
            gw.settings,
            who,
            to=form["to"],
            cc=form["cc"],
            subject=form["subject"],
            body=form["body"],
            parent_mail_id=form.get("parent_mail_id"),
            permission_mode=form.get("permission_mode"),
            attachment_ids=form.get("attachment_ids", []),
            recipients=recipients,
        )
    # People send without relay keys, so a send is never a duplicate.
    assert isinstance(result, Sent)
    return to_json(result.mail)


async def read_one_mail(gw: Gateway, who: Principal, mail_id: str) -> dict[str, Any]:
    async with gw.write() as s:
        return await reading.read_mail(s, access.Reader(who), mail_id, body_limit=None)


async def decide(gw: Gateway, who: Principal, request_id: str, choice: Choice) -> dict[str, Any]:
    content.check_decision(gw.settings, choice.note, choice.grant_pattern, choice.answers)
    async with gw.write() as s:
        out = await permission_decisions.decide(s, who, request_id, choice)
    return to_json(out)


async def request_kind(gw: Gateway, who: Principal, request_id: str) -> str:
    """The request's kind, for who may decide it: NotFound for who may not read
    its session, Forbidden for a reader without the power — what deciding would
    answer, before the kind could tell anything (docs/access.md)."""
    what = f"permission request '{request_id}'"
    async with gw.read() as s:
        row = await permissions.get_request(s, request_id)
        found = await session_view.get_session(s, row.session_id)
        await access.Reader(who).ensure_decide(s, found, what)
        return row.kind


async def update_session(
    gw: Gateway,
    who: Principal,
    session_id: str,
    *,
    alias: str | None = None,
    permission_mode: str | None = None,
    archived: bool | None = None,
) -> dict[str, Any]:
    async with gw.write() as s:
        out = await sessions.update_session(s, who, session_id, alias, permission_mode, archived)
        if archived:
            await permissions.cancel_pending(s, session_id, who.name)
            out = out.model_copy(update={"pending_permissions": 0})
        return to_json(out)


async def accept_alias(gw: Gateway, who: Principal, session_id: str) -> dict[str, Any]:
    async with gw.write() as s:
        return to_json(await sessions.accept_proposed_alias(s, who, session_id))


async def session_grants(gw: Gateway, who: Principal, session_id: str) -> list[dict[str, Any]]:
    """The session's standing grants (the thread page shows them to its deciders)."""
    async with gw.read() as s:
        return [to_json(g) for g in await grant_service.list_grants(s, who, session_id, False)]


async def revoke_session_grant(gw: Gateway, who: Principal, session_id: str, grant_id: str) -> None:
    """Revoke a grant from its session's page: a grant of another session is
    NotFound here (whoever may revoke it there); the service checks the power."""
    async with gw.write() as s:
        standing = await grant_service.list_grants(s, who, session_id, False)
        if grant_id not in {g.id for g in standing}:
            raise ServiceError(404, "not_found", f"grant '{grant_id}' not found", field="grant_id")
        await grant_service.revoke_grant(s, who, grant_id)


async def suggest(gw: Gateway, who: Principal, q: str) -> dict[str, Any]:
    async with gw.read() as s:
        return to_json(await discovery.suggest(s, access.Reader(who), q))


async def contacts(gw: Gateway, who: Principal) -> list[dict[str, Any]]:
    async with gw.read() as s:
        items = [to_json(c) for c in await discovery.contacts(s, access.Reader(who))]
    for item in items:
        kind = "user" if item.get("kind") == "human" else "agent"
        item["online"] = gw.hub.connected(f"{kind}:{item['name']}") > 0
    return items


ONLINE_HEARTBEAT_S = 120


async def agents_status(gw: Gateway, who: Principal) -> list[dict[str, Any]]:
    """Every agent's name and enforcement; for admins and the agent's owners also
    its platform, version, last heartbeat and whether it is online (an open
    stream, or a heartbeat in the last two minutes): `details`. No keys.

    Why only they: what runs where, in which version, and when it last
    answered is what someone probing the agents wants to know first."""
    from datetime import UTC, datetime

    now = datetime.now(UTC)
    out = []
    for a in await agents(gw):
        if not (who.is_admin or who.name in a["owners"]):
            out.append(
                {"name": a["name"], "mode_enforcement": a["mode_enforcement"], "details": False}
            )
            continue
        seen = a["last_seen_at"]
        recent = seen is not None and (
            (now - datetime.fromisoformat(seen)).total_seconds() < ONLINE_HEARTBEAT_S
        )
        out.append(
            {
                "name": a["name"],
                "platform": a["platform"],
                "version": a["version"],
                "mode_enforcement": a["mode_enforcement"],
                "last_seen_at": seen,
                "streams": a["connected_streams"],
                "online": bool(a["connected_streams"]) or recent,
                "details": True,
            }
        )
    return out


async def grants(gw: Gateway, who: Principal) -> list[dict[str, Any]]:
    async with gw.read() as s:
        return [to_json(g) for g in await grant_service.list_grants(s, who, None, False)]


async def revoke_grant(gw: Gateway, who: Principal, grant_id: str) -> None:
    async with gw.write() as s:
        await grant_service.revoke_grant(s, who, grant_id)


async def users(gw: Gateway) -> list[dict[str, Any]]:
    async with gw.read() as s:
        return [to_json(u) for u in await identity.list_users(s)]


async def agents(gw: Gateway) -> list[dict[str, Any]]:
    async with gw.read() as s:
        return [to_json(a) for a in await agent_accounts.list_agents(s, gw.hub.connected)]


async def add_user(gw: Gateway, username: str, password: str, is_admin: bool) -> None:
    async with gw.write() as s:
        await identity.create_user(s, gw.hasher, username, password, is_admin)


async def set_admin(gw: Gateway, username: str, is_admin: bool) -> None:
    async with gw.write() as s:
        await identity.set_admin(s, username, is_admin)


async def reset_password(
    gw: Gateway, who: Principal, token: str, username: str, password: str
) -> None:
    """A new password for `username`; its logins end (the admin's own, when it
    resets itself, stays). Hashed in a worker thread, outside the write transaction."""
    identity.check_password(password)
    async with gw.read() as s:
        if await identity.user_by_name(s, username) is None:
            raise ServiceError(404, "not_found", f"user '{username}' not found", field="username")
    async with gw.hash_slots:
        hashed = await anyio.to_thread.run_sync(gw.hasher.hash, password)
    async with gw.write() as s:
        keep = token if username == who.name else None
        await identity.reset_password(s, username, hashed, keep_token=keep)


async def add_agent(
    gw: Gateway, who: Principal, name: str, roots: list[str], taskers: list[str]
) -> str:
    async with gw.write() as s:
        _, key = await agent_accounts.create_agent(
            s, name, roots, creator=who.name, owners=None, taskers=taskers
        )
    return key


async def rotate_key(gw: Gateway, name: str) -> str:
    async with gw.write() as s:
        agent = await agent_accounts.get_agent(s, name)
        return await agent_accounts.rotate_agent_key(s, agent, 0)


async def revoke_key(gw: Gateway, name: str, key_id: str) -> None:
    async with gw.write() as s:
        await agent_accounts.revoke_agent_key(s, name, key_id)


async def event_head(gw: Gateway) -> int:
    async with gw.read() as s:
        return await api_events.head_id(s)


async def event_stream(
    request: Request, gw: Gateway, who: Principal, token: str
) -> api_events.EventStream:
    """The human SSE stream (the API's, with the cookie's token instead of a header)."""
    return await api_events.open_stream(request, gw, who, token)


async def upload(request: Request, gw: Gateway, who: Principal) -> dict[str, Any]:
    return to_json(await api_attachments._upload(request, who, gw))


async def download(gw: Gateway, who: Principal, attachment_id: str) -> StreamingResponse:
    return await api_attachments._download(who, gw, attachment_id, None)
