"""The review's pages and forms over HTTP (in-process, real SQLite file or
PostgreSQL; docs/review.md, "Reading and commenting in the web UI"): a `work`
mail on the thread as its diff, a malformed one as plain mail; comments, Send
review and Merge/Discard/Keep from every side (anonymous, no CSRF token, a human
who cannot read the session, a reader who is no owner, the owner, an admin);
compose's "Own worktree"; the admin page's worktrees."""

from __future__ import annotations

import json
import re
from typing import Any

import httpx
import pytest

from tests.conftest import Api
from tests.web.forms import browser, csrf_of
from tests.web.test_diff_view import FILES, PATCH, work_json

pytestmark = pytest.mark.anyio

JSON = {"Accept": "application/json"}


async def upload(api: Api, agent: str, name: str, body: bytes, ctype: str) -> str:
    r = await api.http.post(
        "/api/v1/agent/attachments", files={"file": (name, body, ctype)}, headers=api.auth(agent)
    )
    assert r.status_code == 201, r.text
    out: str = r.json()["attachment_id"]
    return out


async def work_mail(
    api: Api, agent: str, to: str, started: dict[str, Any], work: bytes, patch: bytes | None
) -> dict[str, Any]:
    ids = [await upload(api, agent, "work.json", work, "application/json")]
    if patch is not None:
        ids.append(await upload(api, agent, "turn.diff", patch, "text/x-diff"))
    r = await api.send(
        agent,
        [f"{to}@{started['workspace']}.{started['session_alias']}"],
        subject="Work: 5 file(s) changed",
        body="Branch agentmail/fix, commits aaaaaaa..bbbbbbb",
        type="work",
        relay=True,
        relay_key=f"work:{agent}:{started['id']}:{len(ids)}:{len(work)}",
        parent_mail_id=started["id"],
        from_session_id=started["session_id"],
        attachment_ids=ids,
    )
    assert r.status_code == 201, r.text
    out: dict[str, Any] = r.json()
    return out


WORKTREE = {"branch": "agentmail/fix", "path": "/state/worktrees/abc/s1", "base_branch": "main",
            "base_commit": "a" * 40, "head_commit": "b" * 40, "bytes": 2_500_000,
            "state": "active", "dirty": True, "unmerged": 2}  # fmt: skip


async def world(api: Api) -> dict[str, Any]:
    """ana's session with bot (ana owns it; carl is cc'd: he reads it, owns
    nothing), bot's work mail and its worktree; bob reads nothing of it."""
    for name in ("ana", "bob", "carl"):
        await api.user(name)
    await api.user("root", is_admin=True)
    await api.agent("bot")
    r = await api.send(
        "ana", ["bot@/srv/app.new"], cc=["carl@/srv/app"], subject="Fix it", worktree=True
    )
    assert r.status_code == 201, r.text
    started = r.json()
    mail = await work_mail(api, "bot", "ana", started, work_json(), PATCH.encode())
    r = await api.http.put(
        f"/api/v1/agent/sessions/{started['session_id']}/work",
        json=WORKTREE,
        headers=api.auth("bot"),
    )
    assert r.status_code == 200, r.text
    return {"sid": started["session_id"], "mail": mail["id"], "started": started}


async def post(http: httpx.AsyncClient, url: str, page: str, **form: Any) -> httpx.Response:
    """A form of the page, with its CSRF token, asking for JSON."""
    csrf = csrf_of((await http.get(page)).text)
    return await http.post(url, data={"csrf": csrf, **form}, headers=JSON)


async def test_the_thread_shows_the_work_mail_as_its_diff_and_the_owner_finishes(
    api: Api,
) -> None:
    w = await world(api)
    page_url = f"/sessions/{w['sid']}"
    async with browser(api, "ana") as ana:
        page = (await ana.get(page_url)).text
        assert f'id="diff-{w["mail"]}"' in page
        assert page.count('<details class="file') == len(FILES)
        assert "é &lt;x&gt;.txt" in page and "binary file: not shown" in page
        assert 'id="work-panel"' in page and "agentmail/fix" in page and "2.5 MB" in page
        assert "uncommitted changes" in page and "2 not merged" in page
        assert "Merge into main" in page and "Yes, discard the worktree and branch" in page
        assert "Send review (0)" in page

        # A comment on new line 2 of app.py; then one on a line the hunk has not.
        r = await post(ana, f"/mails/{w['mail']}/comments", page_url,
                       path="app.py", line="2", body="why 2?")  # fmt: skip
        assert r.status_code == 201, r.text
        assert r.json()["side"] == "new" and r.json()["author"] == "ana"
        first = r.json()["id"]
        # A second one, on the old side, taken back with its Delete form.
        r = await post(ana, f"/mails/{w['mail']}/comments", page_url,
                       path="app.py", line="2", side="old", body="gone?")  # fmt: skip
        assert r.status_code == 201 and r.json()["side"] == "old", r.text
        second = r.json()["id"]
        page = (await ana.get(page_url)).text
        assert "Send review (2)" in page and f'action="/comments/{second}/delete"' in page
        assert re.search(r'class="cm old pending"', page)
        r = await ana.post(
            f"/comments/{second}/delete", data={"csrf": csrf_of(page), "next": page_url}
        )
        assert r.status_code == 303 and r.headers["location"] == page_url, r.text
        r = await post(ana, f"/mails/{w['mail']}/comments", page_url,
                       path="app.py", line="40", body="no such line")  # fmt: skip
        assert r.status_code == 400 and r.json()["error"]["field"] == "line", r.text
        r = await post(ana, f"/mails/{w['mail']}/comments", page_url,
                       path="app.py", line="two", body="x")  # fmt: skip
        assert r.status_code == 400 and r.json()["error"]["field"] == "line", r.text
        r = await post(ana, f"/mails/{w['mail']}/comments", page_url,
                       path="app.py", line="2", side="middle", body="x")  # fmt: skip
        assert r.status_code == 400 and r.json()["error"]["field"] == "side", r.text
        page = (await ana.get(page_url)).text
        assert "Send review (1)" in page
        assert re.search(r'class="cm new pending"[^>]*data-mine="1"', page)

        # Send review, without JavaScript: a redirect back, the comment sent.
        csrf = csrf_of(page)
        r = await ana.post(f"/sessions/{w['sid']}/review", data={"csrf": csrf})
        assert r.status_code == 303, r.text
        page = (await ana.get(page_url)).text
        assert "Send review (0)" in page and 'class="cm new sent"' in page
        assert f'action="/comments/{first}/delete"' not in page  # sent: no Delete
        r = await post(ana, f"/comments/{first}/delete", page_url)
        assert r.status_code == 409 and r.json()["error"]["reason"] == "already_sent"
        r = await post(ana, f"/sessions/{w['sid']}/review", page_url)
        assert r.status_code == 409 and r.json()["error"]["reason"] == "nothing_to_send"

        # Merge; a second action while it is pending is refused.
        r = await post(ana, f"/sessions/{w['sid']}/work/actions", page_url, action="merge")
        assert r.status_code == 200 and r.json()["status"] == "pending", r.text
        r = await post(ana, f"/sessions/{w['sid']}/work/actions", page_url, action="keep")
        assert r.status_code == 409 and r.json()["error"]["reason"] == "work_action_pending"
        r = await post(ana, f"/sessions/{w['sid']}/work/actions", page_url, action="rebase")
        assert r.status_code == 400 and r.json()["error"]["field"] == "action"
        # No remote reported: no Open PR button, and a forged push is refused.
        assert 'id="open-pr"' not in page
        r = await post(ana, f"/sessions/{w['sid']}/work/actions", page_url, action="push")
        assert r.status_code == 409 and r.json()["error"]["reason"] == "no_remote", r.text
        page = (await ana.get(page_url)).text
        assert "<strong>Merge</strong> by ana" in page

    async with browser(api, "carl") as carl:  # reads the thread, owns nothing
        page = (await carl.get(page_url)).text
        assert f'id="diff-{w["mail"]}"' in page
        assert "Merge into main" not in page and "Discard" not in page
        assert 'class="cm new sent"' in page  # a sent comment is everyone's
        r = await post(carl, f"/sessions/{w['sid']}/work/actions", page_url, action="discard")
        assert r.status_code == 403, r.text
        r = await post(carl, f"/comments/{first}/delete", page_url)
        assert r.status_code == 403, r.text  # not his

    async with browser(api, "bob") as bob:  # cannot read the session
        assert (await bob.get(page_url)).status_code == 404
        for url, form in (
            (f"/mails/{w['mail']}/comments", {"path": "app.py", "line": "2", "body": "x"}),
            (f"/sessions/{w['sid']}/work/actions", {"action": "discard"}),
            (f"/sessions/{w['sid']}/review", {}),
            (f"/comments/{first}/delete", {}),
        ):
            r = await post(bob, url, "/", **form)
            assert r.status_code == 404, (url, r.text)

    async with browser(api, "root") as root:  # an admin: the buttons and the worktrees
        page = (await root.get("/admin")).text
        assert 'id="worktrees-total"' in page and "2.5 MB" in page
        assert "/state/worktrees/abc/s1" in page


async def test_open_pr_is_shown_to_owners_when_there_is_a_remote(api: Api) -> None:
    w = await world(api)
    page_url = f"/sessions/{w['sid']}"
    r = await api.http.put(
        f"/api/v1/agent/sessions/{w['sid']}/work",
        json={**WORKTREE, "remote": "origin"},
        headers=api.auth("bot"),
    )
    assert r.status_code == 200, r.text
    async with browser(api, "carl") as carl:  # reads it, owns nothing: no button
        page = (await carl.get(page_url)).text
        assert 'id="work-panel"' in page and 'id="open-pr"' not in page
        r = await post(carl, f"/sessions/{w['sid']}/work/actions", page_url, action="push")
        assert r.status_code == 403, r.text
    async with browser(api, "ana") as ana:
        page = (await ana.get(page_url)).text
        assert 'id="open-pr"' in page and "Open PR (push to origin)" in page
        r = await post(ana, f"/sessions/{w['sid']}/work/actions", page_url, action="push")
        assert r.status_code == 200 and r.json()["action"] == "push", r.text
        said = "Pushed agentmail/fix to origin. gh pr create --base main --head agentmail/fix"
        done = await api.http.post(
            f"/api/v1/agent/work/actions/{r.json()['id']}",
            json={"status": "done", "message": said},
            headers=api.auth("bot"),
        )
        assert done.status_code == 200, done.text
        page = (await ana.get(page_url)).text
        assert "<strong>Push</strong> by ana" in page and said in page
    async with browser(api, "root") as root:  # an admin has the button too
        assert 'id="open-pr"' in (await root.get(page_url)).text


async def test_anonymous_and_forged_posts_are_refused(api: Api) -> None:
    w = await world(api)
    for url in (
        f"/mails/{w['mail']}/comments",
        f"/sessions/{w['sid']}/review",
        f"/sessions/{w['sid']}/work/actions",
    ):
        r = await api.http.post(url, data={"action": "merge"})
        assert r.status_code == 303 and r.headers["location"].startswith("/login"), url
        r = await api.http.post(url, data={"action": "merge"}, headers=JSON)
        assert r.status_code == 401, url
    async with browser(api, "ana") as ana:
        r = await ana.post(f"/sessions/{w['sid']}/work/actions", data={"action": "merge"})
        assert r.status_code == 403 and "CSRF" in r.text
        r = await ana.post(
            f"/sessions/{w['sid']}/work/actions",
            data={"action": "merge", "csrf": "forged"},
            headers=JSON,
        )
        assert r.status_code == 403
    # The agent's key is no web session.
    r = await api.http.post(
        f"/sessions/{w['sid']}/work/actions", data={"action": "merge"}, headers=api.auth("bot")
    )
    assert r.status_code == 303
    r = await api.http.get(f"/api/v1/sessions/{w['sid']}/work", headers=api.auth("ana"))
    assert r.json()["actions"] == []  # nothing was asked of the bridge


@pytest.mark.parametrize(
    "work, patch",
    [
        (b"{not json", PATCH.encode()),
        (work_json(version=2), PATCH.encode()),
        (work_json(), b"diff --git a/x b/x\n--- a/x\n+++ b/x\n@@ -1 +1 @@\n"),
        (json.dumps({"version": 1}).encode(), None),
    ],
)
async def test_a_malformed_work_mail_is_plain_mail_with_its_attachments(
    api: Api, work: bytes, patch: bytes | None
) -> None:
    await api.user("ana")
    await api.agent("bot")
    r = await api.send("ana", ["bot@/srv/app.new"], subject="Fix it")
    started = r.json()
    mail = await work_mail(api, "bot", "ana", started, work, patch)
    async with browser(api, "ana") as ana:
        r = await ana.get(f"/sessions/{started['session_id']}")
        assert r.status_code == 200, r.text
        assert f'id="diff-{mail["id"]}"' not in r.text
        assert "Branch agentmail/fix" in r.text  # the body, as text
        assert ">work.json</a>" in r.text


async def test_own_worktree_is_chosen_when_composing_a_new_session_only(api: Api) -> None:
    await api.user("ana")
    await api.agent("bot")
    async with browser(api, "ana") as ana:
        page = (await ana.get("/compose")).text
        assert 'name="worktree"' in page
        csrf = csrf_of(page)
        made = {}
        for ticked in (True, False):
            form = {"csrf": csrf, "to": "bot@/srv/app.new", "subject": "s", "body": "b"}
            if ticked:
                form["worktree"] = "1"
            r = await ana.post("/compose", data=form, headers=JSON)
            assert r.status_code == 200, r.text
            made[ticked] = r.json()
        for ticked, sent in made.items():
            got = await api.http.get(
                f"/api/v1/sessions/{sent['session_id']}", headers=api.auth("ana")
            )
            assert got.json()["worktree"] is ticked
        # A reply has no such box, and a ticked one sent anyway changes nothing.
        reply = (await ana.get("/compose", params={"reply_to": made[False]["id"]})).text
        assert 'name="worktree"' not in reply
        first = made[False]
        form = {
            "csrf": csrf,
            "to": f"bot@{first['workspace']}.{first['session_alias']}",
            "subject": "Re: s",
            "body": "b",
            "parent_mail_id": first["id"],
            "worktree": "1",
        }
        r = await ana.post("/compose", data=form, headers=JSON)
        assert r.status_code == 200, r.text
        got = await api.http.get(
            f"/api/v1/sessions/{made[False]['session_id']}", headers=api.auth("ana")
        )
        assert got.json()["worktree"] is False
