"""Reviewing the work on the gateway (docs/review.md; docs/api.md, "Work and
review"): the `work` mail, a session's worktree, review comments and the review
mail, merge / discard / keep and the bridge's answers, the retention question —
each route from every side (anonymous, the agent, another agent, the owner,
another human who reads the session, an admin). SQLite and PostgreSQL."""

from __future__ import annotations

from typing import Any

import pytest
from sqlalchemy import select

from mailui4agents.db.tables import EventRow
from mailui4agents.db.work_tables import ReviewCommentRow
from mailui4agents.state import Gateway
from tests.conftest import Api, snapshot
from tests.work_mail import FILES, PATCH, REPORT, post_work, report, work_json

pytestmark = pytest.mark.anyio

WS = "/srv/shop"
SIDES = (None, "claude", "codex", "ana", "bob", "carl", "root")


def gateway_of(api: Api) -> Gateway:
    gw: Gateway = api.http._transport.app.state.gateway  # type: ignore[attr-defined]
    return gw


@snapshot
async def world(api: Api) -> dict[str, Any]:
    """ana set claude to work in its own worktree, bob cc'd (he reads, he does not
    own); claude's bridge posted the turn's work mail and reported the worktree.
    carl is a user outside the session, root an admin, codex another agent."""
    for name in ("ana", "bob", "carl"):
        await api.user(name)
    await api.user("root", is_admin=True)
    await api.agent("claude", owners=["ana"])
    await api.agent("codex", owners=["carl"])
    r = await api.send(
        "ana", [f"claude@{WS}.new"], subject="Fix it", cc=[f"bob@{WS}"], worktree=True
    )
    assert r.status_code == 201, r.text
    mail = r.json()
    sid = mail["session_id"]
    work = await post_work(api, "claude", sid, mail["id"], mail["from"])
    r = await report(api, "claude", sid)
    assert r.status_code == 200, r.text
    return {"sid": sid, "mail": mail["id"], "work": work["id"], "from": mail["from"]}


def auth(api: Api, who: str | None) -> dict[str, str]:
    return api.auth(who) if who is not None else {}


async def comment(api: Api, who: str | None, mail_id: str, **body: Any) -> Any:
    body.setdefault("path", "app.py")
    body.setdefault("line", 2)
    body.setdefault("body", "why 2?")
    return await api.http.post(
        f"/api/v1/mails/{mail_id}/comments", json=body, headers=auth(api, who)
    )


async def act(api: Api, who: str | None, sid: str, action: str = "merge") -> Any:
    return await api.http.post(
        f"/api/v1/sessions/{sid}/work/actions", json={"action": action}, headers=auth(api, who)
    )


async def events(api: Api, principal: str, type_: str) -> list[dict[str, Any]]:
    async with gateway_of(api).read() as s:
        rows = await s.scalars(
            select(EventRow).where(EventRow.principal == principal, EventRow.type == type_)
        )
        return [r.data for r in rows]


# -- the mail and the session ------------------------------------------------------------


async def test_own_worktree_is_set_by_the_mail_that_makes_the_session(
    api: Api, world: dict[str, Any]
) -> None:
    sid = world["sid"]
    got = await api.http.get(f"/api/v1/sessions/{sid}", headers=api.auth("ana"))
    assert got.json()["worktree"] is True
    mail = await api.http.get(f"/api/v1/mail/{world['mail']}", headers=api.auth("ana"))
    assert mail.json()["worktree"] is True
    inbox = await api.http.get("/api/v1/agent/inbox?status=all", headers=api.auth("claude"))
    assert {i["worktree"] for i in inbox.json()["items"]} == {True}
    new_mail = await events(api, "agent:claude", "new_mail")
    assert new_mail and {e["worktree"] for e in new_mail} == {True}  # the live event too
    # A reply's worktree is ignored, not an error; the session keeps its choice.
    r = await api.send("ana", [world["from"]], parent_mail_id=world["work"], worktree=False)
    assert r.status_code == 201, r.text
    assert r.json()["worktree"] is True
    # Negative control: a session made without it.
    plain = await api.send("ana", [f"claude@{WS}.new"], subject="plain")
    assert plain.json()["worktree"] is False
    got = await api.http.get(
        f"/api/v1/sessions/{plain.json()['session_id']}", headers=api.auth("ana")
    )
    assert got.json()["worktree"] is False


async def test_an_agent_may_not_choose_a_worktree(api: Api, world: dict[str, Any]) -> None:
    r = await api.send("claude", [f"ana@{WS}"], worktree=True)
    assert r.status_code == 400
    assert r.json()["error"]["field"] == "worktree"


async def test_work_mails_are_no_hop_and_no_budget(api: Api, world: dict[str, Any]) -> None:
    """Six work mails with relay keys in a row pass a hop limit of 5; six relays
    (the negative control) do not."""
    sid, parent, to = world["sid"], world["mail"], world["from"]
    for i in range(6):
        await post_work(api, "claude", sid, parent, to, key=f"work:claude:{i}")
    hops = []
    for i in range(6):
        r = await api.http.post(
            "/api/v1/agent/mail",
            json={"to": [to], "subject": "s", "body": "b", "relay": True,
                  "relay_key": f"relay-{i}", "parent_mail_id": parent},
            headers=api.auth("claude"),
        )  # fmt: skip
        hops.append(r.status_code)
    assert hops[-1] == 409 and hops[:5] == [201] * 5
    # At the hop limit, the bridge's record of a turn still goes through.
    await post_work(api, "claude", sid, parent, to, key="work:claude:at-the-limit")


# -- the session's work ------------------------------------------------------------------


async def test_the_work_view_from_every_side(api: Api, world: dict[str, Any]) -> None:
    url = f"/api/v1/sessions/{world['sid']}/work"
    got = {who: (await api.http.get(url, headers=auth(api, who))).status_code for who in SIDES}
    assert got == {
        None: 401,
        "claude": 403,
        "codex": 403,
        "ana": 200,
        "bob": 200,
        "carl": 404,
        "root": 200,
    }
    view = (await api.http.get(url, headers=api.auth("bob"))).json()
    assert view["worktree"] is True
    assert view["work"]["branch"] == "agentmail/fix" and view["work"]["agent"] == "claude"
    assert view["work"]["bytes"] == 12345 and view["work"]["dirty"] is True
    assert view["actions"] == [] and view["comments"] == [] and view["pending_comments"] == 0
    missing = await api.http.get("/api/v1/sessions/nope/work", headers=api.auth("root"))
    assert missing.status_code == 404


async def test_reporting_a_worktree_from_every_side(api: Api, world: dict[str, Any]) -> None:
    sid = world["sid"]
    got = {}
    for who in SIDES:
        r = await api.http.put(
            f"/api/v1/agent/sessions/{sid}/work", json=REPORT, headers=auth(api, who)
        )
        got[who] = r.status_code
    assert got == {
        None: 401,
        "claude": 200,
        "codex": 404,
        "ana": 403,
        "bob": 403,
        "carl": 403,
        "root": 403,
    }


@pytest.mark.parametrize(
    ("field", "value"),
    [
        ("branch", "main"),
        ("branch", "agentmail/" + "x" * 250),
        ("path", "relative/path"),
        ("path", "/" + "p" * 4096),
        ("base_commit", "abc"),
        ("head_commit", "G" * 40),
        ("bytes", -1),
        ("bytes", 2**53 + 1),
        ("state", "gone"),
        ("unmerged", -1),
        ("dirty", "yes"),
    ],
)
async def test_a_bad_report_names_its_field(
    api: Api, world: dict[str, Any], field: str, value: Any
) -> None:
    r = await report(api, "claude", world["sid"], **{field: value})
    assert r.status_code == 400, r.text
    assert r.json()["error"]["field"] == field
    view = await api.http.get(f"/api/v1/sessions/{world['sid']}/work", headers=api.auth("ana"))
    work = view.json()["work"]  # nothing of the bad report was written
    assert (work["branch"], work["bytes"], work["state"]) == ("agentmail/fix", 12345, "active")


async def test_a_report_is_stored_as_sent(api: Api, world: dict[str, Any]) -> None:
    r = await report(api, "claude", world["sid"], bytes=2**53, dirty=False, base_branch=None)
    assert r.status_code == 200, r.text
    view = await api.http.get(f"/api/v1/sessions/{world['sid']}/work", headers=api.auth("ana"))
    work = view.json()["work"]
    assert (work["bytes"], work["dirty"], work["base_branch"]) == (2**53, False, None)


# -- comments ------------------------------------------------------------------------------


async def test_commenting_from_every_side(api: Api, world: dict[str, Any]) -> None:
    got = {who: (await comment(api, who, world["work"])).status_code for who in SIDES}
    assert got == {
        None: 401,
        "claude": 403,
        "codex": 403,
        "ana": 201,
        "bob": 201,
        "carl": 404,
        "root": 201,
    }


async def test_a_comment_carries_the_code_around_its_lines(api: Api, world: dict[str, Any]) -> None:
    r = await comment(api, "ana", world["work"], line=2, end_line=3, body="two lines")
    assert r.status_code == 201, r.text
    c = r.json()
    assert (c["path"], c["side"], c["line"], c["end_line"], c["author"]) == (
        "app.py",
        "new",
        2,
        3,
        "ana",
    )
    assert c["code"].split("\n") == [
        "1  import os",
        "  -x = 1",
        "2 +x = 2",
        "3 +y = 3",
        "4  ",
        "5  def f():",
        "6      return x",
    ]
    assert c["sent_at"] is None and c["mail_id"] == world["work"]
    old = await comment(api, "ana", world["work"], path="old.txt", line=2, side="old")
    assert old.status_code == 201, old.text
    assert old.json()["code"] == "1 -gone\n2 -too"


@pytest.mark.parametrize(
    ("body", "field"),
    [
        ({"path": "nope.py"}, "path"),
        ({"path": ""}, "path"),
        ({"path": "p" * 1001}, "path"),
        ({"line": 7}, "line"),  # app.py's new side ends at 6
        ({"line": 0}, "line"),
        ({"line": 6, "end_line": 7}, "end_line"),
        ({"line": 3, "end_line": 2}, "end_line"),
        ({"line": 1, "end_line": 202}, "end_line"),
        ({"side": "old", "line": 6}, "line"),  # the old side ends at 5
        ({"side": "both"}, "side"),
        ({"path": "img.png", "line": 1}, "line"),  # binary: no lines
        ({"path": "old.txt", "line": 1}, "line"),  # deleted: no new side
        ({"body": ""}, "body"),
        ({"body": "x" * 4001}, "body"),
        ({"line": "2"}, "line"),
    ],
)
async def test_a_bad_comment_names_its_field(
    api: Api, world: dict[str, Any], body: dict[str, Any], field: str
) -> None:
    r = await comment(api, "ana", world["work"], **body)
    assert r.status_code == 400, r.text
    assert r.json()["error"]["field"] == field
    view = await api.http.get(f"/api/v1/sessions/{world['sid']}/work", headers=api.auth("ana"))
    assert view.json()["comments"] == []


async def test_the_longest_comment_and_range_pass(api: Api, world: dict[str, Any]) -> None:
    r = await comment(api, "ana", world["work"], line=1, end_line=6, body="x" * 4000)
    assert r.status_code == 201, r.text


async def test_comments_go_on_work_mails_only(api: Api, world: dict[str, Any]) -> None:
    r = await comment(api, "ana", world["mail"])
    assert r.status_code == 400
    assert r.json()["error"]["field"] == "mail_id"
    r = await comment(api, "ana", "no-such-mail")
    assert r.status_code == 404


async def test_a_capped_patch_takes_no_comment(api: Api, world: dict[str, Any]) -> None:
    capped = await post_work(
        api, "claude", world["sid"], world["mail"], world["from"], patch=None,
        summary=work_json(capped=True), key="capped",
    )  # fmt: skip
    r = await comment(api, "ana", capped["id"])
    assert r.status_code == 409
    assert r.json()["error"]["reason"] == "no_patch"


async def test_an_unreadable_work_json_is_refused_not_a_500(
    api: Api, world: dict[str, Any]
) -> None:
    for i, bad in enumerate((b"{", b"[]", b'{"files": [{"path": 3}]}', b'{"files": 1}')):
        w = await post_work(
            api, "claude", world["sid"], world["mail"], world["from"], summary=bad,
            key=f"bad-{i}",
        )  # fmt: skip
        r = await comment(api, "ana", w["id"])
        assert r.status_code == 409, (bad, r.text)
        assert r.json()["error"]["reason"] == "no_patch"


async def test_at_most_200_pending_comments_per_person(api: Api, world: dict[str, Any]) -> None:
    gw = gateway_of(api)
    async with gw.write() as s:
        for i in range(199):
            s.add(
                ReviewCommentRow(
                    session_id=world["sid"],
                    mail_id=world["work"],
                    author="ana",
                    path="app.py",
                    side="new",
                    line=1,
                    body=f"c{i}",
                    code="1  import os",
                )
            )
    assert (await comment(api, "ana", world["work"])).status_code == 201
    r = await comment(api, "ana", world["work"])
    assert r.status_code == 409
    assert (r.json()["error"]["reason"], r.json()["error"]["limit"]) == ("too_many_comments", 200)
    # Another person's count is their own.
    assert (await comment(api, "bob", world["work"])).status_code == 201


async def test_deleting_a_comment_from_every_side(api: Api, world: dict[str, Any]) -> None:
    cid = (await comment(api, "ana", world["work"])).json()["id"]
    got = {}
    for who in (None, "claude", "codex", "carl", "bob", "root"):
        r = await api.http.delete(f"/api/v1/comments/{cid}", headers=auth(api, who))
        got[who] = r.status_code
    assert got == {None: 401, "claude": 403, "codex": 403, "carl": 404, "bob": 403, "root": 403}
    r = await api.http.delete(f"/api/v1/comments/{cid}", headers=api.auth("ana"))
    assert r.status_code == 204
    r = await api.http.delete(f"/api/v1/comments/{cid}", headers=api.auth("ana"))
    assert r.status_code == 404


async def test_others_see_a_comment_once_it_is_sent(api: Api, world: dict[str, Any]) -> None:
    url = f"/api/v1/sessions/{world['sid']}/work"
    await comment(api, "ana", world["work"])
    assert (await api.http.get(url, headers=api.auth("ana"))).json()["pending_comments"] == 1
    assert (await api.http.get(url, headers=api.auth("bob"))).json()["comments"] == []
    r = await api.http.post(
        f"/api/v1/sessions/{world['sid']}/review", json={}, headers=api.auth("ana")
    )
    assert r.status_code == 201, r.text
    seen = (await api.http.get(url, headers=api.auth("bob"))).json()["comments"]
    assert [c["author"] for c in seen] == ["ana"] and seen[0]["sent_mail_id"] == r.json()["mail_id"]


# -- the review mail -----------------------------------------------------------------------


async def test_the_review_mail_quotes_each_comment_in_file_and_line_order(
    api: Api, world: dict[str, Any]
) -> None:
    work = world["work"]
    await comment(api, "ana", work, line=3, body="and y?")
    await comment(api, "ana", work, path="old.txt", side="old", line=1, body="keep this file")
    await comment(api, "ana", work, line=1, end_line=2, body="why 2?")
    await comment(api, "bob", work, line=5, body="bob's own")
    r = await api.http.post(
        f"/api/v1/sessions/{world['sid']}/review", json={}, headers=api.auth("ana")
    )
    assert r.status_code == 201, r.text
    assert r.json()["comments"] == 3
    mail = (
        await api.http.get(f"/api/v1/mail/{r.json()['mail_id']}", headers=api.auth("ana"))
    ).json()
    assert mail["type"] == "message" and mail["parent_mail_id"] == work
    assert mail["session_id"] == world["sid"] and mail["from_name"] == "ana"
    assert [a.split("@")[0] for a in mail["to"]] == ["claude"]
    assert mail["subject"] == "Review: 3 comments on agentmail/fix"
    assert mail["body"] == (
        "app.py, line 1-2 (new):\n```\n1  import os\n  -x = 1\n2 +x = 2\n3 +y = 3\n4  \n"
        "5  def f():\n```\nwhy 2?\n\n"
        "app.py, line 3 (new):\n```\n1  import os\n  -x = 1\n2 +x = 2\n3 +y = 3\n4  \n"
        "5  def f():\n6      return x\n```\nand y?\n\n"
        "old.txt, line 1 (old):\n```\n1 -gone\n2 -too\n```\nkeep this file\n"
    )
    # It reaches the agent as a mail that starts a turn.
    inbox = await api.http.get("/api/v1/agent/inbox", headers=api.auth("claude"))
    assert r.json()["mail_id"] in [i["id"] for i in inbox.json()["items"]]
    # Sent: nothing pending is left for ana, bob's stays his.
    again = await api.http.post(
        f"/api/v1/sessions/{world['sid']}/review", json={}, headers=api.auth("ana")
    )
    assert again.status_code == 409
    assert again.json()["error"]["reason"] == "nothing_to_send"
    view = await api.http.get(f"/api/v1/sessions/{world['sid']}/work", headers=api.auth("bob"))
    assert view.json()["pending_comments"] == 1


async def test_sending_the_review_from_every_side(api: Api, world: dict[str, Any]) -> None:
    await comment(api, "ana", world["work"])
    url = f"/api/v1/sessions/{world['sid']}/review"
    got = {}
    for who in (None, "claude", "codex", "carl", "bob", "root"):
        got[who] = (await api.http.post(url, json={}, headers=auth(api, who))).status_code
    # bob and root read the session but have no comment of their own.
    assert got == {None: 401, "claude": 403, "codex": 403, "carl": 404, "bob": 409, "root": 409}
    bad = await api.http.post(url, json={"x": 1}, headers=api.auth("ana"))
    assert bad.status_code == 400 and bad.json()["error"]["field"] == "x"
    # No body at all is `{}`.
    assert (await api.http.post(url, headers=api.auth("ana"))).status_code == 201


async def test_a_failed_review_send_leaves_the_comments_pending(
    api: Api, world: dict[str, Any]
) -> None:
    """The mail and the marks are one transaction: a send refused (the session
    archived) marks nothing."""
    await comment(api, "ana", world["work"])
    r = await api.http.patch(
        f"/api/v1/sessions/{world['sid']}", json={"archived": True}, headers=api.auth("ana")
    )
    assert r.status_code == 200, r.text
    r = await api.http.post(
        f"/api/v1/sessions/{world['sid']}/review", json={}, headers=api.auth("ana")
    )
    assert r.status_code == 409
    async with gateway_of(api).read() as s:
        rows = list(await s.scalars(select(ReviewCommentRow)))
    assert [(c.sent_at, c.sent_mail_id) for c in rows] == [(None, None)]


async def test_marking_comments_sent_undoes_the_mail_when_they_changed(
    api: Api, world: dict[str, Any], monkeypatch: pytest.MonkeyPatch
) -> None:
    """A comment deleted between the read and the send: the review mail is not
    stored either (one transaction)."""
    from mailui4agents.services import sending

    await comment(api, "ana", world["work"])
    real = sending.send

    async def delete_then_send(gw: Gateway, sender: Any, draft: Any, **kw: Any) -> Any:
        async with gw.write() as s:
            for row in await s.scalars(select(ReviewCommentRow)):
                await s.delete(row)
        return await real(gw, sender, draft, **kw)

    monkeypatch.setattr(sending, "send", delete_then_send)
    before = await api.http.get(f"/api/v1/mail/{world['work']}/thread", headers=api.auth("ana"))
    r = await api.http.post(
        f"/api/v1/sessions/{world['sid']}/review", json={}, headers=api.auth("ana")
    )
    assert r.status_code == 409 and r.json()["error"]["reason"] == "comments_changed"
    after = await api.http.get(f"/api/v1/mail/{world['work']}/thread", headers=api.auth("ana"))
    assert len(after.json()["items"]) == len(before.json()["items"])


# -- actions -------------------------------------------------------------------------------


async def test_only_owners_and_admins_act_on_the_worktree(api: Api, world: dict[str, Any]) -> None:
    sid = world["sid"]
    # bob is made a decider by ana: deciding is no power over the repository.
    r = await api.http.post(
        f"/api/v1/sessions/{sid}/deciders", json={"name": "bob"}, headers=api.auth("ana")
    )
    assert r.status_code in (200, 201), r.text
    got = {
        who: (await act(api, who, sid)).status_code
        for who in (None, "claude", "codex", "bob", "carl")
    }
    assert got == {None: 401, "claude": 403, "codex": 403, "bob": 403, "carl": 404}
    r = await act(api, "root", sid, "keep")
    assert r.status_code == 201, r.text
    assert (r.json()["action"], r.json()["status"], r.json()["requested_by"]) == (
        "keep",
        "pending",
        "root",
    )
    assert (await act(api, "ana", "no-such-session")).status_code == 404


async def test_an_action_reaches_the_agent_as_an_event(api: Api, world: dict[str, Any]) -> None:
    r = await act(api, "ana", world["sid"], "merge")
    assert r.status_code == 201, r.text
    got = await events(api, "agent:claude", "work_action")
    assert got == [r.json()]
    assert await events(api, "agent:codex", "work_action") == []
    pending = await api.http.get(
        "/api/v1/agent/work/actions?status=pending", headers=api.auth("claude")
    )
    assert [a["id"] for a in pending.json()["items"]] == [r.json()["id"]]
    other = await api.http.get(
        "/api/v1/agent/work/actions?status=pending", headers=api.auth("codex")
    )
    assert other.json()["items"] == []
    bad = await api.http.get("/api/v1/agent/work/actions?status=late", headers=api.auth("claude"))
    assert bad.status_code == 400 and bad.json()["error"]["field"] == "status"
    every = await api.http.get("/api/v1/agent/work/actions", headers=api.auth("claude"))
    assert [a["status"] for a in every.json()["items"]] == ["pending"]
    human = await api.http.get("/api/v1/agent/work/actions", headers=api.auth("ana"))
    assert human.status_code == 403


async def test_one_pending_action_per_session(api: Api, world: dict[str, Any]) -> None:
    first = await act(api, "ana", world["sid"], "merge")
    assert first.status_code == 201
    second = await act(api, "ana", world["sid"], "discard")
    assert second.status_code == 409
    assert second.json()["error"]["reason"] == "work_action_pending"
    done = await api.http.post(
        f"/api/v1/agent/work/actions/{first.json()['id']}",
        json={"status": "done", "message": "merged"},
        headers=api.auth("claude"),
    )
    assert done.status_code == 200, done.text
    assert (await act(api, "ana", world["sid"], "discard")).status_code == 201


async def test_no_action_without_an_active_worktree(api: Api, world: dict[str, Any]) -> None:
    await report(api, "claude", world["sid"], state="removed")
    r = await act(api, "ana", world["sid"])
    assert r.status_code == 409 and r.json()["error"]["reason"] == "no_worktree"
    plain = await api.send("ana", [f"claude@{WS}.new"], subject="plain")
    r = await act(api, "ana", plain.json()["session_id"])
    assert r.status_code == 409 and r.json()["error"]["reason"] == "no_worktree"


async def test_a_bad_action_names_its_field(api: Api, world: dict[str, Any]) -> None:
    r = await act(api, "ana", world["sid"], "rebase")
    assert r.status_code == 400 and r.json()["error"]["field"] == "action"


async def test_push_only_when_the_bridge_reported_a_remote(api: Api, world: dict[str, Any]) -> None:
    sid = world["sid"]
    r = await act(api, "ana", sid, "push")
    assert r.status_code == 409 and r.json()["error"]["reason"] == "no_remote", r.text
    assert await events(api, "agent:claude", "work_action") == []
    r = await report(api, "claude", sid, remote="origin")
    assert r.status_code == 200 and r.json()["remote"] == "origin", r.text
    view = await api.http.get(f"/api/v1/sessions/{sid}/work", headers=api.auth("bob"))
    assert view.json()["work"]["remote"] == "origin"
    got = {
        who: (await act(api, who, sid, "push")).status_code
        for who in (None, "claude", "codex", "bob", "carl")
    }
    assert got == {None: 401, "claude": 403, "codex": 403, "bob": 403, "carl": 404}
    r = await act(api, "ana", sid, "push")
    assert r.status_code == 201, r.text
    assert (r.json()["action"], r.json()["status"]) == ("push", "pending")
    assert await events(api, "agent:claude", "work_action") == [r.json()]
    done = await api.http.post(
        f"/api/v1/agent/work/actions/{r.json()['id']}",
        json={"status": "done", "message": "gh pr create --base main --head agentmail/fix"},
        headers=api.auth("claude"),
    )
    assert done.status_code == 200, done.text
    assert (await act(api, "root", sid, "push")).status_code == 201  # an admin too
    # A later report without a remote takes the button away again.
    await report(api, "claude", sid)
    view = await api.http.get(f"/api/v1/sessions/{sid}/work", headers=api.auth("ana"))
    assert view.json()["work"]["remote"] is None


@pytest.mark.parametrize("remote", ["", "--upload-pack=x", "a b", "o\nx", "r" * 256])
async def test_a_bad_remote_is_refused_by_name(
    api: Api, world: dict[str, Any], remote: str
) -> None:
    r = await report(api, "claude", world["sid"], remote=remote)
    assert r.status_code in (400, 422) and r.json()["error"]["field"] == "remote", r.text


async def test_reading_an_action_from_every_side_and_waiting_for_it(
    api: Api, world: dict[str, Any]
) -> None:
    aid = (await act(api, "ana", world["sid"])).json()["id"]
    url = f"/api/v1/work/actions/{aid}"
    got = {who: (await api.http.get(url, headers=auth(api, who))).status_code for who in SIDES}
    assert got == {
        None: 401,
        "claude": 403,
        "codex": 403,
        "ana": 200,
        "bob": 200,
        "carl": 404,
        "root": 200,
    }
    bad = await api.http.get(url + "?wait=31", headers=api.auth("ana"))
    assert bad.status_code == 400 and bad.json()["error"]["field"] == "wait"
    import anyio

    answers: list[dict[str, Any]] = []

    async def wait() -> None:
        r = await api.http.get(url + "?wait=20", headers=api.auth("ana"))
        answers.append(r.json())

    with anyio.fail_after(15):
        async with anyio.create_task_group() as tg:
            tg.start_soon(wait)
            await anyio.wait_all_tasks_blocked()
            r = await api.http.post(
                f"/api/v1/agent/work/actions/{aid}",
                json={"status": "done", "message": "merged: fast-forward"},
                headers=api.auth("claude"),
            )
            assert r.status_code == 200
    assert answers[0]["status"] == "done" and answers[0]["message"] == "merged: fast-forward"
    assert (await events(api, "user:ana", "work_action"))[0]["status"] == "done"


async def test_answering_an_action_from_every_side(api: Api, world: dict[str, Any]) -> None:
    aid = (await act(api, "ana", world["sid"])).json()["id"]
    url = f"/api/v1/agent/work/actions/{aid}"
    body = {"status": "failed", "message": "disk full"}
    got = {}
    for who in (None, "codex", "ana", "root"):
        got[who] = (await api.http.post(url, json=body, headers=auth(api, who))).status_code
    assert got == {None: 401, "codex": 404, "ana": 403, "root": 403}
    for bad, field in (
        ({"status": "merged", "message": ""}, "status"),
        ({"status": "done", "message": "m" * 4001}, "message"),
        ({"status": "done", "message": "", "conflicts": ["a"] * 1001}, "conflicts"),
        ({"status": "done", "message": "", "conflicts": [""]}, "conflicts[0]"),
    ):
        r = await api.http.post(url, json=bad, headers=api.auth("claude"))
        assert r.status_code == 400, r.text
        assert r.json()["error"]["field"] == field
    assert (await api.http.post(url, json=body, headers=api.auth("claude"))).status_code == 200
    again = await api.http.post(url, json=body, headers=api.auth("claude"))
    assert again.status_code == 409 and again.json()["error"]["reason"] == "already_finished"


async def test_a_merge_refused_on_conflicts_goes_back_to_the_agent(
    api: Api, world: dict[str, Any]
) -> None:
    aid = (await act(api, "ana", world["sid"], "merge")).json()["id"]
    r = await api.http.post(
        f"/api/v1/agent/work/actions/{aid}",
        json={"status": "refused", "message": "conflicts", "conflicts": ["app.py", "b c.txt"]},
        headers=api.auth("claude"),
    )
    assert r.status_code == 200, r.text
    assert (r.json()["status"], r.json()["conflicts"]) == ("refused", ["app.py", "b c.txt"])
    inbox = await api.http.get("/api/v1/agent/inbox", headers=api.auth("claude"))
    mails = [i for i in inbox.json()["items"] if i["subject"].startswith("Merge refused")]
    assert len(mails) == 1
    mail = (
        await api.http.get(
            f"/api/v1/agent/mail/{mails[0]['id']}?session_id={world['sid']}",
            headers=api.auth("claude"),
        )
    ).json()
    assert mail["subject"] == "Merge refused: conflicts with main"
    assert (mail["type"], mail["from_name"], mail["session_id"]) == ("message", "ana", world["sid"])
    assert "- app.py\n- b c.txt\n" in mail["body"]
    assert "merge main into your branch (agentmail/fix)" in mail["body"]


async def test_other_answers_send_no_mail(api: Api, world: dict[str, Any]) -> None:
    for status, action, conflicts in (
        ("refused", "merge", []),
        ("failed", "merge", ["app.py"]),
        ("done", "discard", []),
    ):
        aid = (await act(api, "ana", world["sid"], action)).json()["id"]
        r = await api.http.post(
            f"/api/v1/agent/work/actions/{aid}",
            json={"status": status, "message": "m", "conflicts": conflicts},
            headers=api.auth("claude"),
        )
        assert r.status_code == 200, r.text
    inbox = await api.http.get("/api/v1/agent/inbox", headers=api.auth("claude"))
    assert not [i for i in inbox.json()["items"] if i["subject"].startswith("Merge refused")]


# -- retention question -----------------------------------------------------------------


async def test_asking_about_a_worktree_is_deduplicated_until_answered(
    api: Api, world: dict[str, Any]
) -> None:
    sid = world["sid"]
    # Retention runs from the archiving: the question comes into an archived session.
    r = await api.http.patch(
        f"/api/v1/sessions/{sid}", json={"archived": True}, headers=api.auth("ana")
    )
    assert r.status_code == 200, r.text
    url = f"/api/v1/agent/sessions/{sid}/work/ask"
    body = {"reason": "it has uncommitted changes"}
    first = await api.http.post(url, json=body, headers=api.auth("claude"))
    assert first.status_code == 201, first.text
    mail_id = first.json()["mail_id"]
    mail = (await api.http.get(f"/api/v1/mail/{mail_id}", headers=api.auth("ana"))).json()
    assert mail["type"] == "system" and [a.split("@")[0] for a in mail["to"]] == ["ana"]
    assert (
        "The worktree of session " in mail["body"]
        and "(agentmail/fix, /srv/state/worktrees/abc/fix) is past its retention but it has "
        "uncommitted changes. Keep it or discard it:"
        in mail["body"]
    )
    assert f"/sessions/{sid}" in mail["body"]
    second = await api.http.post(url, json=body, headers=api.auth("claude"))
    assert second.status_code == 200
    assert second.json() == {"mail_id": mail_id, "deduplicated": True}
    # Negative control: once an owner kept it, a later ask is a new question.
    assert (await act(api, "ana", sid, "keep")).status_code == 201
    third = await api.http.post(url, json=body, headers=api.auth("claude"))
    assert third.status_code == 201 and third.json()["mail_id"] != mail_id


async def test_asking_from_every_side_and_bad_reasons(api: Api, world: dict[str, Any]) -> None:
    url = f"/api/v1/agent/sessions/{world['sid']}/work/ask"
    body = {"reason": "r"}
    got = {}
    for who in (None, "codex", "ana", "root"):
        got[who] = (await api.http.post(url, json=body, headers=auth(api, who))).status_code
    assert got == {None: 401, "codex": 404, "ana": 403, "root": 403}
    for bad in ({"reason": ""}, {"reason": "r" * 1001}):
        r = await api.http.post(url, json=bad, headers=api.auth("claude"))
        assert r.status_code == 400 and r.json()["error"]["field"] == "reason"


# -- admin --------------------------------------------------------------------------------


async def test_the_admin_lists_active_worktrees_and_their_size(
    api: Api, world: dict[str, Any]
) -> None:
    got = {}
    for who in SIDES:
        got[who] = (
            await api.http.get("/api/v1/admin/worktrees", headers=auth(api, who))
        ).status_code
    assert got == {
        None: 401,
        "claude": 403,
        "codex": 403,
        "ana": 403,
        "bob": 403,
        "carl": 403,
        "root": 200,
    }
    other = await api.send("carl", [f"codex@{WS}.new"], subject="other", worktree=True)
    await report(api, "codex", other.json()["session_id"], bytes=5, branch="agentmail/o")
    out = (await api.http.get("/api/v1/admin/worktrees", headers=api.auth("root"))).json()
    assert (out["count"], out["total_bytes"]) == (2, 12350)
    assert [i["branch"] for i in out["items"]] == ["agentmail/fix", "agentmail/o"]
    assert out["items"][0]["alias"] and out["items"][0]["agent"] == "claude"
    await report(api, "claude", world["sid"], state="removed")
    out = (await api.http.get("/api/v1/admin/worktrees", headers=api.auth("root"))).json()
    assert (out["count"], out["total_bytes"]) == (1, 5)


def test_the_fixture_patch_and_files_agree() -> None:
    from mailui4agents.domain import patch

    assert [f.path for f in patch.parse(PATCH)] == [f["path"] for f in FILES[:2]]


# -- races (SQLite and PostgreSQL) ----------------------------------------------------

AT_ONCE = 10


async def all_at_once(make: Any, n: int = AT_ONCE) -> list[Any]:
    import anyio

    out: list[Any] = []

    async def one() -> None:
        out.append(await make())

    async with anyio.create_task_group() as tg:
        for _ in range(n):
            tg.start_soon(one)
    return out


async def test_actions_asked_at_once_leave_one_pending(api: Api, world: dict[str, Any]) -> None:
    answers = await all_at_once(lambda: act(api, "ana", world["sid"], "merge"))
    codes = sorted(r.status_code for r in answers)
    assert codes == [201] + [409] * (AT_ONCE - 1), [r.text for r in answers]
    assert {r.json()["error"]["reason"] for r in answers if r.status_code == 409} == {
        "work_action_pending"
    }
    assert len(await events(api, "agent:claude", "work_action")) == 1


async def test_the_database_itself_refuses_a_second_pending_action(
    api: Api, world: dict[str, Any]
) -> None:
    """The partial unique index behind the check: a second pending row is refused
    by the database; a finished one beside a pending one is not."""
    from sqlalchemy.exc import IntegrityError

    from mailui4agents.db.work_tables import WorkActionRow

    def row(status: str) -> WorkActionRow:
        return WorkActionRow(
            session_id=world["sid"], agent="claude", action="keep", requested_by="ana",
            status=status, conflicts=[],
        )  # fmt: skip

    gw = gateway_of(api)
    async with gw.write() as s:
        s.add_all([row("pending"), row("done"), row("refused")])
    with pytest.raises(IntegrityError):
        async with gw.write() as s:
            s.add(row("pending"))


async def test_answers_at_once_finish_an_action_once(api: Api, world: dict[str, Any]) -> None:
    aid = (await act(api, "ana", world["sid"], "merge")).json()["id"]
    body = {"status": "refused", "message": "conflicts", "conflicts": ["app.py"]}
    answers = await all_at_once(
        lambda: api.http.post(
            f"/api/v1/agent/work/actions/{aid}", json=body, headers=api.auth("claude")
        )
    )
    codes = sorted(r.status_code for r in answers)
    assert codes == [200] + [409] * (AT_ONCE - 1), [r.text for r in answers]
    inbox = await api.http.get("/api/v1/agent/inbox", headers=api.auth("claude"))
    refusals = [i for i in inbox.json()["items"] if i["subject"].startswith("Merge refused")]
    assert len(refusals) == 1


async def test_asks_at_once_send_one_mail(api: Api, world: dict[str, Any]) -> None:
    url = f"/api/v1/agent/sessions/{world['sid']}/work/ask"
    answers = await all_at_once(
        lambda: api.http.post(url, json={"reason": "dirty"}, headers=api.auth("claude"))
    )
    codes = sorted(r.status_code for r in answers)
    assert codes == [200] * (AT_ONCE - 1) + [201], [r.text for r in answers]
    assert len({r.json()["mail_id"] for r in answers}) == 1


async def test_reviews_sent_at_once_send_the_comments_once(api: Api, world: dict[str, Any]) -> None:
    for line in (1, 2, 3):
        assert (await comment(api, "ana", world["work"], line=line)).status_code == 201
    url = f"/api/v1/sessions/{world['sid']}/review"
    answers = await all_at_once(lambda: api.http.post(url, json={}, headers=api.auth("ana")))
    sent = [r for r in answers if r.status_code == 201]
    assert len(sent) == 1, [r.text for r in answers]
    assert {r.status_code for r in answers} - {201} <= {409}
    async with gateway_of(api).read() as s:
        rows = list(await s.scalars(select(ReviewCommentRow)))
    assert {c.sent_mail_id for c in rows} == {sent[0].json()["mail_id"]}
    inbox = await api.http.get("/api/v1/agent/inbox", headers=api.auth("claude"))
    assert len([i for i in inbox.json()["items"] if i["subject"].startswith("Review:")]) == 1


async def test_a_conflict_mail_that_cannot_be_sent_is_said_in_the_answer(
    api: Api, world: dict[str, Any]
) -> None:
    """The session was archived after the merge was asked: the conflicts cannot
    go back as a mail, the action still finishes, and its message says why."""
    aid = (await act(api, "ana", world["sid"], "merge")).json()["id"]
    r = await api.http.patch(
        f"/api/v1/sessions/{world['sid']}", json={"archived": True}, headers=api.auth("ana")
    )
    assert r.status_code == 200, r.text
    r = await api.http.post(
        f"/api/v1/agent/work/actions/{aid}",
        json={"status": "refused", "message": "conflicts", "conflicts": ["app.py"]},
        headers=api.auth("claude"),
    )
    assert r.status_code == 200, r.text
    assert r.json()["status"] == "refused"
    assert "The conflicts could not be mailed to the agent" in r.json()["message"]
    assert "archived" in r.json()["message"]


# -- the client's names (client/client.py), as the bridge and the web use them ------


async def test_the_client_methods_walk_the_whole_flow(api: Api, world: dict[str, Any]) -> None:
    from mailui4agents.client import ApiError, AsyncClient, ClientConfig

    transport = api.http._transport  # the in-process app

    def client(who: str) -> AsyncClient:
        token = api.tokens[who]
        cfg = (
            ClientConfig(url="http://gw", key=token)
            if token.startswith("am_agent_")
            else ClientConfig(url="http://gw", token=token)
        )
        return AsyncClient(cfg, transport=transport)

    sid, work_id = world["sid"], world["work"]
    async with client("ana") as ana, client("claude") as claude, client("root") as root:
        assert (await ana.work(sid)).work is not None
        c = await ana.comment(work_id, "app.py", 2, "why?", end_line=3)
        assert (c.line, c.end_line, c.side) == (2, 3, "new")
        await ana.delete_comment(c.id)
        await ana.comment(work_id, "old.txt", 1, "keep it", side="old")
        sent = await ana.send_review(sid)
        assert sent.comments == 1
        with pytest.raises(ApiError) as refused:
            await ana.send_review(sid)
        assert refused.value.status == 409
        action = await ana.work_action(sid, "merge")
        assert [a.id for a in await claude.pending_work_actions()] == [action.id]
        done = await claude.finish_work_action(action.id, "refused", "conflicts", ["app.py"])
        assert done.conflicts == ["app.py"]
        got = await ana.get_work_action(action.id, wait=1)
        assert (got.status, got.message) == ("refused", "conflicts")
        assert await claude.pending_work_actions() == []
        work = await claude.report_work(sid, **{**REPORT, "bytes": 7})
        assert work.bytes == 7
        asked = await claude.ask_about_work(sid, "it has 2 commits nobody merged")
        again = await claude.ask_about_work(sid, "it has 2 commits nobody merged")
        assert (asked.deduplicated, again.deduplicated) == (False, True)
        assert again.mail_id == asked.mail_id
        trees = await root.admin_worktrees()
        assert (trees.count, trees.total_bytes) == (1, 7)
        mail = await claude.send_mail(
            [world["from"]], "Work: none", "no commits", mail_type="work",
            parent_mail_id=world["mail"], from_session_id=sid,
        )  # fmt: skip
        assert getattr(mail, "type", None) == "work"
