"""Who decides: a session's owners and the deciders they name (docs/access.md)."""

from __future__ import annotations

import pytest

from tests.conftest import Api
from tests.scenarios import an_agent_cannot_pick_its_own_approver

pytestmark = pytest.mark.anyio


async def test_an_agent_cannot_pick_its_own_approver(api: Api) -> None:
    await an_agent_cannot_pick_its_own_approver(api)


async def test_owners_are_the_humans_on_the_first_mail(api: Api) -> None:
    for name in ("ana", "bob", "carl"):
        await api.user(name)
    await api.agent("claude")
    # A human starts: the sender and the human `to` recipients own it; cc does not.
    r = await api.send(
        "ana", ["claude@/srv/x.new", "bob@/srv/x.new"], cc=["carl@/srv/x.new"], subject="t"
    )
    assert r.status_code == 201, r.text
    s = await api.http.get(f"/api/v1/sessions/{r.json()['session_id']}", headers=api.auth("carl"))
    assert s.json()["deciders"] == ["ana", "bob"]
    # An agent starts: its human `to` recipients own it.
    r = await api.send("claude", ["carl@/srv/y.new"], cc=["ana@/srv/y.new"], subject="q")
    assert r.status_code == 201, r.text
    s = await api.http.get(f"/api/v1/sessions/{r.json()['session_id']}", headers=api.auth("carl"))
    assert s.json()["deciders"] == ["carl"]


async def test_a_session_without_a_decider_refuses_requests_no_human(api: Api) -> None:
    await api.user("ana")
    await api.agent("claude")
    await api.agent("codex")
    # Within ana's session, claude starts a session with codex and only cc's a
    # human: nobody may decide.
    mine = await api.send("ana", ["claude@/srv/z.new"], subject="work")
    assert mine.status_code == 201, mine.text
    r = await api.send(
        "claude",
        ["codex@/srv/z.new"],
        cc=["ana@/srv/z.new"],
        subject="pair",
        from_session_id=mine.json()["session_id"],
    )
    assert r.status_code == 201, r.text
    ask = await api.http.post(
        "/api/v1/agent/permissions",
        json={
            "session_id": r.json()["session_id"],
            "kind": "approval",
            "tool_name": "Bash",
            "tool_input": {"command": "ls"},
            "relay_key": "k",
        },
        headers=api.auth("codex"),
    )
    assert ask.status_code == 409
    assert ask.json()["error"]["reason"] == "no_human"


async def test_deciders_must_be_people_and_outsiders_see_nothing(api: Api) -> None:
    await api.user("ana")
    await api.user("bob")
    await api.agent("claude")
    r = await api.send("ana", ["claude@/srv/x.new"], subject="t")
    sid = r.json()["session_id"]
    url = f"/api/v1/sessions/{sid}/deciders"
    bad = await api.http.post(url, json={"name": "claude"}, headers=api.auth("ana"))
    assert bad.status_code == 400
    assert bad.json()["error"]["field"] == "name"
    # bob is no reader: the session does not exist for him.
    assert (await api.http.get(url, headers=api.auth("bob"))).status_code == 404
    assert (
        await api.http.post(url, json={"name": "bob"}, headers=api.auth("bob"))
    ).status_code == 404
    # agents never use these routes.
    assert (await api.http.get(url, headers=api.auth("claude"))).status_code == 403
    assert (await api.http.get(url)).status_code == 401
