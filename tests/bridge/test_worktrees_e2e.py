"""Worktrees end to end (docs/review.md): real git repositories, a real gateway, a
real bridge, and the real Claude Code and Codex CLIs against the scripted models
(or the fake agent CLI where no model is needed: the retention sweep, the sandbox).

What a test asserts about a turn's changes it reads from the `work` mail's own
attachments (``work.json``, ``turn.diff``) as a person's client downloads them.
"""

from __future__ import annotations

import json
import os
import shutil
import subprocess
from collections.abc import Awaitable, Callable, Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import anyio
import pytest

from tests import needs
from tests.bridge.agent_clis import REPO, require
from tests.bridge.git_repos import git, init_repo
from tests.bridge.harness import Agent, BridgeProcess, Human
from tests.bridge.real_cli import codex_bridge
from tests.fakes import scripted_http
from tests.fakes.model_server import ModelServer, bash_then_answer
from tests.fakes.model_server import answer as claude_answer
from tests.fakes.responses_server import ResponsesServer

pytestmark = [pytest.mark.anyio, pytest.mark.e2e, pytest.mark.timeout(600)]

TURN_S = 150.0  # one real-CLI turn on a loaded 2-core machine, with room to spare
LINES = "".join(f"line {n}\n" for n in range(1, 21))


def make_repo(root: Path) -> None:
    init_repo(
        root,
        {"a.txt": LINES, "b.txt": "bee one\n", "c.txt": "see one\n"},
        name="Ana",
        email="ana@example.org",
    )


def exists(path: Path) -> bool:
    return os.path.exists(path)


def read(path: Path) -> str:
    with open(path, encoding="utf-8") as f:
        return f.read()


def git_config(repo: Path, key: str) -> str:
    done = subprocess.run(["git", "config", key], cwd=repo, capture_output=True, text=True)
    return done.stdout.strip()


def reply_of(mails: list[dict[str, Any]]) -> str:
    return "".join(str(m["body"]) for m in mails if m.get("type") == "relay")


async def until(check: Callable[[], Awaitable[bool]], deadline: float = 60.0) -> None:
    """Poll ``check`` (the gateway and the bridge's log offer no event for these)."""
    with anyio.fail_after(deadline):
        while True:
            if await check():
                return
            await anyio.sleep(0.1)


# -- the person's side ---------------------------------------------------------------------


async def call(human: Human, method: str, path: str, status: int = 200, **kw: Any) -> Any:
    r = await human.http.request(method, path, headers=human.auth, **kw)
    assert r.status_code == status, (path, r.status_code, r.text)
    return r.json() if r.content else None


async def work_mails(human: Human, session_id: str) -> list[dict[str, Any]]:
    return [m for m in await human.mails(session_id) if m.get("type") == "work"]


async def wait_work(human: Human, session_id: str, parent: str) -> dict[str, Any]:
    """The turn's work mail, once its answer is there too (the work mail came first)."""
    mails = await human.wait_mail(
        session_id,
        lambda ms: any(m.get("parent_mail_id") == parent and m.get("type") == "relay" for m in ms),
        TURN_S,
    )
    works = [m for m in mails if m.get("parent_mail_id") == parent and m.get("type") == "work"]
    assert len(works) == 1, [(m["type"], m["subject"]) for m in mails]
    relay = next(m for m in mails if m.get("parent_mail_id") == parent and m["type"] == "relay")
    assert works[0]["created_at"] <= relay["created_at"]  # posted before the answer
    return dict(works[0])


async def attachments(human: Human, mail_id: str) -> dict[str, bytes]:
    mail = await call(human, "GET", f"/api/v1/mail/{mail_id}")
    found = {}
    for a in mail["attachments"]:
        r = await human.http.get(f"/api/v1/attachments/{a['attachment_id']}", headers=human.auth)
        assert r.status_code == 200, r.text
        found[a["name"]] = r.content
    return found


async def changed(human: Human, mail: dict[str, Any]) -> tuple[list[str], str, dict[str, Any]]:
    files = await attachments(human, mail["id"])
    doc = json.loads(files["work.json"])
    return [f["path"] for f in doc["files"]], files.get("turn.diff", b"").decode(), doc


async def act(human: Human, session_id: str, action: str) -> dict[str, Any]:
    """An owner's Merge / Discard / Keep, waited for until the bridge answered."""
    made = await call(human, "POST", f"/api/v1/sessions/{session_id}/work/actions", 201,
                      json={"action": action})  # fmt: skip
    with anyio.fail_after(TURN_S):
        while True:
            done = await call(human, "GET", f"/api/v1/work/actions/{made['id']}",
                              params={"wait": 20})  # fmt: skip
            if done["status"] != "pending":
                return dict(done)


async def session_work(human: Human, session_id: str) -> dict[str, Any]:
    return dict(await call(human, "GET", f"/api/v1/sessions/{session_id}/work"))


# -- the CLIs ------------------------------------------------------------------------------


@dataclass
class Cli:
    start: Callable[..., BridgeProcess]  # (agent, *bridge args)
    shell: Callable[[str, str], None]  # the next turns run this command, then answer
    answer: Callable[[str], None]
    requests: Callable[[], list[dict[str, Any]]]  # the bodies the model received


@pytest.fixture
def claude(claude_bin: Path) -> Iterator[Cli]:
    with ModelServer(claude_answer("ok")) as model:

        def start(agent: Agent, *args: str) -> BridgeProcess:
            home = agent.workspace.parent / "home"
            home.mkdir(exist_ok=True)
            return agent.bridge(
                "--runner-arg", f"bin={claude_bin}", "--runner-arg", f"home={home}", *args,
                runner="claude-code", HOME=str(home), ANTHROPIC_BASE_URL=model.url,
                ANTHROPIC_API_KEY="dummy", DISABLE_TELEMETRY="1",
                CLAUDE_CODE_DISABLE_NONESSENTIAL_TRAFFIC="1",
            )  # fmt: skip

        def shell(command: str, text: str) -> None:
            model.script = bash_then_answer(command, text)

        def answer(text: str) -> None:
            model.script = claude_answer(text)

        yield Cli(start, shell, answer, lambda: [r["body"] for r in model.messages_requests()])


@pytest.fixture
def codex(agent: Agent) -> Iterator[Cli]:
    codex_bin = require("@openai/codex")
    # Codex refuses to link its sandbox helper under a temporary dir: its home (in
    # the bridge's state dir) stays out of /tmp (as tests/bridge/test_codex_e2e.py).
    state = REPO / ".cache" / "test-state" / agent.name
    agent.state_dir = state
    with ResponsesServer(scripted_http.answer("ok")) as model:

        def start(agent: Agent, *args: str) -> BridgeProcess:
            return codex_bridge(agent, model.url, codex_bin, *args)

        def shell(command: str, text: str) -> None:
            model.script = scripted_http.shell_then_answer(command, text)

        def answer(text: str) -> None:
            model.script = scripted_http.answer(text)

        try:
            yield Cli(start, shell, answer, lambda: [r["body"] for r in model.model_requests()])
        finally:
            for bridge in agent.bridges:
                bridge.kill()
            shutil.rmtree(state, ignore_errors=True)


# -- the scenario every real CLI goes through -------------------------------------------------


async def turns_review_merge_discard(human: Human, agent: Agent, cli: Cli) -> None:
    repo = agent.workspace
    make_repo(repo)
    start_head = git(repo, "rev-parse", "HEAD")
    cli.start(agent, "--worktrees")
    to = f"{agent.name}@{repo}.new"

    # Session one, turn 1: two files (one committed by the agent, one not).
    cli.shell("sed -i 's/^line 10$/LINE TEN CHANGED/' a.txt && git commit -qam 'a: ten' "
              "&& echo 'bee two' >> b.txt", "DONE ONE")  # fmt: skip
    one = await human.send(to, "change a and b", subject="two files", mode="full")
    sid1 = one["session_id"]
    w1 = await wait_work(human, sid1, one["id"])
    paths, patch, doc = await changed(human, w1)
    assert sorted(paths) == ["a.txt", "b.txt"], doc
    assert "+LINE TEN CHANGED" in patch and "+bee two" in patch
    assert w1["subject"] == "Work: 2 files changed (+2 −1) — two files"
    assert doc["from_commit"] == start_head and doc["to_commit"] != start_head
    assert doc["base_branch"] == "main" and doc["branch"].startswith("agentmail/")
    assert w1["body"].startswith(f"Branch {doc['branch']}, commits {start_head[:7]}..")
    wt1 = Path(doc["path"])
    assert exists(wt1) and str(wt1).startswith(str(agent.state_dir / "worktrees"))
    # The workspace itself is untouched.
    assert (repo / "a.txt").read_text() == LINES and git(repo, "status", "--porcelain") == ""

    # Session two, on the same repository: its own worktree, its own file.
    cli.shell("echo 'session two' > s2.txt", "DONE TWO")
    two = await human.send(to, "add s2", subject="session two", mode="full")
    sid2 = two["session_id"]
    w2 = await wait_work(human, sid2, two["id"])
    paths2, _, doc2 = await changed(human, w2)
    assert paths2 == ["s2.txt"]
    wt2 = Path(doc2["path"])
    assert wt2 != wt1 and doc2["branch"] != doc["branch"]
    assert not (wt1 / "s2.txt").exists() and not (repo / "s2.txt").exists()
    assert "LINE TEN" not in (wt2 / "a.txt").read_text()

    # Session one, turn 2: one file; its work mail has that file alone.
    cli.shell("echo 'bee three' >> b.txt", "DONE THREE")
    again = await human.send(f"{agent.name}@{repo}", "one more", parent=one["id"])
    w3 = await wait_work(human, sid1, again["id"])
    paths3, patch3, doc3 = await changed(human, w3)
    assert paths3 == ["b.txt"] and "+bee three" in patch3 and "a.txt" not in patch3
    assert doc3["from_commit"] == doc3["to_commit"]  # nothing committed in this turn
    assert w3["body"].startswith(f"Branch {doc['branch']}, no commits")
    status = await session_work(human, sid1)
    assert status["work"]["dirty"] is True and status["work"]["unmerged"] == 1

    # A review comment on line 10 of a.txt reaches the model's next request.
    comment = {"path": "a.txt", "line": 10, "body": "Not like this: keep it lower case."}
    await call(human, "POST", f"/api/v1/mails/{w1['id']}/comments", 201, json=comment)
    cli.answer("will fix")
    before = len(cli.requests())
    review = await call(human, "POST", f"/api/v1/sessions/{sid1}/review", 201, json={})
    reply = await human.wait_reply(sid1, review["mail_id"], TURN_S)
    assert reply["type"] == "relay"
    told = json.dumps(cli.requests()[before:])
    assert "a.txt, line 10" in told, told[-3000:]
    assert "LINE TEN CHANGED" in told and "line 9" in told  # the code around it
    assert "Not like this: keep it lower case." in told
    # A turn that changed nothing posted no work mail.
    assert len(await work_mails(human, sid1)) == 2

    # Merge lands the branch in the workspace (uncommitted work committed first).
    merged = await act(human, sid1, "merge")
    assert merged["status"] == "done", merged
    assert "LINE TEN CHANGED" in (repo / "a.txt").read_text()
    assert (repo / "b.txt").read_text() == "bee one\nbee two\nbee three\n"
    assert git(repo, "rev-parse", "main") == git(wt1, "rev-parse", "HEAD")
    assert (await session_work(human, sid1))["work"]["unmerged"] == 0

    # Discard removes the other worktree and its branch.
    discarded = await act(human, sid2, "discard")
    assert discarded["status"] == "done", discarded
    assert not exists(wt2)
    assert doc2["branch"] not in git(repo, "branch", "--list")
    assert (await session_work(human, sid2))["work"]["state"] == "removed"
    assert not (repo / "s2.txt").exists()


@pytest.mark.slow
async def test_claude_code_worktrees_diffs_review_merge_discard(
    human: Human, agent: Agent, claude: Cli
) -> None:
    await turns_review_merge_discard(human, agent, claude)


@pytest.mark.slow
async def test_codex_worktrees_diffs_review_merge_discard(
    human: Human, agent: Agent, codex: Cli
) -> None:
    await turns_review_merge_discard(human, agent, codex)


# -- the fake agent: retention, conflicts, the sandbox ----------------------------------------


def fake(agent: Agent, *args: str, sandbox: bool = False) -> BridgeProcess:
    agent.log_path.touch()
    agent.fake_state.mkdir(exist_ok=True)
    extra = ["--sandbox-write", str(agent.log_path), "--sandbox-write", str(agent.fake_state)]
    return agent.bridge(*(extra if sandbox else []), *args, sandbox=sandbox)


async def test_retention_sweep_removes_clean_and_asks_about_dirty(
    human: Human, agent: Agent
) -> None:
    repo = agent.workspace
    make_repo(repo)
    bridge = fake(agent, "--worktrees", "--worktree-retention", "1s",
                  "--worktree-sweep-every", "0.3")  # fmt: skip
    to = f"{agent.name}@{repo}.new"
    dirty = await human.send(to, "!bash echo wip > wip.txt", subject="dirty", mode="full")
    clean = await human.send(to, "nothing to change", subject="clean", mode="full")
    w = await wait_work(human, dirty["session_id"], dirty["id"])
    await human.wait_reply(clean["session_id"], clean["id"])
    assert await work_mails(human, clean["session_id"]) == []  # nothing changed: no mail
    wt_dirty = Path(json.loads((await attachments(human, w["id"]))["work.json"])["path"])
    wt_clean = Path((await session_work(human, clean["session_id"]))["work"]["path"])
    assert exists(wt_clean) and exists(wt_dirty / "wip.txt")
    for sent in (dirty, clean):
        await call(human, "PATCH", f"/api/v1/sessions/{sent['session_id']}",
                   json={"archived": True})  # fmt: skip

    # The clean one goes; the owner of the dirty one gets the ask mail.
    async def removed() -> bool:
        state = (await session_work(human, clean["session_id"]))["work"]["state"]
        return bool(state == "removed")

    await until(removed)
    assert not exists(wt_clean)
    asked = await human.wait_mail(
        dirty["session_id"],
        lambda ms: any("past its retention" in m.get("body", "") for m in ms),
    )
    ask = next(m for m in asked if "past its retention" in m.get("body", ""))
    assert ask["type"] == "system" and "uncommitted changes" in ask["body"]

    # Sweeps go on; the dirty worktree stays and the owner was asked once.
    async def swept_again() -> bool:
        return bridge.log.count("still waits for its owner") >= 3

    await until(swept_again)
    assert read(wt_dirty / "wip.txt") == "wip\n"
    assert (await session_work(human, dirty["session_id"]))["work"]["state"] == "active"
    assert bridge.log.count("asked the owner") == 1
    # Keep answers, and Discard then removes it after all.
    assert (await act(human, dirty["session_id"], "keep"))["status"] == "done"
    assert (await act(human, dirty["session_id"], "discard"))["status"] == "done"
    assert not exists(wt_dirty)


async def test_merge_conflict_is_refused_and_goes_back_to_the_agent(
    human: Human, agent: Agent
) -> None:
    repo = agent.workspace
    make_repo(repo)
    fake(agent, "--worktrees")
    sent = await human.send(f"{agent.name}@{repo}.new", "!bash echo agent > c.txt",
                            subject="conflict", mode="full")  # fmt: skip
    await wait_work(human, sent["session_id"], sent["id"])
    (repo / "c.txt").write_text("human\n")
    git(repo, "commit", "-qam", "human edit")
    head = git(repo, "rev-parse", "HEAD")
    refused = await act(human, sent["session_id"], "merge")
    assert refused["status"] == "refused" and refused["conflicts"] == ["c.txt"], refused
    assert git(repo, "rev-parse", "HEAD") == head and git(repo, "status", "--porcelain") == ""
    # The gateway mailed the agent (from the person who asked) and it is a turn.
    thread = (await call(human, "GET", f"/api/v1/mail/{sent['id']}/thread"))["items"]
    back = next(m for m in thread if m["subject"].startswith("Merge refused"))
    assert "c.txt" in back["body"] and back["type"] == "message"
    await human.wait_reply(sent["session_id"], back["id"])  # the agent's turn answered it


async def test_open_pr_pushes_the_branch_to_the_remote(
    human: Human, agent: Agent, tmp_path: Path
) -> None:
    repo = agent.workspace
    make_repo(repo)
    fake(agent, "--worktrees")
    # No remote yet: the bridge reports none and the gateway refuses a push.
    sent = await human.send(f"{agent.name}@{repo}.new", "!bash echo agent > c.txt",
                            subject="pr", mode="full")  # fmt: skip
    sid = sent["session_id"]
    await wait_work(human, sid, sent["id"])
    assert (await session_work(human, sid))["work"]["remote"] is None
    r = await human.http.post(f"/api/v1/sessions/{sid}/work/actions", headers=human.auth,
                              json={"action": "push"})  # fmt: skip
    assert r.status_code == 409 and r.json()["error"]["reason"] == "no_remote", r.text
    # A bare repository as origin: the next report names it, and Open PR pushes.
    remote = tmp_path / "origin.git"
    git(tmp_path, "init", "-q", "--bare", str(remote))
    git(repo, "remote", "add", "origin", str(remote))
    more = await human.send(f"{agent.name}@{repo}", "!bash echo more > d.txt",
                            parent=sent["id"])  # fmt: skip
    await wait_work(human, sid, more["id"])
    work = (await session_work(human, sid))["work"]
    assert work["remote"] == "origin", work
    pushed = await act(human, sid, "push")
    assert pushed["status"] == "done", pushed
    branch = work["branch"]
    assert f"gh pr create --base main --head {branch}" in pushed["message"]
    assert git(remote, "show", f"{branch}:c.txt") == "agent"
    assert git(remote, "show", f"{branch}:d.txt") == "more"  # uncommitted work committed
    assert git(remote, "rev-parse", branch) == git(Path(work["path"]), "rev-parse", "HEAD")
    assert git(repo, "rev-parse", "main") != git(remote, "rev-parse", branch)  # not merged


async def test_without_a_repository_the_turn_runs_in_the_workspace(
    human: Human, agent: Agent
) -> None:
    bridge = fake(agent, "--worktrees")
    sent = await human.send(f"{agent.name}@{agent.workspace}.new", "!bash echo x > plain.txt",
                            mode="full")  # fmt: skip
    reply = await human.wait_reply(sent["session_id"], sent["id"])
    assert reply["type"] == "relay" and (agent.workspace / "plain.txt").exists()
    assert await work_mails(human, sent["session_id"]) == []
    assert "is not a git repository with a commit" in bridge.log


async def test_in_the_sandbox_the_agent_commits_but_cannot_touch_the_config(
    human: Human, agent: Agent
) -> None:
    if shutil.which("bwrap") is None:
        needs.missing("bubblewrap missing: scripts/install-test-deps.sh")
    repo = agent.workspace
    make_repo(repo)
    fake(agent, "--worktrees", sandbox=True)
    body = (
        "!bash echo new >> b.txt && git commit -qam 'agent commit' && echo committed\n"
        "!bash git config core.fsmonitor 'touch /tmp/pwned'; echo config-done\n"
    )
    sent = await human.send(f"{agent.name}@{repo}.new", body, subject="sandboxed",
                            mode="workspace")  # fmt: skip
    w = await wait_work(human, sent["session_id"], sent["id"])
    paths, _, doc = await changed(human, w)
    assert paths == ["b.txt"] and doc["from_commit"] != doc["to_commit"], doc
    assert git(repo, "log", "-1", "--format=%s", doc["branch"]) == "agent commit"
    assert "config-done" in reply_of(await human.replies_to(sent["session_id"], sent["id"]))
    assert git_config(repo, "core.fsmonitor") == ""


async def test_own_worktree_per_mail_a_capped_patch_and_a_thousand_files(
    human: Human, agent: Agent
) -> None:
    """Without --worktrees only the session whose first mail asked for one gets a
    worktree; past --diff-max-bytes the patch is left out and the mail says so."""
    repo = agent.workspace
    make_repo(repo)
    fake(agent, "--diff-max-bytes", "4096")
    to = f"{agent.name}@{repo}.new"
    plain = await human.send(to, "!bash echo plain > plain.txt", subject="plain", mode="full")
    await human.wait_reply(plain["session_id"], plain["id"])
    assert read(repo / "plain.txt") == "plain\n"  # in the workspace itself
    assert await work_mails(human, plain["session_id"]) == []
    git(repo, "add", "-A")
    git(repo, "commit", "-qm", "plain")

    body = "!bash for i in $(seq 1 1000); do echo file $i > f$i.txt; done\n"
    r = await human.http.post(
        "/api/v1/mail",
        json={"to": [to], "subject": "many", "body": body, "permission_mode": "full",
              "worktree": True},
        headers=human.auth,
    )  # fmt: skip
    assert r.status_code == 201, r.text
    own = r.json()
    w = await wait_work(human, own["session_id"], own["id"])
    files = await attachments(human, w["id"])
    doc = json.loads(files["work.json"])
    assert len(doc["files"]) == 1000 and doc["capped"] is True and doc["patch_bytes"] > 4096
    assert "turn.diff" not in files
    full = await call(human, "GET", f"/api/v1/mail/{w['id']}")  # the list shows the start
    assert (
        f"The patch ({doc['patch_bytes']} bytes) is past the limit of 4096 bytes" in (full["body"])
    )
    assert "1000 files changed, 1000 insertions(+)" in full["body"]
    assert w["subject"].startswith("Work: 1000 files changed (+1000 −0)")
    assert not exists(repo / "f1.txt")  # in the session's worktree, not the workspace
    assert exists(Path(doc["path"]) / "f1000.txt")


async def test_an_action_asked_while_the_bridge_was_away_is_done_when_it_starts(
    human: Human, agent: Agent
) -> None:
    repo = agent.workspace
    make_repo(repo)
    bridge = fake(agent, "--worktrees")
    sent = await human.send(f"{agent.name}@{repo}.new", "!bash echo away > away.txt",
                            subject="away", mode="full")  # fmt: skip
    await wait_work(human, sent["session_id"], sent["id"])
    bridge.stop()
    made = await call(human, "POST", f"/api/v1/sessions/{sent['session_id']}/work/actions", 201,
                      json={"action": "merge"})  # fmt: skip
    waited = await call(human, "GET", f"/api/v1/work/actions/{made['id']}", params={"wait": 1})
    assert waited["status"] == "pending"  # nobody carries it out
    fake(agent, "--worktrees")
    with anyio.fail_after(60):
        while True:
            done = await call(human, "GET", f"/api/v1/work/actions/{made['id']}",
                              params={"wait": 20})  # fmt: skip
            if done["status"] != "pending":
                break
    assert done["status"] == "done", done
    assert read(repo / "away.txt") == "away\n"


async def test_a_gateway_limit_below_ours_caps_the_patch_too(tmp_path: Path) -> None:
    """--diff-max-bytes 1 MiB, the gateway takes 20 KB files: the 60 KB patch is
    refused there, and the work mail goes out all the same, capped."""
    import httpx

    from mailui4agents.testing import FAST_HASH_ENV, GatewayProcess, clean_env
    from tests.conftest import ADMIN_PASSWORD, USER_PASSWORD

    env = clean_env(AGENTMAIL_ADMIN_PASSWORD=ADMIN_PASSWORD,
                    AGENTMAIL_ATTACHMENT_MAX_BYTES="20000", **FAST_HASH_ENV)  # fmt: skip
    gateway = GatewayProcess(data_dir=tmp_path / "gw", env=env)
    gateway.start()
    agent: Agent | None = None
    try:
        async with httpx.AsyncClient(base_url=gateway.url, timeout=30) as http:
            r = await http.post("/api/v1/auth/login",
                                json={"username": "admin", "password": ADMIN_PASSWORD})  # fmt: skip
            admin = r.json()["token"]
            r = await http.post("/api/v1/admin/users",
                                json={"username": "ana", "password": USER_PASSWORD},
                                headers={"Authorization": f"Bearer {admin}"})  # fmt: skip
            r = await http.post("/api/v1/auth/login",
                                json={"username": "ana", "password": USER_PASSWORD})  # fmt: skip
            human = Human(http, r.json()["token"], admin)
            agent = await human.new_agent(tmp_path / "a", gateway.url)
            make_repo(agent.workspace)
            fake(agent, "--worktrees")
            body = "!bash seq 1 10000 > numbers.txt"
            sent = await human.send(f"{agent.name}@{agent.workspace}.new", body,
                                    subject="big", mode="full")  # fmt: skip
            w = await wait_work(human, sent["session_id"], sent["id"])
            files = await attachments(human, w["id"])
            doc = json.loads(files["work.json"])
            assert "turn.diff" not in files and doc["capped"] is True
            assert doc["patch_bytes"] > 20000 and [f["path"] for f in doc["files"]] == [
                "numbers.txt"
            ]
            full = await call(human, "GET", f"/api/v1/mail/{w['id']}")
            assert "is past the limit of" in full["body"]
    finally:
        if agent is not None:
            for bridge in agent.bridges:
                bridge.kill()
        gateway.stop()


async def test_a_turn_interrupted_by_a_crash_still_reports_what_it_changed(
    human: Human, agent: Agent
) -> None:
    """The bridge is killed mid-turn after the agent wrote a file; the mail is run
    again on the next start, and its work mail still has that file: the snapshot
    from before the first attempt was kept in worktrees.json."""
    repo = agent.workspace
    make_repo(repo)
    bridge = fake(agent, "--worktrees")
    body = "!bash echo one > one.txt\n!hang-once\n"
    sent = await human.send(f"{agent.name}@{repo}.new", body, subject="crash", mode="full")

    async def written() -> bool:
        work = (await session_work(human, sent["session_id"]))["work"]
        return work is not None and exists(Path(work["path"]) / "one.txt")

    await until(written)
    bridge.kill()
    assert sent["id"] in read(agent.state_dir / "worktrees.json")  # the kept snapshot
    fake(agent, "--worktrees")
    w = await wait_work(human, sent["session_id"], sent["id"])
    paths, patch, _ = await changed(human, w)
    assert paths == ["one.txt"] and "+one" in patch
    assert sent["id"] not in read(agent.state_dir / "worktrees.json")  # settled: dropped
