"""Session routing, aliases, rename, archive and the session-creation rate limit."""

from __future__ import annotations

import pytest
from sqlalchemy import select

from mailui4agents.db.tables import ReadLogRow
from tests.conftest import Api, snapshot

pytestmark = pytest.mark.anyio


@snapshot
async def people(api: Api) -> Api:
    await api.agent("claude")
    await api.agent("pi")
    await api.user("ana")
    return api


async def test_same_subject_twice_gets_numbered_aliases(people: Api) -> None:
    aliases = []
    for _ in range(3):
        r = await people.send("ana", ["claude@/srv/shop.new"], subject="Fix login bug")
        aliases.append(r.json()["session_alias"])
    assert aliases == ["claude-fix-login-bug", "claude-fix-login-bug-2", "claude-fix-login-bug-3"]


async def test_same_alias_in_another_workspace_is_not_a_collision(people: Api) -> None:
    a = await people.send("ana", ["claude@/srv/shop.new"], subject="Fix login bug")
    b = await people.send("ana", ["claude@/srv/blog.new"], subject="Fix login bug")
    assert a.json()["session_alias"] == b.json()["session_alias"] == "claude-fix-login-bug"
    assert a.json()["session_id"] != b.json()["session_id"]


async def test_chinese_subject_stays_chinese_in_the_alias(people: Api) -> None:
    r = await people.send("ana", ["pi@/srv/shop.new"], subject="重构导入路径")
    assert r.json()["session_alias"] == "pi-重构导入路径"
    assert r.json()["reply_address"] == "pi@/srv/shop.pi-重构导入路径"


async def test_known_alias_routes_to_that_session(people: Api) -> None:
    first = (await people.send("ana", ["claude@/srv/shop.new"], subject="Fix login")).json()
    again = await people.send("ana", ["claude@/srv/shop.claude-fix-login"], subject="more")
    assert again.status_code == 201
    assert again.json()["session_id"] == first["session_id"]


async def test_unknown_alias_is_404_with_close_matches_not_a_new_session(people: Api) -> None:
    await people.send("ana", ["claude@/srv/shop.new"], subject="Fix login")
    r = await people.send("ana", ["claude@/srv/shop.claude-fix-logn"], subject="typo")
    assert r.status_code == 404
    assert r.json()["error"]["close_matches"] == ["claude-fix-login"]
    sessions = (await people.http.get("/api/v1/sessions", headers=people.auth("ana"))).json()
    assert len(sessions["items"]) == 1


async def test_no_session_part_uses_the_default_session_of_name_and_path(people: Api) -> None:
    a = (await people.send("ana", ["claude@/srv/shop"], subject="one")).json()
    b = (await people.send("ana", ["claude@/srv/shop"], subject="two")).json()
    c = (await people.send("ana", ["claude@/srv/blog"], subject="three")).json()
    assert a["session_id"] == b["session_id"] != c["session_id"]


async def test_reply_goes_to_the_parent_session(people: Api) -> None:
    first = (await people.send("ana", ["claude@/srv/shop.new"], subject="Fix login")).json()
    r = await people.send("claude", ["ana@/srv/shop"], subject="Re", parent_mail_id=first["id"])
    assert r.status_code == 201, r.text
    assert r.json()["session_id"] == first["session_id"]
    assert r.json()["in_reply_to"] == first["id"]


async def test_reply_to_a_mail_one_cannot_read_is_refused(people: Api) -> None:
    first = (await people.send("ana", ["claude@/srv/shop.new"], subject="secret")).json()
    r = await people.send("pi", ["ana@/srv/shop"], subject="Re", parent_mail_id=first["id"])
    assert r.status_code == 400
    assert r.json()["error"]["field"] == "parent_mail_id"


async def test_addresses_naming_two_sessions_are_refused(people: Api) -> None:
    await people.send("ana", ["claude@/srv/shop.new"], subject="a")
    await people.send("ana", ["pi@/srv/shop.new"], subject="b")
    r = await people.send("ana", ["claude@/srv/shop.claude-a", "pi@/srv/shop.pi-b"], subject="x")
    assert r.status_code == 400
    assert r.json()["error"]["field"] == "to"


async def test_permission_mode_is_stored_when_the_mail_creates_the_session(people: Api) -> None:
    r = await people.send("ana", ["claude@/srv/shop.new"], subject="x", permission_mode="full")
    assert r.json()["permission_mode"] == "full"
    again = await people.send(
        "ana", ["claude@/srv/shop.claude-x"], subject="y", permission_mode="plan"
    )
    assert again.status_code == 400
    assert again.json()["error"]["field"] == "permission_mode"
    default = await people.send("ana", ["claude@/srv/shop.new"], subject="z")
    assert default.json()["permission_mode"] == "workspace"


async def test_rename_wins_and_the_new_alias_routes(people: Api) -> None:
    m = (await people.send("ana", ["claude@/srv/shop.new"], subject="Fix login")).json()
    r = await people.http.patch(
        f"/api/v1/sessions/{m['session_id']}", json={"alias": "login"}, headers=people.auth("ana")
    )
    assert r.status_code == 200, r.text
    assert r.json()["alias"] == "login"
    again = await people.send("ana", ["claude@/srv/shop.login"], subject="more")
    assert again.json()["session_id"] == m["session_id"]
    bad = await people.http.patch(
        f"/api/v1/sessions/{m['session_id']}", json={"alias": "a.b"}, headers=people.auth("ana")
    )
    assert bad.status_code == 400 and bad.json()["error"]["field"] == "alias"


async def test_archive_keeps_history_and_refuses_new_mail_until_unarchived(people: Api) -> None:
    m = (await people.send("ana", ["claude@/srv/shop.new"], subject="Fix login")).json()
    path = f"/api/v1/sessions/{m['session_id']}"
    r = await people.http.patch(path, json={"archived": True}, headers=people.auth("ana"))
    assert r.json()["status"] == "archived"
    refused = await people.send("ana", ["claude@/srv/shop.claude-fix-login"], subject="more")
    assert refused.status_code == 409
    thread = await people.http.get(f"/api/v1/mail/{m['id']}/thread", headers=people.auth("ana"))
    assert [x["id"] for x in thread.json()["items"]] == [m["id"]]
    await people.http.patch(path, json={"archived": False}, headers=people.auth("ana"))
    ok = await people.send("ana", ["claude@/srv/shop.claude-fix-login"], subject="more")
    assert ok.status_code == 201


async def test_body_limit_zero_means_the_whole_body(people: Api) -> None:
    body = "line\n" * 1000 + "LAST REQUIREMENT"
    m = (await people.send("ana", ["claude@/srv/shop.new"], subject="x", body=body)).json()
    h = people.auth("claude")
    full = (await people.http.get(f"/api/v1/agent/mail/{m['id']}?body_limit=0", headers=h)).json()
    assert full["body"] == body and full["body_truncated"] is False
    cut = (await people.http.get(f"/api/v1/agent/mail/{m['id']}?body_limit=10", headers=h)).json()
    assert cut["body"] == body[:10] and cut["body_truncated"] is True


async def test_every_read_is_recorded_with_its_scope(people: Api) -> None:
    m = (await people.send("ana", ["claude@/srv/shop.new"], subject="x")).json()
    h = people.auth("claude")
    await people.http.get(f"/api/v1/agent/mail/{m['id']}?session_id={m['session_id']}", headers=h)
    app_db = people.http._transport.app.state.gateway.db  # type: ignore[attr-defined]
    async with app_db.read() as s:
        rows = (await s.scalars(select(ReadLogRow))).all()
    assert [(r.reader, r.mail_id, r.scope_session_id, r.action) for r in rows] == [
        ("claude", m["id"], m["session_id"], "read")
    ]


async def test_a_relative_workspace_is_refused_not_a_new_workspace(people: Api) -> None:
    r = await people.send("ana", ["claude@srv/shop.new"], subject="typo")
    assert r.status_code == 400
    assert r.json()["error"]["field"] == "to[0]"
    ok = await people.send("ana", ["claude@.new"], subject="no workspace")
    assert ok.status_code == 201 and ok.json()["workspace"] == ""
