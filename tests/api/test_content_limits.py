"""Every size and count has a limit (docs/limits.md), from settings, checked before
anything is written: recipients, mail body and subject, approval texts,
tool_input, question options, heartbeats. Inbox bodies are previews by default."""

from __future__ import annotations

import asyncio
import json
from collections.abc import AsyncIterator, Iterator
from contextlib import asynccontextmanager, contextmanager
from pathlib import Path
from typing import Any

import httpx
import pytest
from fastapi import FastAPI
from sqlalchemy import event

from mailui4agents.settings import Settings
from mailui4agents.state import Gateway
from tests.conftest import ADMIN_PASSWORD, Api, fast_settings, started_app

pytestmark = pytest.mark.anyio

SMALL = {
    "max_recipients": 5,
    "mail_body_max_bytes": 100,
    "subject_max_bytes": 20,
    "text_max_bytes": 50,
    "tool_input_max_bytes": 100,
    "question_options_max": 3,
    "option_max_bytes": 10,
    "heartbeat_max_bytes": 2048,
    "heartbeat_list_max": 3,
    "inbox_preview_chars": 10,
}


@pytest.fixture
def settings(tmp_path: Path) -> Settings:
    return fast_settings(tmp_path, **SMALL)


@pytest.fixture
async def app(settings: Settings) -> AsyncIterator[FastAPI]:
    async with started_app(settings) as app:
        yield app


@pytest.fixture
async def api(app: FastAPI) -> AsyncIterator[Api]:
    transport = httpx.ASGITransport(app=app)
    async with httpx.AsyncClient(transport=transport, base_url="http://gw") as http:
        a = Api(http)
        await a.login("admin", ADMIN_PASSWORD)
        for name in ("claude", "codex", "gemini"):
            await a.agent(name)
        for name in ("ana", "bob", "carl"):
            await a.user(name)
        yield a


def err(r: httpx.Response, status: int) -> dict[str, Any]:
    assert r.status_code == status, r.text
    e: dict[str, Any] = r.json()["error"]
    return e


# --- recipients ---

FIVE = [
    "claude@/srv/shop",
    "codex@/srv/shop",
    "gemini@/srv/shop",
    "bob@/srv/shop",
    "carl@/srv/shop",
]


@pytest.mark.parametrize("sender", ["ana", "claude"])
async def test_recipients_over_the_cap_are_refused_naming_to_or_cc(api: Api, sender: str) -> None:
    to_six = [*FIVE, "ana@/srv/shop"]
    e = err(await api.send(sender, to_six), 400)
    assert (e["code"], e["field"], e["limit"]) == ("invalid_value", "to", 5)
    e = err(await api.send(sender, FIVE[:3], cc=[*FIVE[3:], "ana@/srv/shop"]), 400)
    assert (e["code"], e["field"]) == ("invalid_value", "cc")
    # The other side: exactly the cap is delivered (an agent sets others to work
    # from a session a person started with it, docs/access.md).
    others = [a for a in [*FIVE, "ana@/srv/shop"] if not a.startswith(sender)]
    extra = {}
    if sender == "claude":
        work = await api.send("ana", ["claude@/srv/shop.new"], subject="work")
        extra = {"from_session_id": work.json()["session_id"]}
    r = await api.send(sender, others[:3], cc=others[3:5], **extra)
    assert r.status_code == 201, r.text
    assert len(r.json()["to"]) + len(r.json()["cc"]) == 5


@asynccontextmanager
async def default_api(tmp_path: Path) -> AsyncIterator[Api]:
    """A gateway with the default limits."""
    async with (
        started_app(fast_settings(tmp_path / "default")) as app,
        httpx.AsyncClient(transport=httpx.ASGITransport(app=app), base_url="http://gw") as http,
    ):
        a = Api(http)
        await a.login("admin", ADMIN_PASSWORD)
        yield a


async def test_the_recipient_cap_defaults_to_100(tmp_path: Path) -> None:
    assert Settings().max_recipients == 100
    async with default_api(tmp_path) as a:
        # Refused before any name is looked up: none of these names exists.
        e = err(await a.send("admin", [f"n{i}@/x" for i in range(101)]), 400)
        assert (e["field"], e["limit"]) == ("to", 100)
        e = err(await a.send("admin", [f"n{i}@/x" for i in range(100)]), 400)
        assert e["field"] == "to[0]"  # 100 passes the cap: now the names count


@contextmanager
def statements(gw: Gateway) -> Iterator[list[tuple[str, str]]]:
    """(engine role, SQL) of every statement the gateway runs meanwhile for this
    test's own requests: only the statements of the calling task (httpx's ASGI
    transport runs the app in it, as tests/api/test_send_cost.Statements counts),
    so a background pass of the scheduler or a sender that falls inside the
    window is not the request's cost."""
    seen: list[tuple[str, str]] = []
    hooks = []
    task = asyncio.current_task()

    def ours() -> bool:
        try:
            return asyncio.current_task() is task
        except RuntimeError:  # no running loop (a pool thread)
            return False

    for role, engine in (("reader", gw.db.reader), ("writer", gw.db.writer)):

        def hook(conn: Any, cursor: Any, sql: str, *args: Any, _role: str = role) -> None:
            if ours():
                seen.append((_role, " ".join(sql.split())))

        event.listen(engine.sync_engine, "before_cursor_execute", hook)
        hooks.append((engine, hook))
    try:
        yield seen
    finally:
        for engine, hook in hooks:
            event.remove(engine.sync_engine, "before_cursor_execute", hook)


def principal_lookups(seen: list[tuple[str, str]], role: str) -> int:
    return sum(
        1
        for r, sql in seen
        if r == role and sql.startswith("SELECT") and ("FROM agents" in sql or "FROM users" in sql)
    )


@pytest.mark.parametrize("sender", ["ana", "claude"])
async def test_recipients_are_looked_up_in_one_query_before_the_write_and_stored_in_bulk(
    api: Api, app: FastAPI, sender: str
) -> None:
    gw: Gateway = app.state.gateway
    # A human first: with one, the new session gets its owner row either way; an
    # agent second: each mail sets an agent to work, so each checks who may
    # (services/tasking.py), claude's from a session ana started with it.
    everyone = ["bob@/srv/shop", "gemini@/srv/shop", "ana@/srv/shop", *FIVE]
    others = list(dict.fromkeys(a for a in everyone if not a.startswith(sender)))
    extra = {}
    if sender == "claude":
        work = await api.send("ana", ["claude@/srv/shop.new"], subject="work")
        extra = {"from_session_id": work.json()["session_id"]}
    # The sender's token used once before: on SQLite its principal is then
    # cached (services/identity.py), on PostgreSQL read each time — the same
    # count for both sends either way.
    warm = "/api/v1/agent/inbox" if sender == "claude" else "/api/v1/auth/tokens"
    assert (await api.http.get(warm, headers=api.auth(sender))).status_code == 200
    counts = []
    for n in (2, 5):
        with statements(gw) as seen:
            to = [a.replace("/srv/shop", f"/w{n}.new") for a in others[:n]]
            r = await api.send(sender, to, **extra)
            assert r.status_code == 201, r.text
        counts.append(
            (
                principal_lookups(seen, "reader"),
                principal_lookups(seen, "writer"),
                sum(role == "writer" for role, _ in seen),  # recipients and events in bulk
            )
        )
    assert counts[0] == counts[1], counts  # not one lookup, nor one insert, per recipient
    # The five recipients were looked up on a reader, not inside BEGIN IMMEDIATE
    # (the one writer every other request waits for).
    # (The write's own check of who may set the agents to work reads their
    # policies inside it, services/tasking.py: a tasker removed a moment before
    # must not be let through by an answer read earlier.)
    lookups = [
        (role, sql)
        for role, sql in seen
        if " IN (" in sql and "FROM agents" in sql and "workspace_roots" not in sql
    ]
    assert [role for role, _ in lookups] == ["reader"], lookups


# --- mail texts ---


@pytest.mark.parametrize("sender", ["ana", "claude"])
async def test_a_mail_body_or_subject_over_its_limit_is_413_naming_it(
    api: Api, sender: str
) -> None:
    to = ["bob@/srv/shop.new"] if sender == "claude" else ["claude@/srv/shop.new"]
    e = err(await api.send(sender, to, body="é" * 51), 413)  # 102 bytes
    assert (e["code"], e["field"], e["limit"]) == ("too_large", "body", 100)
    e = err(await api.send(sender, to, subject="s" * 21), 413)
    assert (e["code"], e["field"], e["limit"]) == ("too_large", "subject", 20)
    r = await api.send(sender, to, subject="s" * 20, body="é" * 50)  # exactly at the limits
    assert r.status_code == 201, r.text


async def test_a_forward_note_over_its_limit_is_413(api: Api) -> None:
    m = (await api.send("ana", ["claude@/srv/shop.new"])).json()
    url = f"/api/v1/mail/{m['id']}/forward"
    r = await api.http.post(url, json={"to": ["bob@/x"], "note": "n" * 51}, headers=api.auth("ana"))
    assert err(r, 413)["field"] == "note"
    r = await api.http.post(url, json={"to": ["bob@/x"], "note": "n" * 50}, headers=api.auth("ana"))
    assert r.status_code == 201, r.text


# --- approvals ---


@pytest.fixture
async def session(api: Api) -> dict[str, Any]:
    return dict((await api.send("ana", ["claude@/srv/shop.new"], subject="Fix")).json())


async def ask(api: Api, session: dict[str, Any], **extra: Any) -> httpx.Response:
    body = {"session_id": session["session_id"], "relay_key": "k", **extra}
    return await api.http.post("/api/v1/agent/permissions", json=body, headers=api.auth("claude"))


@pytest.mark.parametrize(
    ("extra", "status", "field"),
    [
        ({"tool_name": "Bash", "tool_input": {"command": "x" * 100}}, 413, "tool_input"),
        ({"tool_name": "Bash", "summary": "s" * 51}, 413, "summary"),
        ({"kind": "question", "question": "q" * 51, "options": [{"label": "a"}]}, 413, "question"),
        (
            {"kind": "question", "question": "q", "options": [{"label": str(i)} for i in range(4)]},
            400,
            "options",
        ),
        (
            {
                "kind": "question",
                "question": "q",
                "options": [{"label": "a", "description": "d" * 11}],
            },
            413,
            "options[0].description",
        ),
    ],
    ids=["tool_input", "summary", "question", "options", "option-description"],
)
async def test_a_request_over_a_limit_is_refused_naming_the_field(
    api: Api, session: dict[str, Any], extra: dict[str, Any], status: int, field: str
) -> None:
    e = err(await ask(api, session, **extra), status)
    assert e["field"] == field


async def test_a_request_at_the_limits_is_accepted(api: Api, session: dict[str, Any]) -> None:
    r = await ask(
        api, session, tool_name="Bash", tool_input={"command": "x" * 80}, summary="s" * 50
    )
    assert r.status_code == 201, r.text
    options = [{"label": str(i), "description": "d" * 10} for i in range(3)]
    r = await api.http.post(
        "/api/v1/agent/permissions",
        json={"session_id": session["session_id"], "relay_key": "q", "kind": "question",
              "question": "q" * 50, "options": options},
        headers=api.auth("claude"),
    )  # fmt: skip
    assert r.status_code == 201, r.text


async def test_a_decision_note_or_answers_over_their_limits_are_refused(
    api: Api, session: dict[str, Any]
) -> None:
    req = (await ask(api, session, tool_name="Bash", tool_input={"command": "ls"})).json()
    url = f"/api/v1/permissions/{req['id']}/decision"
    r = await api.http.post(
        url, json={"decision": "deny", "note": "n" * 51}, headers=api.auth("ana")
    )
    assert err(r, 413)["field"] == "note"
    r = await api.http.post(
        url, json={"decision": "deny", "answers": ["a"] * 4}, headers=api.auth("ana")
    )
    assert err(r, 400)["field"] == "answers"
    r = await api.http.post(
        url, json={"decision": "deny", "note": "n" * 50}, headers=api.auth("ana")
    )
    assert r.status_code == 200, r.text


# --- heartbeats ---


def platform_sessions(n: int) -> list[dict[str, str]]:
    return [
        {"platform_id": f"p{i}", "slug": f"s{i}", "title": "t", "cwd": "/w",
         "updated_at": "2026-01-01T00:00:00Z"}
        for i in range(n)
    ]  # fmt: skip


@pytest.mark.parametrize(
    ("body", "status", "field"),
    [
        ({"platform_sessions": platform_sessions(4)}, 400, "platform_sessions"),
        ({"workspaces": ["/a", "/b", "/c", "/d"]}, 400, "workspaces"),
        ({"status": "s" * 201}, 413, "status"),
        ({"platform_sessions": [{**platform_sessions(1)[0], "title": "t" * 1025}]}, 413,
         "platform_sessions[0].title"),
        ({"pending": "x" * 3000}, 413, "body"),  # over heartbeat_max_bytes as a whole
    ],
    ids=["sessions", "workspaces", "status", "title", "unknown-field"],
)  # fmt: skip
async def test_a_heartbeat_over_a_limit_is_refused_naming_the_field(
    api: Api, body: dict[str, Any], status: int, field: str
) -> None:
    e = err(
        await api.http.post("/api/v1/agent/heartbeat", json=body, headers=api.auth("claude")),
        status,
    )
    assert e["field"] == field
    ok = await api.http.post(
        "/api/v1/agent/heartbeat",
        json={"platform_sessions": platform_sessions(3), "workspaces": ["/a"], "status": "s" * 200},
        headers=api.auth("claude"),
    )
    assert ok.status_code == 200, ok.text


async def test_a_heartbeat_with_50k_platform_sessions_is_refused_before_it_is_parsed(
    tmp_path: Path,
) -> None:
    async with default_api(tmp_path) as a:
        await a.agent("claude")
        raw = json.dumps({"platform_sessions": platform_sessions(50_000)}).encode()
        assert len(raw) > 1024 * 1024
        r = await a.http.post(
            "/api/v1/agent/heartbeat",
            content=raw,
            headers={**a.auth("claude"), "Content-Type": "application/json"},
        )
        assert (r.status_code, r.json()["error"]["field"]) == (413, "body")
        # 201 sessions fit in the body limit but not in the list limit (200).
        r = await a.http.post(
            "/api/v1/agent/heartbeat",
            json={"platform_sessions": platform_sessions(201)},
            headers=a.auth("claude"),
        )
        assert (r.status_code, r.json()["error"]["field"]) == (400, "platform_sessions")


# --- inbox previews ---


@pytest.mark.parametrize(
    ("path", "reader", "sender", "to"),
    [
        ("/api/v1/agent/inbox?status=all", "claude", "ana", "claude@/srv/shop.new"),
        ("/api/v1/mailbox?status=all", "ana", "claude", "ana@/srv/shop.new"),
    ],
)
async def test_inbox_bodies_are_previews_unless_asked_for_more(
    api: Api, path: str, reader: str, sender: str, to: str
) -> None:
    body = "0123456789abcdefghij"  # 20 characters; the preview is 10
    m = (await api.send(sender, [to], body=body)).json()

    async def listed(query: str = "") -> dict[str, Any]:
        r = await api.http.get(path + query, headers=api.auth(reader))
        assert r.status_code == 200, r.text
        item: dict[str, Any] = next(i for i in r.json()["items"] if i["id"] == m["id"])
        return item

    item = await listed()
    assert (item["body"], item["body_truncated"]) == (body[:10], True)
    item = await listed("&body_limit=0")
    assert (item["body"], item["body_truncated"]) == (body, False)
    item = await listed("&body_limit=15")
    assert (item["body"], item["body_truncated"]) == (body[:15], True)
    e = err(await api.http.get(path + "&body_limit=-1", headers=api.auth(reader)), 400)
    assert e["field"] == "body_limit"
