"""A `work` mail (a turn's diff, docs/review.md) sets nobody to work, is no hop
and counts toward no send budget — each next to the negative control: the same
mail as a `message` is judged, counted and refused."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest

from mailui4agents.bridge.replies import starts_turn
from mailui4agents.domain.mail_types import BUDGETED, MailType
from mailui4agents.domain.tasking import NO_TURN_TYPES
from mailui4agents.settings import Settings
from tests.conftest import Api, make_settings

pytestmark = pytest.mark.anyio


@pytest.fixture
def settings(tmp_path: Path, db_backend: str, request: pytest.FixtureRequest) -> Settings:
    return make_settings(request, tmp_path, db_backend, send_budget=2)


@pytest.fixture
async def team(api: Api) -> dict[str, Any]:
    """ana owns bot and helper; olga owns codex (ana may not set codex to work)."""
    api.open_agents = False
    for name in ("ana", "olga"):
        await api.user(name)
    await api.agent("bot", workspaces=["/srv/*"], owners=["ana"])
    await api.agent("helper", workspaces=["/srv/*"], owners=["ana"])
    await api.agent("codex", workspaces=["/srv/*"], owners=["olga"])
    r = await api.send("ana", ["bot@/srv/shop.new", "helper@/srv/shop.new"], subject="pair")
    assert r.status_code == 201, r.text
    return dict(r.json())


async def mail(api: Api, to: str, type_: str, **extra: Any) -> Any:
    return await api.http.post(
        "/api/v1/agent/mail",
        json={"to": [to], "subject": "Work: 1 file changed", "body": "b", "type": type_, **extra},
        headers=api.auth("bot"),
    )


def test_work_is_never_a_turn_nor_budgeted() -> None:
    assert MailType.WORK in NO_TURN_TYPES and not starts_turn("work")
    assert MailType.WORK not in BUDGETED
    assert starts_turn("message")  # the negative control


async def test_a_work_mail_to_an_agent_nobody_may_task_is_delivered(
    api: Api, team: dict[str, Any]
) -> None:
    refused = await mail(api, "codex@/srv/q.new", "message")
    assert refused.status_code == 403 and refused.json()["error"]["code"] == "not_a_tasker"
    r = await mail(api, "codex@/srv/q.new", "work")
    assert r.status_code == 201, r.text
    assert r.json()["type"] == "work"
    inbox = await api.http.get("/api/v1/agent/inbox", headers=api.auth("codex"))
    assert [i["type"] for i in inbox.json()["items"]] == ["work"]


async def test_work_mails_spend_no_budget(api: Api, team: dict[str, Any]) -> None:
    to = f"helper@/srv/shop.{team['session_alias']}"
    for _ in range(3):
        r = await mail(api, to, "work")
        assert r.status_code == 201, r.text
    statuses = [(await mail(api, to, "message")).status_code for _ in range(3)]
    assert statuses == [201, 201, 409]


async def test_work_mails_have_a_cap_of_their_own(api: Api, team: dict[str, Any]) -> None:
    """Twice the send budget (2 here) between two human mails: a flood stops, a
    person's mail opens a new count."""
    to = f"helper@/srv/shop.{team['session_alias']}"
    assert [(await mail(api, to, "work")).status_code for _ in range(4)] == [201] * 4
    over = await mail(api, to, "work")
    assert over.status_code == 409
    assert (over.json()["error"]["code"], over.json()["error"]["budget"]) == ("budget_exhausted", 4)
    r = await api.send("ana", [to], subject="go on")
    assert r.status_code == 201, r.text
    assert (await mail(api, to, "work")).status_code == 201


async def test_an_unknown_type_names_the_field(api: Api, team: dict[str, Any]) -> None:
    r = await mail(api, "helper@/srv/q.new", "system")
    assert r.status_code == 400 and r.json()["error"]["field"] == "type"


async def test_a_review_goes_through_the_send_rules(api: Api, team: dict[str, Any]) -> None:
    """olga reads the session (cc'd) and may comment, but may not set bot to work:
    her review is refused like any mail of hers to bot, and nothing is marked sent."""
    from tests.work_mail import post_work

    r = await api.send("ana", ["bot@/srv/shop.new"], cc=["olga@/srv/shop"], subject="review me")
    assert r.status_code == 201, r.text
    first = r.json()
    work = await post_work(api, "bot", first["session_id"], first["id"], first["from"])
    for who in ("olga", "ana"):
        c = await api.http.post(
            f"/api/v1/mails/{work['id']}/comments",
            json={"path": "app.py", "line": 2, "body": f"{who}: why?"},
            headers=api.auth(who),
        )
        assert c.status_code == 201, c.text
    url = f"/api/v1/sessions/{first['session_id']}/review"
    refused = await api.http.post(url, json={}, headers=api.auth("olga"))
    assert refused.status_code == 403 and refused.json()["error"]["code"] == "not_a_tasker"
    view = await api.http.get(
        f"/api/v1/sessions/{first['session_id']}/work", headers=api.auth("olga")
    )
    assert view.json()["pending_comments"] == 1
    # The negative control: ana, bot's owner, sends hers.
    assert (await api.http.post(url, json={}, headers=api.auth("ana"))).status_code == 201
