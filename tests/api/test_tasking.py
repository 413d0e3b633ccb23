"""Who may set an agent to work, where, and how freely (docs/access.md): taskers,
workspace roots and mode ceilings, from every side — and a randomised world
checked against an oracle written apart from services/tasking.py."""

from __future__ import annotations

import fnmatch
import random
from datetime import UTC, datetime, timedelta
from typing import Any

import pytest

from mailui4agents.settings import Settings
from tests.conftest import Api
from tests.pg_fixtures import db_all_rows

pytestmark = pytest.mark.anyio


@pytest.fixture
async def team(api: Api) -> Api:
    """ana owns bot (roots /srv/*); dora is a tasker; olga is nobody to it; the
    admin created it but does not own it. codex is an agent of olga's."""
    api.open_agents = False
    for name in ("ana", "dora", "olga"):
        await api.user(name)
    await api.agent("bot", workspaces=["/srv/*"], owners=["ana"], taskers=["dora"])
    await api.agent("codex", workspaces=["/srv/*"], owners=["olga"])
    return api


def error(r: Any, status: int = 403) -> dict[str, Any]:
    assert r.status_code == status, r.text
    err: dict[str, Any] = r.json()["error"]
    return err


async def test_a_person_who_is_no_tasker_is_refused_and_nothing_is_written(
    team: Api, settings: Settings
) -> None:
    before = db_all_rows(settings)
    for to, cc in (
        (["bot@/srv/shop.new"], []),
        (["ana@/srv/shop.new"], ["bot@/srv/shop.new"]),  # cc sets it to work too
        (["bot@/srv/shop"], []),  # the default session of the pair
    ):
        err = error(await team.send("olga", to, cc=cc, permission_mode="full"))
        assert err["code"] == "not_a_tasker"
        assert err["field"] == ("cc" if cc else "to")
        assert "'bot'" in err["message"]
    # The admin created bot but owns nothing: being admin grants no tasking.
    assert error(await team.send("admin", ["bot@/srv/shop.new"]))["code"] == "not_a_tasker"
    assert db_all_rows(settings) == before
    # The other side: a person may still mail people without any agent.
    assert (await team.send("olga", ["ana@/srv/shop.new"])).status_code == 201


async def test_a_reply_from_a_non_tasker_is_refused_too(team: Api) -> None:
    first = await team.send(
        "ana", ["bot@/srv/shop.new"], cc=["olga@/srv/shop.new", "dora@/srv/shop.new"]
    )
    assert first.status_code == 201, first.text
    alias = first.json()["session_alias"]
    # olga reads the session (she was cc'd) but may not set bot to work in it.
    err = error(await team.send("olga", [f"bot@/srv/shop.{alias}"], subject="rm -rf ~"))
    assert err["code"] == "not_a_tasker"
    r = await team.send("olga", [f"ana@/srv/shop.{alias}"], parent_mail_id=first.json()["id"])
    assert r.status_code == 201, r.text  # replying to ana alone is fine
    # dora, a tasker, may continue it.
    assert (await team.send("dora", [f"bot@/srv/shop.{alias}"])).status_code == 201


async def test_a_tasker_works_within_the_roots_and_her_ceiling(team: Api) -> None:
    ok = await team.send("dora", ["bot@/srv/shop.new"], permission_mode="workspace")
    assert ok.status_code == 201, ok.text
    err = error(await team.send("dora", ["bot@/srv/shop.new"], permission_mode="full"))
    assert (err["code"], err["field"]) == ("mode_not_allowed", "permission_mode")
    assert "at most 'workspace'" in err["message"]
    err = error(await team.send("dora", ["bot@/etc.new"]))
    assert err["code"] == "workspace_not_allowed"
    assert "/etc" in err["message"] and "/srv/*" in err["message"]
    # '/srv/*' is one level: neither /srv itself nor a folder below a project.
    for where in ("/srv", "/srv/shop/web", "/srvx/shop"):
        assert error(await team.send("dora", [f"bot@{where}.new"]))["code"] == (
            "workspace_not_allowed"
        )
    # The owner may start full there.
    full = await team.send("ana", ["bot@/srv/shop.new"], permission_mode="full")
    assert full.status_code == 201, full.text
    assert full.json()["permission_mode"] == "full"


async def test_a_default_mode_is_lowered_to_the_ceiling(team: Api) -> None:
    r = await team.http.patch(
        "/api/v1/agents/bot", json={"max_mode": {"taskers": "plan"}}, headers=team.auth("ana")
    )
    assert r.status_code == 200, r.text
    assert r.json()["max_mode"] == {"owners": "full", "taskers": "plan"}
    sent = await team.send("dora", ["bot@/srv/shop.new"])
    assert sent.status_code == 201, sent.text
    session = await team.http.get(
        f"/api/v1/sessions/{sent.json()['session_id']}", headers=team.auth("dora")
    )
    assert session.json()["permission_mode"] == "plan"
    assert error(await team.send("dora", ["bot@/srv/shop.new"], permission_mode="workspace"))[
        "code"
    ] == ("mode_not_allowed")


async def test_an_agent_without_roots_works_nowhere_but_may_talk(team: Api) -> None:
    await team.agent("fresh", owners=["ana"])
    err = error(await team.send("ana", ["fresh@/srv/shop.new"]))
    assert err["code"] == "workspace_not_allowed"
    assert "works nowhere until an owner sets them" in err["message"]
    # No workspace: no bridge runs a turn there, so a conversation is allowed.
    assert (await team.send("ana", ["fresh@"])).status_code == 201


async def test_raising_a_mode_stays_within_the_ceiling_lowering_is_always_allowed(
    team: Api,
) -> None:
    r = await team.send("dora", ["bot@/srv/shop.new"], cc=["ana@/srv/shop.new"])
    sid = r.json()["session_id"]
    path = f"/api/v1/sessions/{sid}"
    # dora owns the session (its sender) but is bot's tasker: at most workspace.
    err = error(
        await team.http.patch(path, json={"permission_mode": "full"}, headers=team.auth("dora"))
    )
    assert err["code"] == "mode_not_allowed"
    # She names olga a decider: olga decides, may lower, never raise.
    await team.http.post(f"{path}/deciders", json={"name": "olga"}, headers=team.auth("dora"))
    assert (
        await team.http.patch(path, json={"permission_mode": "plan"}, headers=team.auth("olga"))
    ).status_code == 200
    err = error(
        await team.http.patch(
            path, json={"permission_mode": "workspace"}, headers=team.auth("olga")
        )
    )
    assert err["code"] == "mode_not_allowed"
    assert (
        await team.http.patch(
            path, json={"permission_mode": "workspace"}, headers=team.auth("dora")
        )
    ).status_code == 200
    # ana, bot's owner, cc'd: a reader, not a decider of dora's session — 403.
    assert (
        await team.http.patch(path, json={"permission_mode": "full"}, headers=team.auth("ana"))
    ).status_code == 403


async def test_an_agent_tasks_another_only_from_a_session_its_taskers_started(team: Api) -> None:
    await team.agent("helper", workspaces=["/srv/*"], owners=["ana"])
    mine = (await team.send("ana", ["bot@/srv/shop.new"], permission_mode="plan")).json()
    # bot, working in ana's session, starts helper in a session of its own.
    relay = await team.send(
        "bot", ["helper@/srv/shop.new"], subject="help", from_session_id=mine["session_id"]
    )
    assert relay.status_code == 201, relay.text
    # ... never freer than the session it comes from (plan).
    assert relay.json()["permission_mode"] == "plan"
    # ... and the two go on talking in it.
    again = await team.send("helper", [relay.json()["from"]], parent_mail_id=relay.json()["id"])
    assert again.status_code == 201, again.text
    # Without a session to come from, or from one it is not in: refused.
    assert error(await team.send("bot", ["helper@/srv/shop.new"]))["code"] == "not_a_tasker"
    olgas = (await team.send("olga", ["codex@/srv/shop.new"])).json()
    err = error(await team.send("bot", ["helper@/srv/x.new"], from_session_id=olgas["session_id"]))
    assert err["code"] == "not_a_tasker"
    # codex works in olga's session; olga is no tasker of bot: codex may not task bot.
    err = error(
        await team.send("codex", ["bot@/srv/shop.new"], from_session_id=olgas["session_id"])
    )
    assert err["code"] == "not_a_tasker" and "'codex'" in err["message"]
    # Outside bot's roots even from ana's session.
    err = error(
        await team.send("helper", ["bot@/etc.new"], from_session_id=relay.json()["session_id"])
    )
    assert err["code"] == "workspace_not_allowed"


async def test_taskers_are_managed_by_owners_and_admins_only(team: Api) -> None:
    path = "/api/v1/agents/bot/taskers"
    # Anonymous, an agent, another agent, another person: refused.
    assert (await team.http.get(path)).status_code == 401
    for who in ("bot", "codex", "olga", "dora"):
        r = await team.http.post(path, json={"name": "olga"}, headers=team.auth(who))
        assert r.status_code == 403, (who, r.text)
        assert (await team.http.get(path, headers=team.auth(who))).status_code == 403
        r = await team.http.patch(
            "/api/v1/agents/bot", json={"workspaces": ["/**"]}, headers=team.auth(who)
        )
        assert r.status_code == 403, (who, r.text)
    assert error(await team.send("olga", ["bot@/srv/shop.new"]))["code"] == "not_a_tasker"
    # The owner adds olga; she may now start a workspace session.
    r = await team.http.post(path, json={"name": "olga"}, headers=team.auth("ana"))
    assert r.status_code == 201, r.text
    assert [(t["name"], t["role"]) for t in r.json()["items"]] == [
        ("ana", "owner"),
        ("dora", "tasker"),
        ("olga", "tasker"),
    ]
    assert (await team.send("olga", ["bot@/srv/shop.new"])).status_code == 201
    # The admin removes her again; an owner cannot be removed here.
    r = await team.http.delete(f"{path}/olga", headers=team.auth("admin"))
    assert r.status_code == 200, r.text
    assert error(await team.send("olga", ["bot@/srv/shop.new"]))["code"] == "not_a_tasker"
    assert error(await team.http.delete(f"{path}/ana", headers=team.auth("ana")), 409)
    assert error(await team.http.delete(f"{path}/olga", headers=team.auth("ana")), 404)
    assert (
        error(await team.http.post(path, json={"name": "nobody"}, headers=team.auth("ana")), 400)[
            "field"
        ]
        == "name"
    )
    assert error(
        await team.http.get("/api/v1/agents/ghost/taskers", headers=team.auth("admin")), 404
    )


async def test_roots_are_set_by_owners_and_never_by_the_agent(team: Api) -> None:
    r = await team.http.patch(
        "/api/v1/agents/bot", json={"workspaces": ["/home/ana/src/**"]}, headers=team.auth("ana")
    )
    assert r.status_code == 200, r.text
    assert r.json()["workspaces"] == ["/home/ana/src/**"]
    assert (await team.send("ana", ["bot@/home/ana/src.new"])).status_code == 201
    assert (await team.send("ana", ["bot@/home/ana/src/a/b.new"])).status_code == 201
    assert error(await team.send("ana", ["bot@/srv/shop.new"]))["code"] == "workspace_not_allowed"
    # The agent's heartbeat reports workspaces; it never widens where it may work.
    hb = await team.http.post(
        "/api/v1/agent/heartbeat", json={"workspaces": ["/etc"]}, headers=team.auth("bot")
    )
    assert hb.status_code == 200, hb.text
    assert error(await team.send("ana", ["bot@/etc.new"]))["code"] == "workspace_not_allowed"
    bad = await team.http.patch(
        "/api/v1/agents/bot", json={"workspaces": ["srv/*"]}, headers=team.auth("ana")
    )
    assert error(bad, 400)["field"] == "workspaces[0]"
    bad = await team.http.patch(
        "/api/v1/agents/bot", json={"max_mode": {"owners": "root"}}, headers=team.auth("ana")
    )
    assert error(bad, 400)["field"].startswith("max_mode")


async def test_an_interactive_session_names_only_an_owner_of_the_agent(team: Api) -> None:
    url = "/api/v1/agent/sessions/interactive"
    body = {"platform_id": "p1", "cwd": "/home/ana/x"}
    for who in ("dora", "olga", "admin"):
        r = await team.http.post(url, json={**body, "owner": who}, headers=team.auth("bot"))
        assert error(r)["field"] == "owner", who
    assert error(
        await team.http.post(url, json={**body, "owner": "nobody"}, headers=team.auth("bot")), 400
    )
    r = await team.http.post(url, json={**body, "owner": "ana"}, headers=team.auth("bot"))
    assert r.status_code == 200, r.text
    # Its own terminal session: outside the roots, and the person there mails it.
    alias = r.json()["alias"]
    assert (await team.send("ana", [f"bot@/home/ana/x.{alias}"])).status_code == 201


# --- a randomised world against an oracle written apart from the service -------------

MODES = ["plan", "workspace", "full"]
PEOPLE = ["p0", "p1", "p2", "p3"]
WORKSPACES = ["/srv/shop", "/srv/shop/web", "/home/x", "/etc", "/srv", "/home/x/a/b"]
ROOTS = ["/srv/*", "/srv/**", "/home/x/**", "/srv/shop", "/etc", "/home/*/a/*", "/**"]


def oracle_root(root: str, path: str) -> bool:
    """The roots' meaning, written again: `**` any number of components,
    other components by fnmatch, one each."""
    rp, pp = root.strip("/").split("/"), path.strip("/").split("/")
    if root == "/":
        rp = []

    def match(i: int, j: int) -> bool:
        if i == len(rp):
            return j == len(pp)
        if rp[i] == "**":
            return any(match(i + 1, k) for k in range(j, len(pp) + 1))
        return j < len(pp) and fnmatch.fnmatchcase(pp[j], rp[i]) and match(i + 1, j + 1)

    return match(0, 0)


def oracle(agent: dict[str, Any], sender: str, workspace: str, mode: str | None) -> str | None:
    if sender in agent["owners"]:
        ceiling = agent["max"]["owners"]
    elif sender in agent["taskers"]:
        ceiling = agent["max"]["taskers"]
    else:
        return "not_a_tasker"
    if not any(oracle_root(r, workspace) for r in agent["roots"]):
        return "workspace_not_allowed"
    if mode is not None and MODES.index(mode) > MODES.index(ceiling):
        return "mode_not_allowed"
    return None


@pytest.mark.parametrize("seed", [1, 22, 2026])
async def test_random_agents_senders_workspaces_and_modes_agree_with_the_oracle(
    api: Api, seed: int
) -> None:
    rng = random.Random(seed)
    api.open_agents = False
    for name in PEOPLE:
        await api.user(name)
    agents: dict[str, dict[str, Any]] = {}
    for i in range(4):
        owners = rng.sample(PEOPLE, rng.randint(1, 2))
        taskers = rng.sample([p for p in PEOPLE if p not in owners], rng.randint(0, 2))
        roots = rng.sample(ROOTS, rng.randint(0, 2))
        max_mode = {"owners": rng.choice(MODES), "taskers": rng.choice(MODES)}
        spec: dict[str, Any] = {
            "owners": owners,
            "taskers": taskers,
            "roots": roots,
            "max": max_mode,
        }
        await api.agent(
            f"a{i}", workspaces=roots, owners=owners, taskers=taskers, max_mode=max_mode
        )
        agents[f"a{i}"] = spec
    outcomes: dict[str | None, int] = {}
    for _ in range(60):
        name = rng.choice(sorted(agents))
        sender = rng.choice(PEOPLE)
        workspace = rng.choice(WORKSPACES)
        mode = rng.choice([None, *MODES])
        extra = {} if mode is None else {"permission_mode": mode}
        r = await api.send(sender, [f"{name}@{workspace}.new"], **extra)
        want = oracle(agents[name], sender, workspace, mode)
        outcomes[want] = outcomes.get(want, 0) + 1
        if want is None:
            assert r.status_code == 201, (name, sender, workspace, mode, agents[name], r.text)
            got = r.json()["permission_mode"]
            spec = agents[name]
            ceiling = spec["max"]["owners" if sender in spec["owners"] else "taskers"]
            expected = mode or min("workspace", ceiling, key=MODES.index)
            assert got == expected, (name, sender, mode, spec)
        else:
            assert r.status_code == 403, (name, sender, workspace, mode, agents[name], r.text)
            assert r.json()["error"]["code"] == want, (name, sender, workspace, mode, agents[name])
    # Each outcome came up: the oracle was asked about every rule.
    assert set(outcomes) == {None, "not_a_tasker", "workspace_not_allowed", "mode_not_allowed"}, (
        outcomes
    )


async def test_a_calendar_entry_is_refused_when_it_is_made_not_at_its_delivery(
    team: Api, settings: Settings
) -> None:
    """Mail for later follows the same rules, and says so when it is scheduled."""
    start = (datetime.now(UTC) + timedelta(days=2)).strftime("%Y-%m-%dT09:00:00")
    body = {"subject": "nightly", "body": "go", "start_at": start, "timezone": "UTC"}
    before = db_all_rows(settings)
    for who, to, mode, code in (
        ("olga", "bot@/srv/shop.new", None, "not_a_tasker"),
        ("dora", "bot@/etc.new", None, "workspace_not_allowed"),
        ("dora", "bot@/srv/shop.new", "full", "mode_not_allowed"),
    ):
        extra = {} if mode is None else {"permission_mode": mode}
        r = await team.http.post(
            "/api/v1/calendar", json={**body, "to": [to], **extra}, headers=team.auth(who)
        )
        assert error(r)["code"] == code, (who, to, r.text)
    assert db_all_rows(settings) == before
    ok = await team.http.post(
        "/api/v1/calendar",
        json={**body, "to": ["bot@/srv/shop.new"], "permission_mode": "workspace"},
        headers=team.auth("dora"),
    )
    assert ok.status_code == 201, ok.text


# --- found by review: the ways around the rules, each closed -----------------------


async def test_an_agent_mailing_itself_is_judged_like_any_agent_it_mails(team: Api) -> None:
    err = error(await team.send("bot", ["bot@/etc.new"]))
    assert err["code"] == "not_a_tasker"
    mine = (await team.send("ana", ["bot@/srv/shop.new"])).json()
    err = error(await team.send("bot", ["bot@/etc.new"], from_session_id=mine["session_id"]))
    assert err["code"] == "workspace_not_allowed"
    ok = await team.send("bot", ["bot@/srv/other.new"], from_session_id=mine["session_id"])
    assert ok.status_code == 201, ok.text


async def test_putting_a_tasker_on_the_to_line_does_not_act_for_her(team: Api) -> None:
    """olga starts a session with her agent codex and ana on the To line: ana owns
    it, but olga started it; codex may not set bot to work from there."""
    r = await team.send("olga", ["codex@/srv/x.new", "ana@/srv/x.new"], permission_mode="full")
    assert r.status_code == 201, r.text
    sid, alias = r.json()["session_id"], r.json()["session_alias"]
    err = error(await team.send("codex", [f"bot@/srv/x.{alias}"]))
    assert err["code"] == "not_a_tasker"
    err = error(await team.send("codex", ["bot@/srv/y.new"], from_session_id=sid))
    assert err["code"] == "not_a_tasker"
    # The other side: in a session ana started with codex (olga lets her), codex may.
    added = await team.http.post(
        "/api/v1/agents/codex/taskers", json={"name": "ana"}, headers=team.auth("olga")
    )
    assert added.status_code == 201, added.text
    mine = await team.send("ana", ["codex@/srv/z.new"])
    assert mine.status_code == 201, mine.text
    ok = await team.send("codex", ["bot@/srv/z.new"], from_session_id=mine.json()["session_id"])
    assert ok.status_code == 201, ok.text


async def test_bringing_an_agent_into_a_session_freer_than_ones_ceiling_is_refused(
    team: Api,
) -> None:
    r = await team.send("dora", ["olga@/srv/x.new"], permission_mode="full")  # no agent yet
    assert r.status_code == 201, r.text
    alias = r.json()["session_alias"]
    err = error(await team.send("dora", [f"olga@/srv/x.{alias}"], cc=[f"bot@/srv/x.{alias}"]))
    assert (err["code"], err["field"]) == ("mode_not_allowed", "permission_mode")
    # ana (owner: full) may bring bot in; then dora, a tasker, goes on with it.
    first = await team.send("ana", ["dora@/srv/y.new"], permission_mode="full")
    here = f"/srv/y.{first.json()['session_alias']}"
    assert (await team.send("ana", [f"bot@{here}"])).status_code == 201
    assert (await team.send("dora", [f"bot@{here}"])).status_code == 201


async def test_only_the_person_at_a_terminal_session_is_spared_the_roots(team: Api) -> None:
    url = "/api/v1/agent/sessions/interactive"
    body = {"platform_id": "p9", "owner": "ana", "cwd": "/etc"}
    r = await team.http.post(url, json=body, headers=team.auth("bot"))
    assert r.status_code == 200, r.text
    here = f"/etc.{r.json()['alias']}"
    # bot brings dora in; she may not set bot to work in /etc from there.
    assert (await team.send("bot", [f"dora@{here}"])).status_code == 201
    err = error(await team.send("dora", [f"bot@{here}"]))
    assert err["code"] == "workspace_not_allowed"
    assert (await team.send("ana", [f"bot@{here}"])).status_code == 201


async def test_a_failure_notice_to_an_agent_sets_nobody_to_work_and_is_delivered(
    team: Api,
) -> None:
    await team.agent("helper", workspaces=["/srv/*"], owners=["ana"])
    r = await team.http.post(
        "/api/v1/agent/mail",
        json={
            "to": ["helper@/srv/q.new"],
            "subject": "failed",
            "body": "x",
            "type": "failure",
        },
        headers=team.auth("bot"),
    )
    assert r.status_code == 201, r.text
