"""New work by e-mail (services/email_work.start, docs/email.md "New work by
e-mail") against a real gateway in-process: a mail to `claude+shop@…` starts a
session in the alias's workspace, in mode workspace unless the subject's tag
asks for another the person may have; unknown agents and aliases are answered
with what the person may mail, and never with what they may not."""

from __future__ import annotations

from typing import Any

import pytest
from sqlalchemy import func, select

from mailui4agents.db.tables import MailRow, SessionRow
from mailui4agents.domain.email_parts import InboundFile
from mailui4agents.services import email_work, identity
from mailui4agents.services.principals import Principal
from mailui4agents.settings import Settings
from mailui4agents.state import Gateway
from tests.conftest import Api
from tests.email.conftest import gateway_of

pytestmark = pytest.mark.anyio


@pytest.fixture
async def team(api: Api) -> Api:
    """claude (roots /srv/*): ana owns it (ceiling full), bob is a tasker
    (ceiling workspace), carol is nobody to it. other (roots /srv/*) is dora's
    alone. Aliases: shop and web under /srv, secret outside claude's roots."""
    api.open_agents = False
    for name in ("ana", "bob", "carol", "dora"):
        await api.user(name)
    await api.agent(
        "claude",
        workspaces=["/srv/*"],
        owners=["ana"],
        taskers=["bob"],
        max_mode={"owners": "full", "taskers": "workspace"},
    )
    await api.agent("other", workspaces=["/srv/*", "/opt/*"], owners=["dora"])
    for alias, path in (("shop", "/srv/shop"), ("web", "/srv/web"), ("secret", "/opt/secret")):
        r = await api.http.put(
            f"/api/v1/admin/workspace-aliases/{alias}",
            json={"workspace": path},
            headers=api.auth("admin"),
        )
        assert r.status_code == 201, r.text
    return api


async def person(api: Api, name: str) -> Principal:
    found = await identity.authenticate_in(gateway_of(api).db, api.tokens[name])
    assert found is not None
    return found[0]


async def session_of(gw: Gateway, sid: str) -> SessionRow:
    async with gw.read() as s:
        row = await s.get(SessionRow, sid)
    assert row is not None
    return row


async def sessions_by(gw: Gateway, name: str) -> int:
    async with gw.read() as s:
        n = await s.scalar(
            select(func.count()).select_from(SessionRow).where(SessionRow.created_by == name)
        )
    return int(n or 0)


async def start(api: Api, who: str, **kw: Any) -> email_work.Started:
    args: dict[str, Any] = {"agent": "claude", "alias": "shop", "subject": "s", "body": "b"}
    args.update(kw)
    return await email_work.start(gateway_of(api), await person(api, who), **args)


async def test_a_mail_starts_a_session_in_the_aliases_workspace_in_mode_workspace(
    team: Api,
) -> None:
    gw = gateway_of(team)
    started = await start(
        team,
        "bob",
        subject="Fix the login",
        body="It fails since Monday.",
        email_message_id="<m1@example.org>",
    )
    session = await session_of(gw, started.session_id)
    assert session.workspace == "/srv/shop"
    assert session.permission_mode == "workspace"
    assert session.created_by == "bob"
    # The agent has it in its inbox: the first mail of that session, from bob.
    r = await team.http.get("/api/v1/agent/inbox", headers=team.auth("claude"))
    assert r.status_code == 200, r.text
    [item] = [m for m in r.json()["items"] if m["id"] == started.mail_id]
    assert item["session_id"] == started.session_id
    assert item["from"].startswith("bob@/srv/shop.") and item["subject"] == "Fix the login"
    assert item["body"] == "It fails since Monday."
    # A second mail is a second, new session (never the pair's default one).
    again = await start(team, "bob", subject="Another thing")
    assert again.session_id != started.session_id


async def test_plan_in_the_subject_starts_in_plan_and_the_tag_is_dropped(team: Api) -> None:
    gw = gateway_of(team)
    started = await start(team, "bob", subject="[plan] Look around the cart")
    session = await session_of(gw, started.session_id)
    assert session.permission_mode == "plan"
    async with gw.read() as s:
        mail = await s.scalar(select(MailRow).where(MailRow.id == started.mail_id))
    assert mail is not None and mail.subject == "Look around the cart"


async def test_full_from_an_owner_starts_in_full(team: Api) -> None:
    started = await start(team, "ana", subject="Deploy it [FULL]")
    session = await session_of(gateway_of(team), started.session_id)
    assert session.permission_mode == "full"


async def test_full_above_the_persons_ceiling_is_refused_and_nothing_starts(team: Api) -> None:
    gw = gateway_of(team)
    with pytest.raises(email_work.Refused) as e:
        await start(team, "bob", subject="[full] Deploy it")
    assert e.value.reason == "mode_not_allowed"
    assert "at most in mode 'workspace'" in e.value.message
    assert "[plan]" in e.value.message  # what bob may do instead
    assert not isinstance(e.value, email_work.NoSuchPlace)
    assert await sessions_by(gw, "bob") == 0


async def test_an_unknown_alias_says_which_aliases_the_agent_has(team: Api) -> None:
    gw = gateway_of(team)
    with pytest.raises(email_work.NoSuchPlace) as e:
        await start(team, "bob", alias="shpo")
    message = e.value.message
    assert "'shpo'" in message
    assert "claude+shop@gw.test" in message and "claude+web@gw.test" in message
    assert "secret" not in message  # outside claude's roots: not bob's to know
    assert await sessions_by(gw, "bob") == 0


async def test_an_alias_outside_the_agents_roots_is_as_unknown(team: Api) -> None:
    with pytest.raises(email_work.NoSuchPlace) as e:
        await start(team, "bob", alias="secret")
    assert "no workspace alias 'secret' for claude" in e.value.message


async def test_an_unknown_agent_says_what_the_person_may_mail(team: Api) -> None:
    with pytest.raises(email_work.NoSuchPlace) as e:
        await start(team, "bob", agent="clod")
    assert "no agent 'clod'" in e.value.message
    assert "claude+shop@gw.test" in e.value.message
    assert "other" not in e.value.message


async def test_an_agent_the_person_may_not_task_is_answered_as_unknown(team: Api) -> None:
    """`other` exists, but bob is no tasker of it: he learns no more than for a
    name that exists nowhere (and not its aliases)."""
    with pytest.raises(email_work.NoSuchPlace) as known:
        await start(team, "bob", agent="other")
    with pytest.raises(email_work.NoSuchPlace) as unknown:
        await start(team, "bob", agent="nobody")
    assert known.value.message == unknown.value.message.replace("nobody", "other")
    assert "secret" not in known.value.message


async def test_a_person_who_is_no_tasker_is_refused_with_what_to_do(team: Api) -> None:
    gw = gateway_of(team)
    with pytest.raises(email_work.NoSuchPlace) as e:
        await start(team, "carol")
    assert "You may set no agent to work" in e.value.message
    assert "tasker" in e.value.message
    assert "claude+" not in e.value.message
    assert await sessions_by(gw, "carol") == 0


async def test_the_agents_name_may_arrive_in_another_case(team: Api) -> None:
    started = await start(team, "bob", agent="Claude", alias="SHOP")
    session = await session_of(gateway_of(team), started.session_id)
    assert session.workspace == "/srv/shop"


async def test_the_files_arrive_as_the_mails_attachments(team: Api) -> None:
    files = [
        InboundFile("trace.txt", "text/plain", b"Traceback ...\n"),
        InboundFile("shot.png", "image/png", bytes(range(256)) * 4),
    ]
    started = await start(team, "bob", subject="See attached", files=files)
    r = await team.http.get(f"/api/v1/mail/{started.mail_id}", headers=team.auth("bob"))
    assert r.status_code == 200, r.text
    atts = r.json()["attachments"]
    assert [(a["name"], a["content_type"], a["size"]) for a in atts] == [
        ("trace.txt", "text/plain", 14),
        ("shot.png", "image/png", 1024),
    ]
    for att, f in zip(atts, files, strict=True):
        got = await team.http.get(
            f"/api/v1/agent/attachments/{att['attachment_id']}",
            params={"session_id": started.session_id},
            headers=team.auth("claude"),
        )
        assert got.status_code == 200, got.text
        assert got.content == f.data


@pytest.mark.parametrize("settings", [{"attachment_max_bytes": 1000}], indirect=True)
async def test_a_file_over_the_limit_is_refused_and_nothing_starts(
    team: Api, settings: Settings
) -> None:
    gw = gateway_of(team)
    files = [InboundFile("ok.txt", "text/plain", b"x"), InboundFile("big.bin", "x/y", b"y" * 1001)]
    with pytest.raises(email_work.Refused) as e:
        await start(team, "bob", files=files)
    assert e.value.reason == "too_large"
    assert "big.bin" in e.value.message and "1000" in e.value.message
    assert await sessions_by(gw, "bob") == 0


async def test_too_many_files_are_refused(team: Api, settings: Settings) -> None:
    files = [
        InboundFile(f"{i}.txt", "text/plain", b"x") for i in range(settings.max_recipients + 1)
    ]
    with pytest.raises(email_work.Refused) as e:
        await start(team, "bob", files=files)
    assert e.value.reason == "invalid_value"
    assert await sessions_by(gateway_of(team), "bob") == 0


async def test_a_tasker_removed_meanwhile_is_refused_by_the_send_itself(
    team: Api, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The rules are judged again inside the send's write: a refusal there
    (here: bob's tasker role gone between the look-up and the send) is a
    Refused too, and nothing is written."""
    gw = gateway_of(team)
    real = email_work._places

    async def then_removed(s: Any, who: Principal) -> Any:
        found = await real(s, who)
        r = await team.http.delete("/api/v1/agents/claude/taskers/bob", headers=team.auth("admin"))
        assert r.status_code == 200, r.text
        return found

    monkeypatch.setattr(email_work, "_places", then_removed)
    with pytest.raises(email_work.Refused) as e:
        await start(team, "bob")
    assert e.value.reason == "not_a_tasker"
    assert await sessions_by(gw, "bob") == 0


async def test_an_agent_starts_no_work_by_e_mail(team: Api) -> None:
    found = await identity.authenticate_in(gateway_of(team).db, team.tokens["claude"])
    assert found is not None
    with pytest.raises(email_work.Refused):
        await email_work.start(
            gateway_of(team), found[0], agent="claude", alias="shop", subject="s", body="b"
        )


def test_the_subject_tags() -> None:
    assert email_work.split_mode("Fix it") == (None, "Fix it")
    assert email_work.split_mode("[plan] Fix it") == ("plan", "Fix it")
    assert email_work.split_mode("Fix  [ Full ]  it") == ("full", "Fix it")
    assert email_work.split_mode("[plan][full] x") == ("full", "x")
    assert email_work.split_mode("[workspace] x") == (None, "[workspace] x")
