"""A permission request's input (the command, the file content) is the session's
deciders' and the asking agent's (issue 22, item 6; docs/behaviour.md#who-sees-a-requests-input).

Everyone else who reads the session — a person cc'd in, an admin who decides
nothing there, another agent in it — sees in the thread, a single read, search
and a forward that a request was made and how it was decided, not what it asked."""

from __future__ import annotations

from typing import Any

import pytest

from tests.conftest import Api, snapshot

pytestmark = pytest.mark.anyio

SECRET = "zebrasecret"  # a word of the input and summary, nowhere else


@snapshot
async def world(api: Api) -> dict[str, Any]:
    await api.agent("claude")
    await api.agent("codex")
    for name in ("ana", "carl", "bob"):
        await api.user(name)
    first = (await api.send("ana", ["claude@/srv/shop.new"], subject="Clean up")).json()
    here = f"/srv/shop.{first['session_alias']}"
    r = await api.send(
        "ana", [f"claude@{here}"], cc=[f"carl@{here}", f"codex@{here}"], subject="Both of you"
    )
    assert r.status_code == 201, r.text
    asked = await api.http.post(
        "/api/v1/agent/permissions",
        json={
            "session_id": first["session_id"],
            "kind": "approval",
            "tool_name": "Bash",
            "tool_input": {"command": f"rm -rf /srv/{SECRET}"},
            "summary": f"Remove the {SECRET} folder",
            "relay_key": "k1",
        },
        headers=api.auth("claude"),
    )
    assert asked.status_code == 201, asked.text
    return {"session_id": first["session_id"], "request": asked.json()}


async def _thread(api: Api, who: str, mail_id: str, session_id: str) -> list[dict[str, Any]]:
    agent = api.tokens[who].startswith("am_agent_")
    path = f"/api/v1/{'agent/' if agent else ''}mail/{mail_id}/thread"
    params = {"session_id": session_id} if agent else {}
    r = await api.http.get(path, params=params, headers=api.auth(who))
    assert r.status_code == 200, r.text
    return list(r.json()["items"])


async def _request_mail(api: Api, who: str, world: dict[str, Any]) -> dict[str, Any]:
    mail_id = world["request"]["mail_id"]
    [mail] = [
        m for m in await _thread(api, who, mail_id, world["session_id"]) if m["id"] == mail_id
    ]
    return mail


async def _search(api: Api, who: str, session_id: str) -> list[dict[str, Any]]:
    agent = api.tokens[who].startswith("am_agent_")
    params = {"q": SECRET, **({"session_id": session_id} if agent else {})}
    path = "/api/v1/agent/search" if agent else "/api/v1/search"
    r = await api.http.get(path, params=params, headers=api.auth(who))
    assert r.status_code == 200, r.text
    return list(r.json()["items"])


@pytest.mark.parametrize("who", ["ana", "claude"])
async def test_the_deciders_and_the_asking_agent_see_the_input(
    api: Api, world: dict[str, Any], who: str
) -> None:
    mail = await _request_mail(api, who, world)
    assert mail["type"] == "permission_request"
    assert f"rm -rf /srv/{SECRET}" in mail["body"] and SECRET in mail["subject"]
    hits = await _search(api, who, world["session_id"])
    assert [h["id"] for h in hits] == [world["request"]["mail_id"]]
    assert SECRET in hits[0]["snippet"]


@pytest.mark.parametrize("who", ["carl", "admin", "codex"])
async def test_other_readers_see_the_request_and_its_outcome_not_its_input(
    api: Api, world: dict[str, Any], who: str
) -> None:
    """carl is cc'd in, admin reads every session, codex is another agent in it."""
    mail = await _request_mail(api, who, world)
    assert mail["type"] == "permission_request"
    assert mail["subject"] == "Approval needed: Bash"
    assert SECRET not in mail["body"] and "rm -rf" not in mail["body"]
    assert (
        "claude asked the session's deciders to use Bash. It waits for a decider." in (mail["body"])
    )
    assert await _search(api, who, world["session_id"]) == []
    r = await api.http.post(
        f"/api/v1/permissions/{world['request']['id']}/decision",
        json={"decision": "approve"},
        headers=api.auth("ana"),
    )
    assert r.status_code == 200, r.text
    mail = await _request_mail(api, who, world)
    assert "It was approved by ana." in mail["body"] and SECRET not in mail["body"]


async def test_a_single_read_and_a_forward_do_not_show_the_input_either(
    api: Api, world: dict[str, Any]
) -> None:
    mail_id = world["request"]["mail_id"]
    r = await api.http.get(f"/api/v1/mail/{mail_id}", headers=api.auth("admin"))
    assert r.status_code == 200 and SECRET not in r.text
    r = await api.http.post(
        f"/api/v1/mail/{mail_id}/forward",
        json={"to": ["bob@/srv/elsewhere.new"]},
        headers=api.auth("carl"),
    )
    assert r.status_code == 201, r.text
    assert SECRET not in r.json()["body"] and SECRET not in r.json()["subject"]
    [got] = [
        m
        for m in (await api.http.get("/api/v1/mailbox", headers=api.auth("bob"))).json()["items"]
        if m["subject"].startswith("Fwd:")
    ]
    assert SECRET not in got["body"] and "Approval needed: Bash" in got["body"]
    # The decider forwards what she sees: the input.
    r = await api.http.post(
        f"/api/v1/mail/{mail_id}/forward",
        json={"to": ["bob@/srv/elsewhere2.new"]},
        headers=api.auth("ana"),
    )
    assert r.status_code == 201 and SECRET in r.json()["body"]


async def test_an_outsider_does_not_see_the_request_at_all(api: Api, world: dict[str, Any]) -> None:
    mail_id = world["request"]["mail_id"]
    r = await api.http.get(f"/api/v1/mail/{mail_id}/thread", headers=api.auth("bob"))
    assert r.status_code == 404
    assert await _search(api, "bob", world["session_id"]) == []


async def test_an_exact_grants_input_is_listed_only_to_the_sessions_deciders(
    api: Api, world: dict[str, Any]
) -> None:
    """An exact grant's pattern is the approved input itself (services/grants.py)."""
    rid = world["request"]["id"]
    r = await api.http.post(
        f"/api/v1/permissions/{rid}/decision",
        json={"decision": "approve", "always": True},
        headers=api.auth("ana"),
    )
    assert r.status_code == 200, r.text
    params = {"session_id": world["session_id"]}
    mine = await api.http.get("/api/v1/grants", params=params, headers=api.auth("ana"))
    [grant] = mine.json()["items"]
    assert grant["pattern"] == f"rm -rf /srv/{SECRET}" and SECRET in grant["covers"]
    for who in ("carl", "admin"):  # a reader cc'd in; an admin who decides nothing here
        theirs = await api.http.get("/api/v1/grants", params=params, headers=api.auth(who))
        assert theirs.status_code == 200, theirs.text
        [seen] = theirs.json()["items"]
        assert seen["id"] == grant["id"] and seen["scope"] == "exact"
        assert SECRET not in theirs.text, who
    revoked = await api.http.delete(f"/api/v1/grants/{grant['id']}", headers=api.auth("admin"))
    assert revoked.status_code == 200, revoked.text
    assert SECRET not in revoked.text
