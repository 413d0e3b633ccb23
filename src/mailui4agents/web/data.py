"""Every call the web UI makes into the services, in one place.

The pages never touch the database themselves: they call these functions, which
call the same service functions as the API routes (src/mailui4agents/api/) —
a use case is composed once, in services/ (logging in: services/logins.py,
sending: services/sending.py, deciding: services/deciding.py), and both
adapters call it. Nothing here imports the API (tests/architecture/test_adapters.py).

The services answer wire models. The pages get the models themselves
(SessionOut, GrantOut, UserOut, AgentOut, AgentStatusOut), except where a
template prints a time as the API sends it: mails and permission requests reach
the pages as their JSON form (the same keys and values a client of the API
receives), typed by web/shapes.py. The reads no API route makes (a thread's
request cards, the kinds of request mails) are services/request_cards.py.
"""

from __future__ import annotations

from fastapi import Request
from fastapi.responses import StreamingResponse

from mailui4agents.domain.errors import DomainError
from mailui4agents.domain.mail_types import MailType
from mailui4agents.domain.results import Sent
from mailui4agents.errors import ApiError, as_api_error
from mailui4agents.http import event_stream, files
from mailui4agents.http.event_stream import EventStream
from mailui4agents.services import (
    access,
    agent_accounts,
    deciding,
    discovery,
    identity,
    logins,
    online,
    permission_decisions,
    reading,
    request_cards,
    sending,
    sessions,
    workspace_aliases,
)
from mailui4agents.services import grants as grant_service
from mailui4agents.services.principals import Principal
from mailui4agents.state import Gateway
from mailui4agents.web.shapes import (
    ContactView,
    MailJson,
    RequestCard,
    RequestJson,
    mail_json,
    request_json,
)
from mailui4agents.wire.email import WorkspaceAliasOut
from mailui4agents.wire.models import (
    AgentOut,
    AttachmentRef,
    GrantOut,
    MailOut,
    PermissionOut,
    SessionOut,
    Suggestions,
    UserOut,
)
from mailui4agents.wire.online import AgentStatusOut

# What the web layer raises for a caller's mistake (status, code, message, field),
# and everything a page catches: services raise domain errors (domain/errors.py).
ServiceError = ApiError
Choice = permission_decisions.Choice  # what a decider chose, as the pages send it
Draft = sending.Draft  # what a person sends, as the compose form gives it
require_admin = identity.require_admin  # Forbidden unless an admin: the API's check
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
    (services/logins.py)."""
    done = await logins.log_in(
        gw,
        username,
        password,
        client_address(request),
        token_name="web",
        ttl_s=gw.settings.web_session_ttl_s,
    )
    if done is None:
        raise ApiError(401, "unauthorized", logins.WRONG_PASSWORD)
    return done.token


async def authenticate(gw: Gateway, token: str) -> Principal | None:
    async with gw.read() as s:
        who = await identity.authenticate(s, token)
    return who if who is not None and who.kind == "user" else None


async def logout(gw: Gateway, who: Principal, token: str) -> None:
    """Revoke the web session's token (its open streams end too)."""
    async with gw.write() as s:
        await identity.revoke_current_token(s, who, token)


async def session_list(gw: Gateway, who: Principal, status: str | None) -> list[SessionOut]:
    async with gw.read() as s:
        items, _ = await sessions.list_sessions(s, who, status, None, None, MAX_SESSIONS, None)
    return items


async def recent_mail(gw: Gateway, who: Principal, limit: int = 300) -> list[MailJson]:
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
    return mail_json(items)  # JSON objects already (services/wire_shapes.page_items)


async def pending(gw: Gateway, who: Principal, session_id: str | None = None) -> list[RequestJson]:
    """Pending requests this person may decide (deciders only: docs/access.md)."""
    async with gw.write() as s:
        items = await deciding.requests_for(s, who, "pending", session_id, MAX_PENDING)
    return [request_json(i) for i in items]


async def session(gw: Gateway, who: Principal, session_id: str) -> tuple[SessionOut, bool]:
    """SessionOut and whether `who` may decide in it (404 when not readable)."""
    async with gw.read() as s:
        return await sessions.show_session_and_power(s, who, session_id)


async def thread(gw: Gateway, who: Principal, session_id: str) -> list[MailJson]:
    """Every mail of the session, oldest first; marks them read for `who`."""
    async with gw.write() as s:
        items, _ = await reading.session_thread(
            s, access.Reader(who), session_id, limit=MAX_THREAD, cursor=None
        )
        await reading.mark_read_request(s, who, session_id, None)
    return mail_json(items)


def _request_mail_ids(mails: list[MailJson]) -> list[str]:
    return [str(m["id"]) for m in mails if m.get("type") == MailType.PERMISSION_REQUEST]


async def thread_requests(
    gw: Gateway, who: Principal, session: SessionOut, mails: list[MailJson]
) -> dict[str, RequestCard]:
    """The requests behind the thread's request mails, by mail id
    (services/request_cards.py). For the session's deciders each is a
    PermissionOut (JSON) with where it was asked and `decided_channel` /
    `decided_device`, and `card`: the thread shows it as the request's card.
    Anyone else gets only the request's kind, which names the mail's type."""
    ids = _request_mail_ids(mails)
    if not ids:
        return {}
    async with gw.read() as s:
        cards = await request_cards.thread_requests(s, who, session.id, ids)
    out: dict[str, RequestCard] = {}
    for mail_id, card in cards.items():
        if card.request is None:
            out[mail_id] = {"kind": card.kind}
            continue
        out[mail_id] = {
            **request_json(card.request),
            "session_alias": session.alias,
            "workspace": session.workspace,
            "permission_mode": session.permission_mode,
            "decided_channel": card.decided_channel,
            "decided_device": card.decided_device,
            "card": True,
        }
    return out


async def request_kinds(gw: Gateway, mails: list[MailJson]) -> dict[str, str]:
    """The kind (approval | question) of each request mail among `mails`, by
    mail id: a mail's type in words (web/render.type_word)."""
    ids = _request_mail_ids(mails)
    if not ids:
        return {}
    async with gw.read() as s:
        return await request_cards.request_kinds(s, ids)


async def send(gw: Gateway, who: Principal, draft: sending.Draft) -> MailOut:
    """A person's mail (services/sending.py)."""
    result = await sending.send(gw, who, draft)
    # People send without relay keys, so a send is never a duplicate.
    assert isinstance(result.outcome, Sent)
    return result.outcome.mail


async def read_one_mail(gw: Gateway, who: Principal, mail_id: str) -> MailJson:
    async with gw.write() as s:
        item = await reading.read_mail(s, access.Reader(who), mail_id, body_limit=None)
    return mail_json([item])[0]


async def decide(
    gw: Gateway, who: Principal, token: str, request_id: str, choice: Choice
) -> PermissionOut:
    """Decide from the web session `token` (a paired device's: its name is
    recorded, services/deciding.py)."""
    return await deciding.decide(gw, who, request_id, choice, web_token=token)


async def request_kind(gw: Gateway, who: Principal, request_id: str) -> str:
    """The request's kind, for who may decide it (services/request_cards.py)."""
    async with gw.read() as s:
        return await request_cards.kind_for_decider(s, who, request_id)


async def update_session(
    gw: Gateway,
    who: Principal,
    session_id: str,
    *,
    alias: str | None = None,
    permission_mode: str | None = None,
    archived: bool | None = None,
) -> SessionOut:
    """The API's PATCH /sessions/{id}: archiving cancels what is pending there
    (services/sessions.update_session, the one place that does)."""
    async with gw.write() as s:
        return await sessions.update_session(s, who, session_id, alias, permission_mode, archived)


async def accept_alias(gw: Gateway, who: Principal, session_id: str) -> SessionOut:
    async with gw.write() as s:
        return await sessions.accept_proposed_alias(s, who, session_id)


async def session_grants(gw: Gateway, who: Principal, session_id: str) -> list[GrantOut]:
    """The session's standing grants (the thread page shows them to its deciders)."""
    async with gw.read() as s:
        return await grant_service.list_grants(s, who, session_id, include_revoked=False)


async def revoke_session_grant(gw: Gateway, who: Principal, session_id: str, grant_id: str) -> None:
    """Revoke a grant from its session's page: a grant of another session is
    NotFound here (whoever may revoke it there); the service checks the power."""
    async with gw.write() as s:
        standing = await grant_service.list_grants(s, who, session_id, include_revoked=False)
        if grant_id not in {g.id for g in standing}:
            raise ServiceError(404, "not_found", f"grant '{grant_id}' not found", field="grant_id")
        await grant_service.revoke_grant(s, who, grant_id)


async def suggest(gw: Gateway, who: Principal, q: str) -> Suggestions:
    async with gw.read() as s:
        return await discovery.suggest(s, access.Reader(who), q)


async def contacts(gw: Gateway, who: Principal) -> list[ContactView]:
    """The reader's contacts, each with `online` (services/online.py)."""
    async with gw.read() as s:
        found = await discovery.contacts(s, access.Reader(who))
    return [
        ContactView(
            name=c.name,
            kind=c.kind,
            last_address=c.last_address,
            unread=c.unread,
            online=online.contact_online(c, gw.hub.connected),
        )
        for c in found
    ]


async def agents_status(gw: Gateway, who: Principal) -> list[AgentStatusOut]:
    """Every agent, with details for admins and its owners (services/online.py)."""
    async with gw.read() as s:
        return await online.agents_status(s, who, gw.hub.connected)


async def grants(gw: Gateway, who: Principal) -> list[GrantOut]:
    async with gw.read() as s:
        return await grant_service.list_grants(s, who, None, include_revoked=False)


async def revoke_grant(gw: Gateway, who: Principal, grant_id: str) -> None:
    async with gw.write() as s:
        await grant_service.revoke_grant(s, who, grant_id)


async def users(gw: Gateway) -> list[UserOut]:
    async with gw.read() as s:
        return await identity.list_users(s)


async def agents(gw: Gateway) -> list[AgentOut]:
    async with gw.read() as s:
        return await agent_accounts.list_agents(s, gw.hub.connected)


async def aliases(gw: Gateway, who: Principal) -> list[WorkspaceAliasOut]:
    """The workspace aliases of new work by e-mail (services/workspace_aliases.py)."""
    async with gw.read() as s:
        return await workspace_aliases.list_aliases(s, who)


async def put_alias(gw: Gateway, who: Principal, alias: str, workspace: str) -> None:
    async with gw.write() as s:
        await workspace_aliases.put_alias(s, who, alias, workspace)


async def remove_alias(gw: Gateway, who: Principal, alias: str) -> None:
    async with gw.write() as s:
        await workspace_aliases.remove_alias(s, who, alias)


async def add_user(gw: Gateway, username: str, password: str, is_admin: bool) -> None:
    async with gw.write() as s:
        await identity.create_user(s, gw.hasher, username, password, is_admin)


async def set_admin(gw: Gateway, username: str, is_admin: bool) -> None:
    await logins.set_admin(gw, username, is_admin)


async def reset_password(
    gw: Gateway, who: Principal, token: str, username: str, password: str
) -> None:
    """A new password for `username` (services/logins.py)."""
    await logins.reset_password(gw, who, token, username, password)


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
        return await agent_accounts.rotate_key(s, name, 0)


async def revoke_key(gw: Gateway, name: str, key_id: str) -> None:
    async with gw.write() as s:
        await agent_accounts.revoke_agent_key(s, name, key_id)


async def event_head(gw: Gateway) -> int:
    return await event_stream.head_id(gw)


def open_events(request: Request, gw: Gateway, who: Principal, token: str) -> EventStream:
    """The human SSE stream (the API's, with the cookie's token instead of a header)."""
    return event_stream.open_stream(request, gw, who, token)


async def upload(request: Request, gw: Gateway, who: Principal) -> AttachmentRef:
    return await files.upload(request, who, gw)


async def download(gw: Gateway, who: Principal, attachment_id: str) -> StreamingResponse:
    return await files.download(who, gw, attachment_id, None)
