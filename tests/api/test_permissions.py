"""Permission requests, decisions, grants and questions on the gateway."""

from __future__ import annotations

from typing import Any

import pytest

from tests.conftest import Api, snapshot

pytestmark = pytest.mark.anyio


@snapshot
async def session(api: Api) -> dict[str, Any]:
    await api.agent("claude")
    await api.agent("codex")
    await api.user("ana")
    await api.user("bob")
    r = await api.send("ana", ["claude@/srv/shop.new"], subject="Fix login")
    return dict(r.json())


async def ask(api: Api, session: dict[str, Any], key: str = "k1", **extra: Any) -> Any:
    body = {
        "session_id": session["session_id"],
        "kind": "approval",
        "tool_name": "Bash",
        "tool_input": {"command": "npm test"},
        "relay_key": key,
        **extra,
    }
    return await api.http.post("/api/v1/agent/permissions", json=body, headers=api.auth("claude"))


async def decide(api: Api, who: str, request_id: str, **body: Any) -> Any:
    return await api.http.post(
        f"/api/v1/permissions/{request_id}/decision", json=body, headers=api.auth(who)
    )


async def mailbox(api: Api, who: str) -> list[dict[str, Any]]:
    r = await api.http.get("/api/v1/mailbox?status=all", headers=api.auth(who))
    return list(r.json()["items"])


async def set_mode(api: Api, session: dict[str, Any], mode: str) -> None:
    r = await api.http.patch(
        f"/api/v1/sessions/{session['session_id']}",
        json={"permission_mode": mode},
        headers=api.auth("ana"),
    )
    assert r.status_code == 200, r.text


async def test_request_creates_a_pending_request_and_a_mail_to_the_human(
    api: Api, session: dict[str, Any]
) -> None:
    r = await ask(api, session)
    assert r.status_code == 201, r.text
    req = r.json()
    assert req["status"] == "pending" and req["relay_key"] == "k1"
    [m] = [m for m in await mailbox(api, "ana") if m["type"] == "permission_request"]
    assert m["id"] == req["mail_id"]
    assert "npm test" in m["body"] and req["id"] in m["body"]


async def test_repeated_relay_key_is_duplicate_and_creates_nothing(
    api: Api, session: dict[str, Any]
) -> None:
    first = (await ask(api, session)).json()
    before = len(await mailbox(api, "ana"))
    r = await ask(api, session)
    assert r.status_code == 200
    assert r.json() == {"status": "duplicate_relay", "request_id": first["id"]}
    assert len(await mailbox(api, "ana")) == before


async def test_relay_key_over_160_bytes_is_refused(api: Api, session: dict[str, Any]) -> None:
    r = await ask(api, session, key="é" * 81)  # 162 bytes
    assert r.status_code == 400
    assert r.json()["error"]["code"] == "relay_key_too_long"
    assert (await ask(api, session, key="é" * 80)).status_code == 201  # 160 bytes


async def test_full_mode_answers_mode_allows_and_plan_mode_forbids_without_mail(
    api: Api, session: dict[str, Any]
) -> None:
    await set_mode(api, session, "full")
    r = await ask(api, session, key="a")
    assert r.status_code == 409
    assert r.json()["error"]["reason"] == "mode_allows"
    assert r.json()["error"]["permission_mode"] == "full"
    await set_mode(api, session, "plan")
    before = len(await mailbox(api, "ana"))
    r = await ask(api, session, key="b")
    assert r.status_code == 409 and r.json()["error"]["reason"] == "mode_forbids"
    assert len(await mailbox(api, "ana")) == before
    await set_mode(api, session, "workspace")
    assert (await ask(api, session, key="c")).status_code == 201


async def test_a_proven_sandbox_allows_in_workspace_mode_only_and_writes_nothing(
    api: Api, session: dict[str, Any]
) -> None:
    """docs/sandbox.md, "The proof": workspace + sandbox "proven" → 409 mode_allows
    with allowed_by "sandbox", no request, no mail; plan still forbids, a question
    is still asked, and without the field workspace asks as before."""
    before = len(await mailbox(api, "ana"))
    r = await ask(api, session, key="s1", sandbox="proven")
    assert r.status_code == 409
    error = r.json()["error"]
    assert error["reason"] == "mode_allows" and error["allowed_by"] == "sandbox"
    assert error["permission_mode"] == "workspace"
    assert len(await mailbox(api, "ana")) == before
    listed = await api.http.get("/api/v1/permissions", headers=api.auth("ana"))
    assert listed.json()["items"] == []
    # A question is no tool call: the sandbox has nothing to say about it.
    q = await api.http.post(
        "/api/v1/agent/permissions",
        json={"session_id": session["session_id"], "kind": "question",
              "question": "which branch?", "relay_key": "s2", "sandbox": "proven"},
        headers=api.auth("claude"),
    )  # fmt: skip
    assert q.status_code == 201, q.text
    await set_mode(api, session, "plan")
    r = await ask(api, session, key="s3", sandbox="proven")
    assert r.status_code == 409 and r.json()["error"]["reason"] == "mode_forbids"
    await set_mode(api, session, "full")
    r = await ask(api, session, key="s4", sandbox="proven")
    assert r.status_code == 409 and "allowed_by" not in r.json()["error"]
    await set_mode(api, session, "workspace")
    assert (await ask(api, session, key="s5")).status_code == 201  # no sandbox: asked


@pytest.mark.parametrize("value", ["yes", "PROVEN", True, 1, ""])
async def test_sandbox_takes_only_proven(api: Api, session: dict[str, Any], value: Any) -> None:
    r = await ask(api, session, key="bad", sandbox=value)
    assert r.status_code == 400, r.text
    assert "sandbox" in r.text


async def test_session_without_a_human_answers_no_human(api: Api) -> None:
    await api.user("ana")
    await api.agent("claude")
    await api.agent("pi")
    # Within ana's session with pi, pi starts one with claude alone: no human in it.
    mine = (await api.send("ana", ["pi@/srv/x.new"], subject="work")).json()
    m = (
        await api.send(
            "pi", ["claude@/srv/x.new"], subject="agents only", from_session_id=mine["session_id"]
        )
    ).json()
    r = await api.http.post(
        "/api/v1/agent/permissions",
        json={"session_id": m["session_id"], "tool_name": "Bash", "relay_key": "z"},
        headers=api.auth("claude"),
    )
    assert r.status_code == 409 and r.json()["error"]["reason"] == "no_human"


async def test_only_a_human_of_the_session_decides_and_only_once(
    api: Api, session: dict[str, Any]
) -> None:
    req = (await ask(api, session)).json()
    # bob is no reader of the session: to him the request does not exist.
    assert (await decide(api, "bob", req["id"], decision="approve")).status_code == 404
    agent_try = await api.http.post(
        f"/api/v1/permissions/{req['id']}/decision",
        json={"decision": "approve"},
        headers=api.auth("claude"),
    )
    assert agent_try.status_code == 403
    r = await decide(api, "ana", req["id"], decision="deny", note="not on main")
    assert r.status_code == 200, r.text
    assert r.json()["status"] == "denied" and r.json()["note"] == "not on main"
    assert (await decide(api, "ana", req["id"], decision="approve")).status_code == 409


async def test_note_reaches_the_long_poll_and_the_receipt_mail(
    api: Api, session: dict[str, Any]
) -> None:
    req = (await ask(api, session)).json()
    await decide(api, "ana", req["id"], decision="deny", note="use the staging DB")
    r = await api.http.get(
        f"/api/v1/agent/permissions/{req['id']}?wait=5", headers=api.auth("claude")
    )
    assert r.json()["status"] == "denied" and r.json()["note"] == "use the staging DB"
    inbox = await api.http.get("/api/v1/agent/inbox?status=all", headers=api.auth("claude"))
    [receipt] = [m for m in inbox.json()["items"] if m["type"] == "permission_decision"]
    assert "use the staging DB" in receipt["body"]


async def test_always_creates_a_grant_that_approves_the_next_match_without_mail(
    api: Api, session: dict[str, Any]
) -> None:
    req = (await ask(api, session, key="1")).json()
    r = await decide(api, "ana", req["id"], decision="approve", always=True, grant_pattern="npm")
    assert r.json()["grant_id"]
    before = len(await mailbox(api, "ana"))
    again = (await ask(api, session, key="2", tool_input={"command": "npm test"})).json()
    assert again["status"] == "approved" and again["grant_id"] == r.json()["grant_id"]
    assert len(await mailbox(api, "ana")) == before
    # Negative control: a command outside the pattern still asks.
    # (Not `rm -rf /`: the built-in rules deny that at once, docs/rules.md.)
    other = (await ask(api, session, key="3", tool_input={"command": "rm -rf build"})).json()
    assert other["status"] == "pending"
    chained = (
        await ask(api, session, key="4", tool_input={"command": "npm test; rm -rf build"})
    ).json()
    assert chained["status"] == "pending"
    # Revoking the grant makes the same command ask again.
    grants = (await api.http.get("/api/v1/grants", headers=api.auth("ana"))).json()["items"]
    await api.http.delete(f"/api/v1/grants/{grants[0]['id']}", headers=api.auth("ana"))
    after = (await ask(api, session, key="5", tool_input={"command": "npm test"})).json()
    assert after["status"] == "pending"


async def grants_of(api: Api, who: str) -> list[dict[str, Any]]:
    r = await api.http.get("/api/v1/grants", headers=api.auth(who))
    assert r.status_code == 200, r.text
    return list(r.json()["items"])


async def test_always_without_a_pattern_allows_the_approved_command_only(
    api: Api, session: dict[str, Any]
) -> None:
    """Issue 22, item 5: "Always allow" on `npm test` used to allow every Bash command."""
    req = (await ask(api, session, key="1")).json()
    r = await decide(api, "ana", req["id"], decision="approve", always=True)
    assert r.status_code == 200, r.text
    grant_id = r.json()["grant_id"]
    before = len(await mailbox(api, "ana"))
    again = (await ask(api, session, key="2")).json()
    assert again["status"] == "approved" and again["decided_by"] == f"grant:{grant_id}"
    assert len(await mailbox(api, "ana")) == before  # no human was asked
    for key, command in [
        ("3", "rm -rf build"),
        ("4", "npm test; rm -rf build"),
        ("5", "npm test --watch"),
    ]:
        other = (await ask(api, session, key=key, tool_input={"command": command})).json()
        assert other["status"] == "pending", command
    assert len(await mailbox(api, "ana")) == before + 3
    [grant] = await grants_of(api, "ana")
    assert grant["id"] == grant_id
    assert grant["scope"] == "exact" and grant["pattern"] == "npm test"
    assert grant["covers"] == "exactly `npm test`" and grant["legacy_every_input"] is False


async def test_always_with_star_allows_every_input_and_says_so(
    api: Api, session: dict[str, Any]
) -> None:
    req = (await ask(api, session, key="1")).json()
    r = await decide(api, "ana", req["id"], decision="approve", always=True, grant_pattern="*")
    assert r.status_code == 200, r.text
    [grant] = await grants_of(api, "ana")
    assert (grant["scope"], grant["pattern"]) == ("every", "*")
    assert grant["covers"] == "every Bash command" and grant["legacy_every_input"] is False
    other = (await ask(api, session, key="2", tool_input={"command": "rm -rf build"})).json()
    assert other["status"] == "approved"


async def test_always_on_a_call_without_a_single_target_asks_for_a_pattern(
    api: Api, session: dict[str, Any]
) -> None:
    req = (
        await ask(api, session, key="1", tool_name="Write", tool_input={"file_path": "rel/a.py"})
    ).json()
    r = await decide(api, "ana", req["id"], decision="approve", always=True)
    assert r.status_code == 400 and r.json()["error"]["field"] == "grant_pattern"
    assert await grants_of(api, "ana") == []
    assert (await decide(api, "ana", req["id"], decision="approve")).status_code == 200


async def test_a_grant_from_before_exact_grants_keeps_every_input_and_is_flagged(
    api: Api, session: dict[str, Any]
) -> None:
    from sqlalchemy import update

    from mailui4agents.db.tables import GrantRow

    req = (await ask(api, session, key="1")).json()
    r = await decide(api, "ana", req["id"], decision="approve", always=True)
    # What migration 0013 made of a pattern-less grant of an older gateway.
    gw = api.http._transport.app.state.gateway  # type: ignore[attr-defined]
    async with gw.write() as s:
        await s.execute(
            update(GrantRow)
            .where(GrantRow.id == r.json()["grant_id"])
            .values(pattern=None, scope="every")
        )
    [grant] = await grants_of(api, "ana")
    assert grant["legacy_every_input"] is True and grant["covers"] == "every Bash command"
    other = (await ask(api, session, key="2", tool_input={"command": "rm -rf build"})).json()
    assert other["status"] == "approved"


async def test_question_answers_are_validated_against_options(
    api: Api, session: dict[str, Any]
) -> None:
    q = (
        await ask(
            api,
            session,
            kind="question",
            tool_name=None,
            tool_input=None,
            question="Which database?",
            options=[{"label": "staging"}, {"label": "prod"}],
        )
    ).json()
    assert (await decide(api, "ana", q["id"], decision="approve", answers=[])).status_code == 400
    bad = await decide(api, "ana", q["id"], decision="approve", answers=["dev"])
    assert bad.status_code == 400 and "dev" in bad.json()["error"]["message"]
    two = await decide(api, "ana", q["id"], decision="approve", answers=["staging", "prod"])
    assert two.status_code == 400
    ok = await decide(api, "ana", q["id"], decision="approve", answers=["staging"])
    assert ok.status_code == 200 and ok.json()["answers"] == ["staging"]


async def test_free_text_question_refuses_an_empty_answer(
    api: Api, session: dict[str, Any]
) -> None:
    q = (await ask(api, session, kind="question", tool_name=None, question="Branch name?")).json()
    assert (
        await decide(api, "ana", q["id"], decision="approve", answers=["  "])
    ).status_code == 400
    ok = await decide(api, "ana", q["id"], decision="approve", answers=["fix/login"])
    assert ok.json()["answers"] == ["fix/login"]


async def test_archiving_cancels_pending_requests(api: Api, session: dict[str, Any]) -> None:
    req = (await ask(api, session)).json()
    await api.http.patch(
        f"/api/v1/sessions/{session['session_id']}",
        json={"archived": True},
        headers=api.auth("ana"),
    )
    r = await api.http.get(f"/api/v1/agent/permissions/{req['id']}", headers=api.auth("claude"))
    assert r.json()["status"] == "cancelled"


async def test_archiving_tells_the_same_pending_count_in_its_event_and_its_answer(
    api: Api, session: dict[str, Any]
) -> None:
    """The cancel happens inside the update, before its session_update is built:
    once the event said pending_permissions 1 while the PATCH answered 0."""
    from sqlalchemy import select

    from mailui4agents.db.tables import EventRow

    await ask(api, session)
    r = await api.http.patch(
        f"/api/v1/sessions/{session['session_id']}",
        json={"archived": True},
        headers=api.auth("ana"),
    )
    assert r.status_code == 200, r.text
    assert r.json()["pending_permissions"] == 0
    gw = api.http._transport.app.state.gateway  # type: ignore[attr-defined]
    async with gw.db.read() as s:
        events = (
            await s.scalars(
                select(EventRow)
                .where(EventRow.principal == "user:ana", EventRow.type == "session_update")
                .order_by(EventRow.id)
            )
        ).all()
    assert [e.data["status"] for e in events] == ["archived"]
    assert events[-1].data == r.json()


async def test_unanswered_request_expires(api: Api, session: dict[str, Any]) -> None:
    req = (await ask(api, session, timeout_s=1)).json()
    r = await api.http.get(
        f"/api/v1/agent/permissions/{req['id']}?wait=10", headers=api.auth("claude")
    )
    assert r.json()["status"] == "expired"
    assert (await decide(api, "ana", req["id"], decision="approve")).status_code == 409


async def test_another_agent_cannot_ask_in_or_read_a_session_it_is_not_in(
    api: Api, session: dict[str, Any]
) -> None:
    r = await api.http.post(
        "/api/v1/agent/permissions",
        json={"session_id": session["session_id"], "tool_name": "Bash", "relay_key": "x"},
        headers=api.auth("codex"),
    )
    assert r.status_code == 404
    req = (await ask(api, session)).json()
    r = await api.http.get(f"/api/v1/agent/permissions/{req['id']}", headers=api.auth("codex"))
    assert r.status_code == 404


async def test_secrets_in_tool_input_are_masked_before_a_human_sees_them(
    api: Api, session: dict[str, Any]
) -> None:
    req = (await ask(api, session, tool_input={"command": "deploy --token=s3cr3tvalue123"})).json()
    assert "s3cr3tvalue123" not in str(req["tool_input"])
    [m] = [m for m in await mailbox(api, "ana") if m["type"] == "permission_request"]
    assert "s3cr3tvalue123" not in m["body"]
