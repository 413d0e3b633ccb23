"""REST calls of the client against an in-memory transport."""

from __future__ import annotations

import json
from collections.abc import Callable
from typing import Any

import httpx
import pytest

from mailui4agents.client import (
    ApiError,
    AsyncClient,
    ClientConfig,
    GatewayUnreachable,
    InboxItem,
    MailOut,
    NewMailEvent,
)
from mailui4agents.wire.models import Duplicate, to_json

AGENT = ClientConfig(url="http://gw.test", key="am_agent_k", agent_name="claude")
USER = ClientConfig(url="http://gw.test", token="am_user_t", agent_name="ignored")

MAIL: dict[str, Any] = {
    "id": "m1",
    "session_id": "s1",
    "session_alias": "fix-login",
    "workspace": "/srv/shop",
    "type": "message",
    "from": "ana@/srv/shop.fix-login",
    "from_human": True,
    "to": ["claude@/srv/shop.fix-login"],
    "cc": [],
    "subject": "hi",
    "body": "please fix",
    "body_truncated": False,
    "parent_mail_id": "m0",
    "attachments": [],
    "relay": False,
    "created_at": "2025-01-02T03:04:05Z",
    "read": False,
    "reply_address": "ana@/srv/shop.fix-login",
    "self_address": "claude@/srv/shop.fix-login",
    "a_field_from_a_newer_gateway": 1,
}

Handler = Callable[[httpx.Request], httpx.Response]


class Recorder:
    """A transport that records requests and answers from ``handler``."""

    def __init__(self, handler: Handler) -> None:
        self.requests: list[httpx.Request] = []
        self._handler = handler

    def transport(self) -> httpx.MockTransport:
        def handle(request: httpx.Request) -> httpx.Response:
            self.requests.append(request)
            return self._handler(request)

        return httpx.MockTransport(handle)


def client(config: ClientConfig, handler: Handler) -> tuple[AsyncClient, Recorder]:
    recorder = Recorder(handler)
    return AsyncClient(config, transport=recorder.transport()), recorder


@pytest.mark.anyio
async def test_an_agent_sends_on_the_agent_route_with_its_key_and_name() -> None:
    api, seen = client(AGENT, lambda request: httpx.Response(201, json=MAIL))
    async with api:
        mail = await api.send_mail(["ana@/srv/shop.fix-login"], "re: hi", "done", relay=True)

    request = seen.requests[0]
    assert request.url.path == "/api/v1/agent/mail"
    assert request.headers["authorization"] == "Bearer am_agent_k"
    assert request.headers["x-agent-name"] == "claude"
    assert json.loads(request.content) == {
        "to": ["ana@/srv/shop.fix-login"],
        "subject": "re: hi",
        "body": "done",
        "relay": True,
    }
    assert isinstance(mail, MailOut)
    assert mail.from_ == "ana@/srv/shop.fix-login"


@pytest.mark.anyio
async def test_a_human_sends_on_the_human_route_without_an_agent_name() -> None:
    api, seen = client(USER, lambda request: httpx.Response(201, json=MAIL))
    async with api:
        await api.send_mail(["claude@/srv/shop.new"], "task", "do it", permission_mode="plan")

    request = seen.requests[0]
    assert request.url.path == "/api/v1/mail"
    assert request.headers["authorization"] == "Bearer am_user_t"
    assert "x-agent-name" not in request.headers
    assert json.loads(request.content)["permission_mode"] == "plan"


@pytest.mark.anyio
async def test_a_human_passing_agent_only_options_is_refused_before_any_request() -> None:
    api, seen = client(USER, lambda request: httpx.Response(201, json=MAIL))
    async with api:
        with pytest.raises(ValueError, match="relay_key"):
            await api.send_mail(["x@."], "s", "b", relay_key="k")
    assert seen.requests == []


@pytest.mark.anyio
async def test_a_duplicate_relay_comes_back_as_the_duplicate_model() -> None:
    answer = {"status": "duplicate_relay", "mail_id": "m9"}
    api, _ = client(AGENT, lambda request: httpx.Response(200, json=answer))
    async with api:
        sent = await api.send_mail(["a@."], "s", "b", relay_key="k")
    assert isinstance(sent, Duplicate) and to_json(sent) == answer


@pytest.mark.anyio
async def test_an_error_body_becomes_an_api_error_with_every_field() -> None:
    error = {
        "code": "unknown_field",
        "message": 'field "attachment_id" is not accepted here',
        "field": "attachment_id",
        "accepted_fields": ["to", "cc", "subject", "body"],
    }
    api, _ = client(AGENT, lambda request: httpx.Response(400, json={"error": error}))
    async with api:
        with pytest.raises(ApiError) as raised:
            await api.send_mail(["a@."], "s", "b")

    assert raised.value.status == 400
    assert raised.value.code == "unknown_field"
    assert str(raised.value) == 'field "attachment_id" is not accepted here'
    assert raised.value.field == "attachment_id"
    assert raised.value.accepted_fields == ["to", "cc", "subject", "body"]
    assert raised.value.permanent is True


@pytest.mark.anyio
async def test_a_rate_limit_is_transient_and_carries_retry_after() -> None:
    def limited(request: httpx.Request) -> httpx.Response:
        body = {"error": {"code": "rate_limited", "message": "slow down"}}
        return httpx.Response(429, json=body, headers={"Retry-After": "3"})

    api, _ = client(AGENT, limited)
    async with api:
        with pytest.raises(ApiError) as raised:
            await api.heartbeat(status="idle")
    assert raised.value.permanent is False
    assert raised.value.retry_after == 3.0


@pytest.mark.anyio
async def test_a_conflict_without_a_message_names_its_reason() -> None:
    body = {"error": {"code": "conflict", "reason": "no_human"}}
    api, _ = client(AGENT, lambda request: httpx.Response(409, json=body))
    async with api:
        with pytest.raises(ApiError) as raised:
            await api.heartbeat()
    assert raised.value.message == "conflict: no_human"
    assert raised.value.detail["reason"] == "no_human"


@pytest.mark.anyio
async def test_a_network_error_is_a_transient_gateway_unreachable() -> None:
    def refuse(request: httpx.Request) -> httpx.Response:
        raise httpx.ConnectError("connection refused", request=request)

    api, _ = client(USER, refuse)
    async with api:
        with pytest.raises(GatewayUnreachable) as raised:
            await api.get_session("s1")
    assert raised.value.status is None
    assert raised.value.permanent is False
    assert "http://gw.test" in raised.value.message


@pytest.mark.anyio
async def test_login_sends_no_stale_credential_and_returns_the_token() -> None:
    answer = {"token": "am_user_new", "user": {"username": "ana", "is_admin": False}}
    api, seen = client(USER, lambda request: httpx.Response(200, json=answer))
    async with api:
        assert await api.login("ana", "secret") == "am_user_new"
    assert "authorization" not in seen.requests[0].headers
    assert seen.requests[0].url.path == "/api/v1/auth/login"


@pytest.mark.anyio
async def test_the_agent_inbox_sends_its_filters_and_parses_inbox_items() -> None:
    item = {**MAIL, "mail_id": "m1", "in_reply_to": "m0", "permission_mode": "full"}
    answer = {"items": [item], "next_cursor": "c2"}
    api, seen = client(AGENT, lambda request: httpx.Response(200, json=answer))
    async with api:
        page = await api.inbox(session_id="s1", mark_read=True, limit=10)

    params = seen.requests[0].url.params
    assert seen.requests[0].url.path == "/api/v1/agent/inbox"
    assert dict(params) == {
        "status": "unread",
        "session_id": "s1",
        "mark_read": "true",
        "limit": "10",
    }
    assert page.next_cursor == "c2"
    assert page.items[0].permission_mode == "full"


@pytest.mark.anyio
async def test_a_human_inbox_reads_the_mailbox() -> None:
    api, seen = client(USER, lambda request: httpx.Response(200, json={"items": [MAIL]}))
    async with api:
        page = await api.inbox(status="all")
    assert seen.requests[0].url.path == "/api/v1/mailbox"
    assert page.items[0].id == "m1"
    assert page.next_cursor is None


@pytest.mark.anyio
async def test_a_thread_follows_next_cursor_until_the_last_page() -> None:
    def pages(request: httpx.Request) -> httpx.Response:
        cursor = request.url.params.get("cursor")
        if cursor is None:
            return httpx.Response(200, json={"items": [MAIL], "next_cursor": "p2"})
        assert cursor == "p2"
        return httpx.Response(200, json={"items": [{**MAIL, "id": "m2"}], "next_cursor": None})

    api, seen = client(AGENT, pages)
    async with api:
        thread = await api.thread("m1", session_id="s1")

    assert [mail.id for mail in thread.items] == ["m1", "m2"]
    assert thread.next_cursor is None
    assert {r.url.path for r in seen.requests} == {"/api/v1/agent/mail/m1/thread"}
    assert {r.url.params["session_id"] for r in seen.requests} == {"s1"}


@pytest.mark.anyio
async def test_read_mail_passes_a_zero_body_limit_through() -> None:
    api, seen = client(AGENT, lambda request: httpx.Response(200, json=MAIL))
    async with api:
        await api.read_mail("m1", body_limit=0)
    assert seen.requests[0].url.params["body_limit"] == "0"


@pytest.mark.anyio
async def test_mark_read_returns_how_many_were_marked() -> None:
    api, seen = client(AGENT, lambda request: httpx.Response(200, json={"marked": 3}))
    async with api:
        assert await api.mark_read(session_id="s1") == 3
    assert json.loads(seen.requests[0].content) == {"session_id": "s1"}


def test_an_inbox_item_carries_every_field_of_the_new_mail_event() -> None:
    event_fields = {f.alias or name for name, f in NewMailEvent.model_fields.items()}
    item_fields = {f.alias or name for name, f in InboxItem.model_fields.items()}
    assert event_fields <= item_fields


def test_an_inbox_row_rebuilds_the_live_event_with_the_same_values() -> None:
    row = InboxItem.model_validate({**MAIL, "permission_mode": "full", "from_human": True})
    event = row.to_new_mail_event()
    assert event.mail_id == "m1"
    # the parent id, as docs/behaviour.md#mail-strict-input-inbox says
    assert event.in_reply_to == "m0"
    assert event.permission_mode == "full"
    assert event.from_human is True
    assert event.from_ == MAIL["from"]
    assert "body" not in event.model_dump()
