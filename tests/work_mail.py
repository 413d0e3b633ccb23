"""A `work` mail as a bridge posts it (docs/review.md): its `work.json` and
`turn.diff` uploaded with the agent upload API, then the mail with
`type: "work"`. Shared by the gateway's tests of comments, reviews and actions."""

from __future__ import annotations

import json
from typing import Any

from tests.conftest import Api

# A turn that changed app.py (one hunk: line 2 replaced by two lines), deleted
# old.txt and touched a binary file. New side of app.py: lines 1..6; old: 1..5.
PATCH = "\n".join(
    [
        "diff --git a/app.py b/app.py",
        "index 1111111..2222222 100644",
        "--- a/app.py",
        "+++ b/app.py",
        "@@ -1,5 +1,6 @@",
        " import os",
        "-x = 1",
        "+x = 2",
        "+y = 3",
        " ",
        " def f():",
        "     return x",
        "diff --git a/old.txt b/old.txt",
        "deleted file mode 100644",
        "index 3333333..0000000",
        "--- a/old.txt",
        "+++ /dev/null",
        "@@ -1,2 +0,0 @@",
        "-gone",
        "-too",
        "diff --git a/img.png b/img.png",
        "index 4444444..5555555 100644",
        "Binary files a/img.png and b/img.png differ",
        "",
    ]
)

FILES: list[dict[str, Any]] = [
    {"path": "app.py", "old_path": None, "status": "modified", "added": 2, "deleted": 1,
     "binary": False},
    {"path": "old.txt", "old_path": None, "status": "deleted", "added": 0, "deleted": 2,
     "binary": False},
    {"path": "img.png", "old_path": None, "status": "modified", "added": None, "deleted": None,
     "binary": True},
]  # fmt: skip

FROM, TO = "a" * 40, "b" * 40


def work_json(files: list[dict[str, Any]] | None = None, *, capped: bool = False) -> bytes:
    return json.dumps(
        {
            "version": 1,
            "branch": "agentmail/fix",
            "path": "/srv/wt/fix",
            "base_branch": "main",
            "from_commit": FROM,
            "to_commit": TO,
            "capped": capped,
            "patch_bytes": len(PATCH),
            "files": FILES if files is None else files,
        }
    ).encode()


async def upload(api: Api, agent: str, name: str, content: bytes, ctype: str) -> str:
    r = await api.http.post(
        "/api/v1/agent/attachments",
        files={"file": (name, content, ctype)},
        headers=api.auth(agent),
    )
    assert r.status_code == 201, r.text
    return str(r.json()["attachment_id"])


async def post_work(
    api: Api,
    agent: str,
    session_id: str,
    parent_mail_id: str,
    to: str,
    *,
    patch: str | None = PATCH,
    summary: bytes | None = None,
    key: str | None = None,
) -> dict[str, Any]:
    """The work mail of the turn on `parent_mail_id`, as the bridge sends it."""
    ids = [await upload(api, agent, "work.json", summary or work_json(), "application/json")]
    if patch is not None:
        ids.append(await upload(api, agent, "turn.diff", patch.encode(), "text/x-diff"))
    r = await api.http.post(
        "/api/v1/agent/mail",
        json={
            "to": [to],
            "subject": "Work: 3 files changed (+2 −3) — Fix it",
            "body": "Branch agentmail/fix, commits aaaaaaa..bbbbbbb\n\n app.py | 3 ++-\n",
            "type": "work",
            "relay": True,
            "relay_key": key or f"work:{agent}:{parent_mail_id}",
            "parent_mail_id": parent_mail_id,
            "from_session_id": session_id,
            "attachment_ids": ids,
        },
        headers=api.auth(agent),
    )
    assert r.status_code == 201, r.text
    out: dict[str, Any] = r.json()
    return out


REPORT: dict[str, Any] = {
    "branch": "agentmail/fix",
    "path": "/srv/state/worktrees/abc/fix",
    "base_branch": "main",
    "base_commit": FROM,
    "head_commit": TO,
    "bytes": 12345,
    "state": "active",
    "dirty": True,
    "unmerged": 2,
}


async def report(api: Api, agent: str, session_id: str, **changes: Any) -> Any:
    return await api.http.put(
        f"/api/v1/agent/sessions/{session_id}/work",
        json={**REPORT, **changes},
        headers=api.auth(agent),
    )
