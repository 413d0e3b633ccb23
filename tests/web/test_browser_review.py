"""A `work` mail read and reviewed in a real browser (docs/review.md, "Reading
and commenting in the web UI"): the diff of a real git repository's turn, seeded
through the real agent API (work.json and turn.diff uploaded, the mail sent with
type "work"), at desktop width side by side and at 375 px unified; a comment
added with the keyboard alone shows "pending", Send review marks it "sent" and
the agent gets the mail; the owner's Merge / Discard / Keep; axe finds nothing
serious; the XSS corpus in file names, old names and contents stays inert.

The phone picture of docs/review.md (docs/images/review-phone.png) is taken
here: copied to docs/images/ only with AGENTMAIL_UPDATE_DOCS_SCREENSHOTS=1,
always saved in test-artifacts/web/.

No sleeps: Playwright's expectations wait on the DOM with a deadline."""

from __future__ import annotations

import json
import os
import re
import shutil
import subprocess
import uuid
from pathlib import Path
from typing import Any

import pytest
from playwright.sync_api import Browser, BrowserContext, Page, expect

from tests.web.conftest import PHONE, ROOT, Web
from tests.web.test_browser import INJECTED, XSS, live, no_horizontal_scroll, open_as

pytestmark = pytest.mark.e2e
expect.set_options(timeout=10_000)


def git(repo: Path, *args: str) -> str:
    done = subprocess.run(
        ["git", "-C", str(repo), *args],
        capture_output=True,
        text=True,
        check=True,
        env={
            **os.environ,
            "GIT_AUTHOR_NAME": "t",
            "GIT_AUTHOR_EMAIL": "t@example.invalid",
            "GIT_COMMITTER_NAME": "t",
            "GIT_COMMITTER_EMAIL": "t@example.invalid",
            "GIT_CONFIG_GLOBAL": "/dev/null",
        },
    )
    return done.stdout


def make_repo(root: Path, before: dict[str, str]) -> Path:
    repo = root / f"repo-{uuid.uuid4().hex[:6]}"
    repo.mkdir()
    git(repo, "init", "-q", "-b", "main")
    for name, text in before.items():
        (repo / name).write_text(text)
    git(repo, "add", "-A")
    git(repo, "commit", "-q", "-m", "start")
    return repo


def turn_of(repo: Path, branch: str) -> tuple[bytes, bytes]:
    """work.json and turn.diff of what changed in `repo` since its last commit,
    the way the bridge makes them (docs/review.md): `git diff -M` of the index."""
    git(repo, "add", "-A")
    base = git(repo, "rev-parse", "HEAD").strip()
    patch = git(repo, "diff", "--cached", "--no-color", "--no-ext-diff", "-M")
    files = []
    numstat = git(repo, "diff", "--cached", "-M", "-z", "--numstat")
    status = git(repo, "diff", "--cached", "-M", "-z", "--name-status")
    names = status.split("\0")
    stats = numstat.split("\0")
    i = j = 0
    while i < len(names) and names[i]:
        kind = names[i][0]
        if kind == "R":
            old, new = names[i + 1], names[i + 2]
            i += 3
        else:
            old, new = None, names[i + 1]
            i += 2
        added, deleted, rest = stats[j].split("\t", 2)
        j += 3 if rest == "" else 1
        binary = added == "-"
        files.append(
            {
                "path": new,
                "old_path": old,
                "status": {"A": "added", "D": "deleted", "R": "renamed"}.get(kind, "modified"),
                "added": None if binary else int(added),
                "deleted": None if binary else int(deleted),
                "binary": binary,
            }
        )
    git(repo, "commit", "-q", "-m", "the turn")
    head = git(repo, "rev-parse", "HEAD").strip()
    work = {
        "version": 1,
        "branch": branch,
        "path": str(repo),
        "base_branch": "main",
        "from_commit": base,
        "to_commit": head,
        "capped": False,
        "patch_bytes": len(patch.encode()),
        "files": files,
    }
    return json.dumps(work).encode(), patch.encode()


def send_work(
    web: Web, agent: str, human: str, sent: dict[str, Any], work: bytes, patch: bytes
) -> dict[str, Any]:
    """The `work` mail through the agent API, as the bridge sends it."""
    ids = []
    for name, body, ctype in (
        ("work.json", work, "application/json"),
        ("turn.diff", patch, "text/x-diff"),
    ):
        up = web.http.post(
            "/api/v1/agent/attachments",
            files={"file": (name, body, ctype)},
            headers=web.auth(agent),
        )
        assert up.status_code == 201, up.text
        ids.append(up.json()["attachment_id"])
    doc = json.loads(work)
    n = len(doc["files"])
    return web.send(
        agent,
        [f"{human}@{sent['workspace']}.{sent['session_alias']}"],
        type="work",
        relay=True,
        relay_key=f"work:{agent}:{sent['id']}",
        parent_mail_id=sent["id"],
        from_session_id=sent["session_id"],
        subject=f"Work: {n} file(s) changed — Work",
        body=f"Branch {doc['branch']}, commits {doc['from_commit'][:7]}..{doc['to_commit'][:7]}",
        attachment_ids=ids,
    )


def report_work(web: Web, agent: str, session_id: str, work: bytes) -> None:
    doc = json.loads(work)
    r = web.http.put(
        f"/api/v1/agent/sessions/{session_id}/work",
        json={
            "branch": doc["branch"],
            "path": doc["path"],
            "base_branch": "main",
            "base_commit": doc["from_commit"],
            "head_commit": doc["to_commit"],
            "bytes": 123_456,
            "state": "active",
            "dirty": False,
            "unmerged": 1,
        },
        headers=web.auth(agent),
    )
    assert r.status_code == 200, r.text


APP_BEFORE = """def total(items):
    s = 0
    for i in items:
        s += i
    return s


def mean(items):
    return total(items) / len(items)
"""
APP_AFTER = """def total(items):
    return sum(items)


def mean(items):
    if not items:
        raise ValueError("mean of nothing")
    return total(items) / len(items)
"""


def seeded(web: Web, tmp_path: Path) -> tuple[str, str, dict[str, Any], dict[str, Any]]:
    """ana's session with bot and bot's `work` mail of a real repository's turn:
    app.py changed, notes.txt renamed to NOTES.md with a change, logo.png binary."""
    ana = web.user("ana")
    bot = web.agent("bot")
    sent = web.send(ana, [f"{bot}@/srv/{uuid.uuid4().hex[:6]}.new"], subject="Work", worktree=True)
    repo = make_repo(
        tmp_path,
        {"app.py": APP_BEFORE, "notes.txt": "one\ntwo\nthree\n", "logo.png": "\x00\x01"},
    )
    (repo / "app.py").write_text(APP_AFTER)
    (repo / "notes.txt").rename(repo / "NOTES.md")
    (repo / "NOTES.md").write_text("one\ntwo\nthree\nfour\n")
    (repo / "logo.png").write_bytes(b"\x00\x02\x03")
    work, patch = turn_of(repo, f"agentmail/{sent['session_alias']}")
    report_work(web, bot, sent["session_id"], work)
    mail = send_work(web, bot, ana, sent, work, patch)
    return ana, bot, sent, mail


def file_box(page: Page, path: str) -> Any:
    return page.locator(f'details.file[data-path="{path}"]')


def serious_axe_findings(page: Page, axe_source: str) -> list[Any]:
    page.evaluate(axe_source)
    violations = page.evaluate("async () => (await axe.run(document)).violations")
    return [
        (v["id"], v["nodes"][0]["target"])
        for v in violations
        if v["impact"] in ("serious", "critical")
    ]


def test_the_diff_reads_side_by_side_on_a_desktop_and_unified_on_a_phone(
    web: Web, browser: Browser, contexts: list[BrowserContext], tmp_path: Path, axe_source: str
) -> None:
    ana, _, sent, mail = seeded(web, tmp_path)
    sid = sent["session_id"]
    page, dialogs = open_as(browser, contexts, web, ana, path=f"/sessions/{sid}")
    app = file_box(page, "app.py")
    expect(app).to_have_attribute("open", "")
    expect(app.locator("summary")).to_contain_text("modified")
    expect(app.locator("summary")).to_contain_text("+3")
    expect(file_box(page, "NOTES.md").locator("summary")).to_contain_text("(from notes.txt)")
    expect(file_box(page, "logo.png")).to_contain_text("binary file: not shown")
    expect(page.locator("#work-panel")).to_contain_text(f"agentmail/{sent['session_alias']}")
    expect(page.locator("#work-panel")).to_contain_text("123.5 kB")
    # Highlighted: Pygments' classes on the Python file's tokens.
    expect(app.locator(".c.r .code .pg-k").first).to_be_visible()
    # Side by side: a deleted line and the added line beside it share a row.
    deleted = app.locator(".c.del").first
    added = app.locator(".c.add").first
    d, a = deleted.bounding_box(), added.bounding_box()
    assert d is not None and a is not None
    assert abs(d["y"] - a["y"]) < 2 and a["x"] > d["x"] + 200, (d, a)
    assert serious_axe_findings(page, axe_source) == []

    phone, _ = open_as(browser, contexts, web, ana, viewport=PHONE, path=f"/sessions/{sid}")
    app = file_box(phone, "app.py")
    expect(app.locator(".c.add").first).to_be_visible()
    no_horizontal_scroll(phone)
    deleted = app.locator(".c.del").first
    added = app.locator(".c.add").first
    d, a = deleted.bounding_box(), added.bounding_box()
    assert d is not None and a is not None
    # Unified: one column; every deletion of a change above its additions.
    assert abs(d["x"] - a["x"]) < 2 and a["y"] > d["y"], (d, a)
    dels = app.locator(".blk.chg").first.locator(".c.del")
    adds = app.locator(".blk.chg").first.locator(".c.add")
    last_del = dels.nth(dels.count() - 1).bounding_box()
    first_add = adds.first.bounding_box()
    assert last_del is not None and first_add is not None
    assert first_add["y"] > last_del["y"]
    assert dialogs == []
    assert mail["type"] == "work"


def test_a_comment_is_added_with_the_keyboard_and_sent_as_a_review(
    web: Web,
    browser: Browser,
    contexts: list[BrowserContext],
    tmp_path: Path,
    axe_source: str,
    artifacts: Path,
) -> None:
    ana, bot, sent, mail = seeded(web, tmp_path)
    sid = sent["session_id"]
    page, dialogs = open_as(browser, contexts, web, ana, viewport=PHONE, path=f"/sessions/{sid}")
    app = file_box(page, "app.py")
    review = page.locator("#work-panel").get_by_role("button", name=re.compile(r"^Send review"))
    expect(review).to_have_text("Send review (0)")
    expect(review).to_be_disabled()

    # Keyboard only: the new line 2 ("return sum(items)"), Enter opens the form …
    line2 = app.get_by_role("button", name="Comment on line 2, added")
    # One Tab stop per file: only the file's first line button is in the Tab order.
    stops = app.locator('button.ln[tabindex="0"]')
    expect(stops).to_have_count(1)
    # From the file's header: Tab to its first line, Down past old lines 2-5
    # (deleted, shown first on a phone) to new line 2.
    app.locator("summary").focus()
    page.keyboard.press("Tab")
    expect(app.get_by_role("button", name="Comment on line 1")).to_be_focused()
    for _ in range(5):
        page.keyboard.press("ArrowDown")
    expect(line2).to_be_focused()
    page.keyboard.press("Enter")
    box = page.get_by_role("textbox", name="Comment on line 2")
    expect(box).to_be_focused()
    # … Escape closes it and gives the focus back to the line …
    page.keyboard.press("Escape")
    expect(box).to_have_count(0)
    expect(line2).to_be_focused()
    # … Enter again, then Shift+Tab back to the line, the arrow keys down to new
    # line 6 (one Tab stop per file: Up/Down move between its lines) and
    # Shift+Enter make the range 2–6.
    page.keyboard.press("Enter")
    expect(page.get_by_role("textbox", name="Comment on line 2")).to_be_focused()
    page.keyboard.press("Shift+Tab")
    expect(line2).to_be_focused()
    for _ in range(4):  # new lines 3, 4, 5 (context) and 6 (added), as shown
        page.keyboard.press("ArrowDown")
    expect(app.get_by_role("button", name="Comment on line 6, added")).to_be_focused()
    page.keyboard.press("Shift+Enter")
    box = page.get_by_role("textbox", name="Comment on lines 2–6")
    expect(box).to_be_focused()
    page.keyboard.type("Keep the loop: sum() hides the <overflow> check.")
    page.keyboard.press("Tab")
    expect(page.get_by_role("button", name="Add comment")).to_be_focused()
    page.keyboard.press("Enter")
    comment = app.locator(".cm").filter(has_text="sum() hides the <overflow> check")
    expect(comment).to_be_visible()
    expect(comment.locator(".cstate")).to_have_text("pending")
    expect(comment).to_contain_text("line 2–6")
    expect(review).to_have_text("Send review (1)")
    delete = comment.get_by_role("button", name="Delete the comment on line 2–6 of app.py")
    expect(delete).to_be_visible()
    no_horizontal_scroll(page)

    # The gateway has it (a reload shows it, pending).
    page.reload()
    comment = file_box(page, "app.py").locator(".cm").filter(has_text="<overflow>")
    expect(comment.locator(".cstate")).to_have_text("pending")
    comment.scroll_into_view_if_needed()
    page.screenshot(path=str(artifacts / "review-phone.png"))

    assert serious_axe_findings(page, axe_source) == []

    review = page.locator("#work-panel").get_by_role("button", name="Send review (1)")
    review.focus()
    page.keyboard.press("Enter")
    expect(comment.locator(".cstate")).to_have_text("sent")
    panel = page.locator("#work-panel")
    expect(panel.get_by_role("button", name=re.compile("^Send review"))).to_have_text(
        "Send review (0)"
    )
    # The agent got one mail, in the session, with the file, the lines and the code.
    inbox = web.http.get(
        "/api/v1/agent/inbox", params={"session_id": sid}, headers=web.auth(bot)
    ).json()["items"]
    [got] = [m for m in inbox if m["subject"].startswith("Review: 1 comment")]
    full = web.http.get(f"/api/v1/agent/mail/{got['id']}", headers=web.auth(bot)).json()
    assert "app.py, line 2-6 (new):" in full["body"], full["body"]
    assert "return sum(items)" in full["body"]
    assert "<overflow>" in full["body"]
    assert got["parent_mail_id"] == mail["id"]
    # Sent stays sent after a reload.
    page.reload()
    expect(file_box(page, "app.py").locator(".cm .cstate")).to_have_text("sent")
    assert dialogs == []

    if os.environ.get("AGENTMAIL_UPDATE_DOCS_SCREENSHOTS") == "1":
        docs = ROOT / "docs" / "images"
        shutil.copy(artifacts / "review-phone.png", docs / "review-phone.png")


def test_only_the_owner_sees_merge_discard_and_keep(
    web: Web, browser: Browser, contexts: list[BrowserContext], tmp_path: Path
) -> None:
    ana, bot, sent, _ = seeded(web, tmp_path)
    sid = sent["session_id"]
    page, dialogs = open_as(browser, contexts, web, ana, path=f"/sessions/{sid}")
    panel = page.locator("#work-panel")
    expect(panel.get_by_role("button", name="Merge into main")).to_be_visible()
    expect(panel.get_by_role("button", name="Keep")).to_be_visible()
    # Discard asks first: the button that does it is behind "Discard…".
    final = panel.get_by_role("button", name="Yes, discard the worktree and branch")
    expect(final).to_be_hidden()
    panel.get_by_text("Discard…").click()
    expect(final).to_be_visible()
    panel.get_by_role("button", name="Merge into main").click()
    expect(panel.locator(".actions-list")).to_contain_text("Merge by")
    expect(panel.locator(".wa-status").first).to_have_text("pending")
    live(page)
    # The bridge answers; the page shows it by itself (the work_action event).
    [pending] = web.http.get(
        "/api/v1/agent/work/actions", params={"status": "pending"}, headers=web.auth(bot)
    ).json()["items"]
    r = web.http.post(
        f"/api/v1/agent/work/actions/{pending['id']}",
        json={"status": "done", "message": "fast-forwarded main", "conflicts": []},
        headers=web.auth(bot),
    )
    assert r.status_code == 200, r.text
    expect(panel.locator(".wa-status").first).to_have_text("done")
    expect(panel).to_contain_text("fast-forwarded main")

    # A second human who reads the thread (cc'd) sees the diff, not the buttons.
    bea = web.user("bea")
    web.send(
        ana,
        [f"{bot}@{sent['workspace']}.{sent['session_alias']}"],
        cc=[f"{bea}@{sent['workspace']}"],
    )
    other, _ = open_as(browser, contexts, web, bea, path=f"/sessions/{sid}")
    expect(file_box(other, "app.py")).to_be_visible()
    expect(other.get_by_role("button", name="Merge into main")).to_have_count(0)
    expect(other.get_by_role("button", name="Keep")).to_have_count(0)
    assert dialogs == []


def test_the_xss_corpus_in_file_names_and_contents_renders_inert(
    web: Web, browser: Browser, contexts: list[BrowserContext], tmp_path: Path
) -> None:
    ana = web.user("ana")
    bot = web.agent("bot")
    sent = web.send(ana, [f"{bot}@/srv/{uuid.uuid4().hex[:6]}.new"], subject="Work")
    names = [bad.replace("/", "_") for bad in XSS]  # a file name has no slash
    repo = make_repo(tmp_path, {f"old{i}.html": f"x{i}\n" for i in range(len(names))})
    for i, name in enumerate(names):
        (repo / f"old{i}.html").rename(repo / f"{name}{i}.html")
        (repo / f"{name}{i}.html").write_text(f"x{i}\n{XSS[i]}\n<p>{XSS[(i + 1) % len(XSS)]}</p>\n")
        (repo / f"{name}.js").write_text("\n".join(XSS) + "\n")
    work, patch = turn_of(repo, "agentmail/<img src=x onerror=alert(1)>")
    send_work(web, bot, ana, sent, work, patch)
    page, dialogs = open_as(browser, contexts, web, ana, path=f"/sessions/{sent['session_id']}")
    listed = json.loads(work)["files"]
    assert len(listed) >= 2 * len(names)  # renamed (or deleted and added) and the .js
    # Every file of the patch matched its work.json entry (none shown twice or unlisted).
    expect(page.locator(".diff details.file")).to_have_count(len(listed))
    expect(page.locator('.diff details.file[data-listed="1"]')).to_have_count(len(listed))
    meta = page.locator(".diff .work-meta")
    expect(meta).to_contain_text("agentmail/<img src=x onerror=alert(1)>")
    for name in (names[0], names[2]):  # no quote in these two
        expect(page.locator(f'details.file[data-path="{name}.js"]')).to_be_attached()
    expect(page.locator(".diff .c.add").filter(has_text=XSS[0]).first).to_be_visible()
    assert page.evaluate(INJECTED) == 0
    assert page.evaluate("window.__xss") is None
    assert dialogs == []


def test_a_turn_of_a_thousand_files_is_a_list_of_collapsed_files(
    web: Web, browser: Browser, contexts: list[BrowserContext], tmp_path: Path
) -> None:
    ana = web.user("ana")
    bot = web.agent("bot")
    sent = web.send(ana, [f"{bot}@/srv/{uuid.uuid4().hex[:6]}.new"], subject="Work")
    repo = make_repo(tmp_path, {"README.md": "start\n"})
    for i in range(1000):
        (repo / f"m{i:04}.py").write_text(f"def f{i}():\n    return {i}\n")
    work, patch = turn_of(repo, "agentmail/many")
    assert len(json.loads(work)["files"]) == 1000
    send_work(web, bot, ana, sent, work, patch)
    page, dialogs = open_as(browser, contexts, web, ana, path=f"/sessions/{sent['session_id']}")
    files = page.locator(".diff details.file")
    expect(files).to_have_count(1000)
    expect(page.locator(".diff details.file[open]")).to_have_count(0)
    expect(page.locator(".diff")).to_contain_text("every file starts collapsed")
    # One opens with the keyboard and shows its lines, highlighted.
    last = page.locator('details.file[data-path="m0999.py"]')
    last.locator("summary").focus()
    page.keyboard.press("Enter")
    expect(last.get_by_role("button", name="Comment on line 2, added")).to_be_visible()
    expect(last.locator(".pg-k").first).to_be_visible()
    size = page.evaluate("document.documentElement.outerHTML.length")
    assert size < 3_000_000, size
    assert dialogs == []
