"""Participants, contacts, address suggestions and forwarding
(docs/behaviour.md#mail-strict-input-inbox, docs/behaviour.md#adoption-of-platform-sessions,
docs/access.md)."""

from __future__ import annotations

from collections import Counter
from typing import Any

import pytest
from sqlalchemy import select

from mailui4agents.db.tables import PlatformSessionRow, ReadLogRow
from mailui4agents.db.types import utcnow
from mailui4agents.state import Gateway
from mailui4agents.wire.models import to_json
from tests.conftest import Api, snapshot

pytestmark = pytest.mark.anyio


def gateway(api: Api) -> Gateway:
    gw: Gateway = api.http._transport.app.state.gateway  # type: ignore[attr-defined]
    return gw


async def get(api: Api, who: str, path: str, **params: Any) -> Any:
    r = await api.http.get(path, params=params, headers=api.auth(who))
    assert r.status_code == 200, r.text
    return r.json()


async def sent(api: Api, sender: str, to: list[str], **extra: Any) -> dict[str, Any]:
    r = await api.send(sender, to, **extra)
    assert r.status_code == 201, r.text
    mail: dict[str, Any] = r.json()
    return mail


@snapshot
async def people(api: Api) -> Api:
    await api.user("ana")
    await api.user("bob")
    # ana owns claude: she sees (and may adopt) its platform sessions.
    await api.agent("claude", workspaces=["/srv/docs", "/srv/*"], owners=["ana"])
    await api.agent("codex")
    return api


# -- participants -----------------------------------------------------------------------


async def test_participants_have_roles_as_a_set_and_a_count_of_mails_sent(people: Api) -> None:
    first = await sent(
        people, "ana", ["claude@/srv/shop.new"], cc=["bob@/srv/shop.new"], subject="Fix login"
    )
    sid = first["session_id"]
    await sent(people, "claude", [first["from"]], parent_mail_id=first["id"], body="ok")
    await sent(people, "claude", [first["from"]], parent_mail_id=first["id"], body="done")

    page = await get(people, "claude", f"/api/v1/agent/sessions/{sid}/participants", session_id=sid)
    by_name = {p["name"]: p for p in page["items"]}
    assert [p["name"] for p in page["items"]] == ["ana", "claude", "bob"]  # first appearance
    assert by_name["ana"] == {
        "address": "ana@/srv/shop.claude-fix-login",
        "name": "ana",
        "kind": "human",
        "roles": ["from", "to"],
        "mails_sent": 1,
    }
    assert by_name["claude"]["kind"] == "agent"
    assert by_name["claude"]["roles"] == ["from", "to"]
    assert by_name["claude"]["mails_sent"] == 2
    # cc'd but silent: a participant who has not spoken yet.
    assert by_name["bob"]["roles"] == ["cc"]
    assert by_name["bob"]["mails_sent"] == 0
    assert page["next_cursor"] is None


async def test_participants_are_refused_to_outsiders_and_across_workspaces(people: Api) -> None:
    shop = await sent(people, "ana", ["claude@/srv/shop.new"], subject="Shop")
    blog = await sent(people, "ana", ["claude@/srv/blog.new"], subject="Blog")
    path = f"/api/v1/agent/sessions/{shop['session_id']}/participants"

    outsider = await people.http.get(path, headers=people.auth("codex"))
    assert outsider.status_code == 400  # no scope: participants need one
    unscoped = await people.http.get(path, headers=people.auth("claude"))
    assert unscoped.status_code == 400
    assert unscoped.json()["error"]["field"] == "session_id"
    across = await people.http.get(
        path, params={"session_id": blog["session_id"]}, headers=people.auth("claude")
    )
    assert across.status_code == 404
    # A scope the agent is not in never widens anything either.
    foreign = await sent(people, "bob", ["codex@/srv/shop.new"], subject="Other")
    r = await people.http.get(
        path, params={"session_id": foreign["session_id"]}, headers=people.auth("claude")
    )
    assert r.status_code == 404
    same = await people.http.get(
        path, params={"session_id": shop["session_id"]}, headers=people.auth("claude")
    )
    assert same.status_code == 200


# -- contacts ---------------------------------------------------------------------------


async def test_contacts_unread_counts_agree_with_the_inbox(people: Api) -> None:
    a1 = await sent(people, "ana", ["claude@/srv/shop.new"], subject="One")
    await sent(people, "ana", [a1["to"][0]], subject="Two")
    await sent(people, "bob", ["claude@/srv/shop.new"], subject="Three")
    await sent(
        people,
        "claude",
        ["codex@/srv/shop.new"],
        subject="Ask codex",
        from_session_id=a1["session_id"],
    )
    # claude reads ana's first mail: one of ana's two stays unread.
    r = await people.http.get(f"/api/v1/agent/mail/{a1['id']}", headers=people.auth("claude"))
    assert r.status_code == 200

    contacts = (await get(people, "claude", "/api/v1/agent/contacts", session_id=a1["session_id"]))[
        "items"
    ]
    unread = {c["name"]: c["unread"] for c in contacts}
    inbox = await get(people, "claude", "/api/v1/agent/inbox", status="unread")
    from_inbox = Counter(item["from"].split("@")[0] for item in inbox["items"])
    assert unread == {"ana": 1, "bob": 1, "codex": 0}
    assert {n: c for n, c in unread.items() if c} == dict(from_inbox)
    kinds = {c["name"]: c["kind"] for c in contacts}
    assert kinds == {"ana": "human", "bob": "human", "codex": "agent"}
    assert contacts[0]["name"] == "codex"  # most recent exchange first
    assert contacts[0]["last_address"] == "codex@/srv/shop.codex-ask-codex"

    # ana's side: claude is a contact, and ana has no unread mail from anyone.
    ana = (await get(people, "ana", "/api/v1/contacts"))["items"]
    assert [(c["name"], c["unread"]) for c in ana] == [("claude", 0)]


async def test_contacts_of_a_scoped_agent_stay_in_its_workspace(people: Api) -> None:
    shop = await sent(people, "ana", ["claude@/srv/shop.new"], subject="Shop")
    await sent(people, "bob", ["claude@/srv/blog.new"], subject="Blog")
    scoped = await get(people, "claude", "/api/v1/agent/contacts", session_id=shop["session_id"])
    assert [c["name"] for c in scoped["items"]] == ["ana"]
    everywhere = await people.http.get("/api/v1/agent/contacts", headers=people.auth("claude"))
    assert everywhere.status_code == 400  # without a scope, no contacts (docs/access.md)


# -- address suggestions ----------------------------------------------------------------


async def test_suggest_completes_names_of_users_and_agents_by_prefix(people: Api) -> None:
    await people.user("clara")
    out = await get(people, "ana", "/api/v1/contacts/suggest", q="cl")
    assert out["names"] == [
        {"name": "clara", "kind": "human"},
        {"name": "claude", "kind": "agent"},
    ]
    assert out["paths"] == out["sessions"] == []
    work = await sent(people, "ana", ["codex@/srv/shop.new"], subject="work")
    agent = await get(
        people, "codex", "/api/v1/agent/contacts/suggest", q="CO", session_id=work["session_id"]
    )
    assert agent["names"] == [{"name": "codex", "kind": "agent"}]


async def test_suggest_paths_most_recent_first_then_declared_workspaces(people: Api) -> None:
    await sent(people, "ana", ["claude@/srv/shop.new"], subject="Shop")
    blog = await sent(people, "ana", ["claude@/srv/blog.new"], subject="Blog")
    await sent(people, "bob", ["codex@/srv/secret.new"], subject="Not ana's")

    out = await get(people, "ana", "/api/v1/contacts/suggest", q="claude@/srv/")
    assert [(p["path"], p["declared"]) for p in out["paths"]] == [
        ("/srv/blog", False),
        ("/srv/shop", False),
        ("/srv/docs", True),  # claude's declared workspace, no mail yet
    ]
    assert out["paths"][0]["address"] == "claude@/srv/blog"
    assert out["names"] == []

    # A mail to the shop makes it the most recent.
    await sent(people, "ana", ["claude@/srv/shop.claude-shop"], subject="again")
    out = await get(people, "ana", "/api/v1/contacts/suggest", q="claude@/srv/")
    assert [p["path"] for p in out["paths"]][:2] == ["/srv/shop", "/srv/blog"]

    # An agent scoped to a session sees only that session's workspace.
    scoped = await get(
        people,
        "claude",
        "/api/v1/agent/contacts/suggest",
        q="ana@/",
        session_id=blog["session_id"],
    )
    assert [p["path"] for p in scoped["paths"]] == ["/srv/blog"]
    # Without a scope an agent gets no suggestions at all (docs/access.md).
    unscoped = await people.http.get(
        "/api/v1/agent/contacts/suggest", params={"q": "ana@/"}, headers=people.auth("claude")
    )
    assert unscoped.status_code == 400
    assert unscoped.json()["error"]["field"] == "session_id"


async def test_suggest_sessions_of_name_and_path_plus_adoptable_platform_sessions(
    people: Api,
) -> None:
    fix = await sent(people, "ana", ["claude@/srv/shop.new"], subject="Fix login")
    await sent(people, "ana", ["claude@/srv/shop.new"], subject="Tests")
    await sent(people, "ana", ["codex@/srv/shop.new"], subject="Not claude")
    await sent(people, "bob", ["claude@/srv/shop.new"], subject="Bobs secret")
    async with gateway(people).db.write() as s:
        s.add_all(
            [
                PlatformSessionRow(
                    agent_name="claude", platform_id="p-1", slug="terminal-work",
                    title="Terminal work", cwd="/srv/shop", updated_at=utcnow(),
                ),
                PlatformSessionRow(
                    agent_name="claude", platform_id="p-2", slug="adopted-one",
                    cwd="/srv/shop", adopted_session_id=fix["session_id"],
                ),
                PlatformSessionRow(
                    agent_name="claude", platform_id="p-3", slug="elsewhere", cwd="/srv/blog",
                ),
                PlatformSessionRow(
                    agent_name="codex", platform_id="p-4", slug="codex-term", cwd="/srv/shop",
                ),
            ]
        )  # fmt: skip

    out = await get(people, "ana", "/api/v1/contacts/suggest", q="claude@/srv/shop.")
    got = [(x["alias"], x["adoptable"]) for x in out["sessions"]]
    assert got == [("claude-tests", False), ("claude-fix-login", False), ("terminal-work", True)]
    assert out["sessions"][1]["address"] == "claude@/srv/shop.claude-fix-login"
    assert out["sessions"][1]["session_id"] == fix["session_id"]
    adoptable = out["sessions"][2]
    assert adoptable["address"] == "claude@/srv/shop.terminal-work"
    assert adoptable["title"] == "Terminal work"
    assert adoptable["session_id"] is None

    partial = await get(people, "ana", "/api/v1/contacts/suggest", q="claude@/srv/shop.claude-f")
    assert [x["alias"] for x in partial["sessions"]] == ["claude-fix-login"]
    term = await get(people, "ana", "/api/v1/contacts/suggest", q="claude@/srv/shop.term")
    assert [x["alias"] for x in term["sessions"]] == ["terminal-work"]

    # Scoped to the shop session, claude sees shop sessions; scoped elsewhere, none.
    blog = await sent(people, "ana", ["claude@/srv/blog.new"], subject="Blog")
    mine = await get(
        people,
        "claude",
        "/api/v1/agent/contacts/suggest",
        q="ana@/srv/shop.",
        session_id=fix["session_id"],
    )
    assert [x["alias"] for x in mine["sessions"]] == ["claude-tests", "claude-fix-login"]
    across = await get(
        people,
        "claude",
        "/api/v1/agent/contacts/suggest",
        q="ana@/srv/shop.",
        session_id=blog["session_id"],
    )
    assert across["sessions"] == []
    assert across["paths"] == []


async def test_suggest_keeps_dots_of_a_path_apart_from_the_session_part(people: Api) -> None:
    first = await sent(people, "ana", ["claude@/srv/my.app.new"], subject="Dots")
    assert first["workspace"] == "/srv/my.app"
    out = await get(people, "ana", "/api/v1/contacts/suggest", q="claude@/srv/my.app.claude-d")
    assert [x["address"] for x in out["sessions"]] == ["claude@/srv/my.app.claude-dots"]
    out = await get(people, "ana", "/api/v1/contacts/suggest", q="claude@/srv/my.a")
    assert [p["path"] for p in out["paths"]] == ["/srv/my.app"]


# -- forward ----------------------------------------------------------------------------


async def read_log(api: Api, reader: str, action: str) -> list[ReadLogRow]:
    async with gateway(api).db.read() as s:
        rows = await s.scalars(
            select(ReadLogRow).where(ReadLogRow.reader == reader, ReadLogRow.action == action)
        )
        return list(rows.all())


async def test_forward_quotes_the_original_to_new_recipients(people: Api) -> None:
    original = await sent(
        people,
        "ana",
        ["claude@/srv/shop.new"],
        cc=["bob@/srv/shop.new"],
        subject="Fix login",
        body="The login page returns 500.\nSee the logs.",
    )
    sid = original["session_id"]
    r = await people.http.post(
        f"/api/v1/agent/mail/{original['id']}/forward",
        json={"to": ["codex@/srv/shop.new"], "note": "Can you take this?", "session_id": sid},
        headers=people.auth("claude"),
    )
    assert r.status_code == 201, r.text
    fwd = r.json()
    assert fwd["subject"] == "Fwd: Fix login"
    assert fwd["to"] == ["codex@/srv/shop.codex-fwd-fix-login"]
    assert fwd["session_id"] != sid
    assert fwd["body"] == (
        "Can you take this?\n\n"
        "---------- Forwarded mail ----------\n"
        "From: ana@/srv/shop.claude-fix-login\n"
        "To: claude@/srv/shop.claude-fix-login\n"
        "Cc: bob@/srv/shop.claude-fix-login\n"
        f"Date: {original['created_at']}\n"
        "Subject: Fix login\n"
        "\n"
        "The login page returns 500.\nSee the logs."
    )
    inbox = await get(people, "codex", "/api/v1/agent/inbox")
    assert [m["id"] for m in inbox["items"]] == [fwd["id"]]

    [logged] = await read_log(people, "claude", "forward")
    assert (logged.mail_id, logged.session_id, logged.scope_session_id) == (
        original["id"],
        sid,
        sid,
    )

    # A human forwards too; forwarding a forward does not stack prefixes.
    again = await people.http.post(
        f"/api/v1/mail/{fwd['id']}/forward",
        json={"to": ["bob@/srv/shop.new"]},
        headers=people.auth("admin"),
    )
    assert again.status_code == 201, again.text
    assert again.json()["subject"] == "Fwd: Fix login"
    assert again.json()["body"].startswith("---------- Forwarded mail ----------\n")


async def test_forward_carries_the_original_attachments(people: Api) -> None:
    up = await people.http.post(
        "/api/v1/attachments",
        files={"file": ("report.txt", b"quarterly numbers", "text/plain")},
        headers=people.auth("ana"),
    )
    assert up.status_code == 201, up.text
    aid = up.json()["attachment_id"]
    original = await sent(
        people, "ana", ["claude@/srv/shop.new"], subject="Report", attachment_ids=[aid]
    )
    r = await people.http.post(
        f"/api/v1/agent/mail/{original['id']}/forward",
        json={"to": ["codex@/srv/shop.new"], "session_id": original["session_id"]},
        headers=people.auth("claude"),
    )
    assert r.status_code == 201, r.text
    assert [a["attachment_id"] for a in r.json()["attachments"]] == [aid]
    # codex may now download it, in the scope of the forwarded mail's session.
    got = await people.http.get(
        f"/api/v1/agent/attachments/{aid}",
        params={"session_id": r.json()["session_id"]},
        headers=people.auth("codex"),
    )
    assert got.status_code == 200
    assert got.content == b"quarterly numbers"


async def test_forward_needs_read_permission_and_stays_in_the_scope(people: Api) -> None:
    shop = await sent(people, "ana", ["claude@/srv/shop.new"], subject="Shop secret")
    blog = await sent(people, "ana", ["claude@/srv/blog.new"], subject="Blog")
    path = f"/api/v1/agent/mail/{shop['id']}/forward"
    body = {"to": ["bob@/srv/shop.new"]}

    outsider = await people.http.post(path, json=body, headers=people.auth("codex"))
    assert outsider.status_code == 400  # no scope: an agent forwards nothing
    assert outsider.json()["error"]["field"] == "session_id"
    unscoped = await people.http.post(path, json=body, headers=people.auth("claude"))
    assert unscoped.status_code == 400
    human = await people.http.post(
        f"/api/v1/mail/{shop['id']}/forward", json=body, headers=people.auth("bob")
    )
    assert human.status_code == 404
    across = await people.http.post(
        path, json={**body, "session_id": blog["session_id"]}, headers=people.auth("claude")
    )
    assert across.status_code == 404
    assert across.json()["error"]["code"] == "not_found"
    # Nothing was sent, nothing was read.
    assert (await get(people, "bob", "/api/v1/mailbox"))["items"] == []
    assert await read_log(people, "claude", "forward") == []
    assert await read_log(people, "codex", "forward") == []


async def test_forward_body_is_strict(people: Api) -> None:
    shop = await sent(people, "ana", ["claude@/srv/shop.new"], subject="Shop")
    r = await people.http.post(
        f"/api/v1/agent/mail/{shop['id']}/forward",
        json={"to": ["bob@/srv/shop.new"], "comment": "typo of note"},
        headers=people.auth("claude"),
    )
    assert r.status_code == 400
    err = r.json()["error"]
    assert err["code"] == "unknown_field"
    assert err["field"] == "comment"
    assert set(err["accepted_fields"]) == {"to", "cc", "note", "session_id"}
    human = await people.http.post(
        f"/api/v1/mail/{shop['id']}/forward",
        json={"to": ["bob@/srv/shop.new"], "session_id": shop["session_id"]},
        headers=people.auth("ana"),
    )
    assert human.status_code == 400
    assert human.json()["error"]["field"] == "session_id"


async def test_openapi_lists_the_discovery_routes(people: Api) -> None:
    doc = (await people.http.get("/api/v1/openapi.json")).json()
    routes = {(m, p) for p, ops in doc["paths"].items() for m in ops}
    assert {
        ("post", "/api/v1/agent/mail/{mail_id}/forward"),
        ("get", "/api/v1/agent/sessions/{id}/participants"),
        ("get", "/api/v1/agent/contacts"),
        ("get", "/api/v1/agent/contacts/suggest"),
        ("get", "/api/v1/agent/search"),
        ("post", "/api/v1/mail/{mail_id}/forward"),
        ("get", "/api/v1/contacts"),
        ("get", "/api/v1/contacts/suggest"),
        ("get", "/api/v1/search"),
    } <= routes


# -- client and command line ------------------------------------------------------------


async def test_client_methods_use_the_agent_or_the_human_routes(people: Api) -> None:
    from mailui4agents.client import AsyncClient, ClientConfig

    first = await sent(people, "ana", ["claude@/srv/shop.new"], subject="Fix login", body="500!")
    sid = first["session_id"]
    transport = people.http._transport
    agent = ClientConfig(url="http://gw", key=people.tokens["claude"], agent_name="claude")
    async with AsyncClient(agent, transport=transport) as claude:
        [hit] = (await claude.search_mail("login", session_id=sid)).items
        assert hit.id == first["id"]
        assert (hit.model_extra or {})["snippet"] == "500!"
        people_in = await claude.participants(sid)
        assert [(p.name, p.mails_sent) for p in people_in] == [("ana", 1), ("claude", 0)]
        assert [c.name for c in await claude.contacts(session_id=sid)] == ["ana"]
        hints = await claude.suggest_address("ana@/srv/shop.", session_id=sid)
        assert [x.alias for x in hints.sessions] == ["claude-fix-login"]
        fwd = await claude.forward_mail(
            first["id"], ["codex@/srv/shop.new"], note="FYI", session_id=sid
        )
        assert fwd.subject == "Fwd: Fix login"
    human = ClientConfig(url="http://gw", token=people.tokens["ana"])
    async with AsyncClient(human, transport=transport) as ana:
        assert [m.id for m in (await ana.search_mail("login")).items] == [first["id"]]
        assert [c.name for c in await ana.contacts()] == ["claude"]
        names = (await ana.suggest_address("cod")).names
        assert [to_json(n) for n in names] == [{"name": "codex", "kind": "agent"}]
        again = await ana.forward_mail(first["id"], ["bob@/srv/shop.new"])
        assert again.body.endswith("500!")
        with pytest.raises(ValueError, match="only agents"):
            await ana.search_mail("login", session_id=sid)


@pytest.mark.e2e
def test_cli_search_contacts_and_forward(gateway_process: Any, tmp_path: Any) -> None:
    import json

    import httpx
    from click.testing import CliRunner

    from mailui4agents.cli.main import main
    from tests.conftest import ADMIN_PASSWORD

    with httpx.Client(base_url=gateway_process.url, timeout=30) as http:
        token = http.post(
            "/api/v1/auth/login", json={"username": "admin", "password": ADMIN_PASSWORD}
        ).json()["token"]
        admin = {"Authorization": f"Bearer {token}"}
        where = {"workspaces": ["/srv/*"]}
        key = http.post(
            "/api/v1/admin/agents", json={"name": "claude", **where}, headers=admin
        ).json()
        http.post("/api/v1/admin/agents", json={"name": "codex", **where}, headers=admin)
        mail = http.post(
            "/api/v1/mail",
            json={"to": ["claude@/srv/shop.new"], "subject": "Fix login", "body": "It fails"},
            headers=admin,
        ).json()

    env = {
        "AGENTMAIL_URL": gateway_process.url,
        "AGENTMAIL_KEY": key["key"],
        "AGENTMAIL_TOKEN": None,
        "AGENTMAIL_AGENT": None,
        "AGENTMAIL_SESSION_ID": mail["session_id"],
        "XDG_CONFIG_HOME": str(tmp_path / "xdg"),
    }
    runner = CliRunner()
    found = runner.invoke(main, ["search", "fails"], env=env)
    assert found.exit_code == 0, found.output
    assert mail["id"] in found.output and "**fails**" in found.output
    listed = runner.invoke(main, ["contacts", "--json"], env=env)
    assert listed.exit_code == 0, listed.output
    assert [c["name"] for c in json.loads(listed.output)] == ["admin"]
    fwd = runner.invoke(
        main, ["forward", mail["id"], "--to", "codex@/srv/shop.new", "--note", "FYI"], env=env
    )
    assert fwd.exit_code == 0, fwd.output
    assert fwd.output.startswith("Forwarded as ")
    # A scope session the agent is not in (or that does not exist) is refused.
    env_other = {**env, "AGENTMAIL_SESSION_ID": None}
    missing = runner.invoke(main, ["search", "--session", "nope", "fails"], env=env_other)
    assert missing.exit_code == 1
    assert "not found" in missing.output
