"""Scenarios run both in-process (tests/api) and against a real gateway subprocess
(tests/e2e): the same steps, the same assertions."""

from __future__ import annotations

from typing import Any

from tests.conftest import Api

# Not `curl … | sh`: a built-in rule denies that at once (docs/rules.md).
EVIL = {"command": "sh ./evil.sh"}


async def _ask(api: Api, session_id: str, key: str) -> Any:
    return await api.http.post(
        "/api/v1/agent/permissions",
        json={
            "session_id": session_id,
            "kind": "approval",
            "tool_name": "Bash",
            "tool_input": EVIL,
            "relay_key": key,
        },
        headers=api.auth("agent-a"),
    )


async def _decide(api: Api, who: str, request_id: str, **body: Any) -> Any:
    return await api.http.post(
        f"/api/v1/permissions/{request_id}/decision",
        json={"decision": "approve", **body},
        headers=api.auth(who),
    )


async def _patch(api: Api, who: str, session_id: str, **body: Any) -> Any:
    return await api.http.patch(f"/api/v1/sessions/{session_id}", json=body, headers=api.auth(who))


async def _pending(api: Api, who: str) -> list[str]:
    r = await api.http.get("/api/v1/permissions?status=pending", headers=api.auth(who))
    assert r.status_code == 200, r.text
    return [p["id"] for p in r.json()["items"]]


async def an_agent_cannot_pick_its_own_approver(api: Api) -> None:
    """ana starts a workspace session with agent A; A cc's olga in; olga can neither
    see nor decide A's request, nor switch the session to full. ana (the owner)
    decides; a decider ana names decides; the admin, who posts into the session,
    gains nothing."""
    for name in ("ana", "olga", "dora"):
        await api.user(name)
    await api.agent("agent-a")
    first = await api.send("ana", ["agent-a@/srv/shop.new"], subject="Tidy up")
    assert first.status_code == 201, first.text
    sid, alias = first.json()["session_id"], first.json()["session_alias"]

    # A cc's olga into the session: she becomes a participant (a reader) only.
    cc = await api.send(
        "agent-a",
        [f"ana@/srv/shop.{alias}"],
        cc=[f"olga@/srv/shop.{alias}"],
        subject="fyi",
        from_session_id=sid,
    )
    assert cc.status_code == 201, cc.text
    req = await _ask(api, sid, "evil-1")
    assert req.status_code == 201, req.text
    rid = req.json()["id"]

    # olga: no request listed, no request mail, no decision, no mode change.
    assert rid not in await _pending(api, "olga")
    r = await api.http.get("/api/v1/mailbox?status=all", headers=api.auth("olga"))
    assert [m["type"] for m in r.json()["items"]] == ["message"]
    refused = await _decide(api, "olga", rid, always=True)
    assert refused.status_code == 403, refused.text
    assert refused.json()["error"]["code"] == "forbidden"
    assert (await _patch(api, "olga", sid, permission_mode="full")).status_code == 403
    assert (await _patch(api, "olga", sid, archived=True)).status_code == 403
    # The admin posts into the session by its alias: a reader, still no power.
    posted = await api.send("admin", [f"agent-a@/srv/shop.{alias}"], subject="admin here")
    assert posted.status_code == 201, posted.text
    assert (await _decide(api, "admin", rid)).status_code == 403
    assert (await _patch(api, "admin", sid, permission_mode="full")).status_code == 403
    assert rid not in await _pending(api, "admin")
    # Nor may olga name herself a decider; only owners name deciders.
    add = await api.http.post(
        f"/api/v1/sessions/{sid}/deciders", json={"name": "olga"}, headers=api.auth("olga")
    )
    assert add.status_code == 403
    # Still workspace mode: the next request asks a human (not mode_allows).
    again = await _ask(api, sid, "evil-2")
    assert again.status_code == 201, again.text

    # Negative control: ana, the owner, sees and decides.
    assert set(await _pending(api, "ana")) == {rid, again.json()["id"]}
    ok = await _decide(api, "ana", rid, note="just this once")
    assert ok.status_code == 200, ok.text
    assert ok.json()["decided_by"] == "ana"
    # ana names dora a decider: dora now sees and decides, and may change the mode.
    add = await api.http.post(
        f"/api/v1/sessions/{sid}/deciders", json={"name": "dora"}, headers=api.auth("ana")
    )
    assert add.status_code == 201, add.text
    assert [(d["name"], d["role"]) for d in add.json()["items"]] == [
        ("ana", "owner"),
        ("dora", "decider"),
    ]
    assert await _pending(api, "dora") == [again.json()["id"]]
    assert (await _decide(api, "dora", again.json()["id"], decision="deny")).status_code == 200
    assert (await _patch(api, "dora", sid, permission_mode="plan")).status_code == 200
    # A decider cannot name further deciders; ana removes dora, whose power ends.
    more = await api.http.post(
        f"/api/v1/sessions/{sid}/deciders", json={"name": "olga"}, headers=api.auth("dora")
    )
    assert more.status_code == 403
    gone = await api.http.delete(f"/api/v1/sessions/{sid}/deciders/dora", headers=api.auth("ana"))
    assert gone.status_code == 200, gone.text
    assert (await _patch(api, "dora", sid, permission_mode="full")).status_code == 403
    owner = await api.http.delete(f"/api/v1/sessions/{sid}/deciders/ana", headers=api.auth("ana"))
    assert owner.status_code == 409  # an owner stays an owner
