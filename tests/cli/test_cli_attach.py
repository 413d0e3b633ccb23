"""``agentmail send --attach``: the real console script against a real gateway."""

from __future__ import annotations

import hashlib
import json
import subprocess
import sys
from pathlib import Path

import anyio
import pytest
from tests.conftest import Api

from mailui4agents import testing
from mailui4agents.testing import GatewayProcess

pytestmark = [pytest.mark.e2e, pytest.mark.anyio]

_SCRIPT = Path(sys.executable).with_name("agentmail")
AGENTMAIL = [str(_SCRIPT)] if _SCRIPT.exists() else [sys.executable, "-m", "mailui4agents.cli.main"]


async def test_send_attach_uploads_each_file_then_sends_the_mail_with_their_ids(
    live: Api, gateway_process: GatewayProcess, tmp_path: Path
) -> None:
    token = await live.user("ana")
    await live.agent("claude")
    first, second = tmp_path / "plan.md", tmp_path / "data.bin"
    first.write_text("# plan\n", encoding="utf-8")
    second.write_bytes(bytes(range(256)))
    env = testing.clean_env(
        AGENTMAIL_URL=gateway_process.url,
        AGENTMAIL_TOKEN=token,
        XDG_CONFIG_HOME=str(tmp_path / "xdg"),
    )
    with anyio.fail_after(60):
        done = await anyio.run_process(
            [*AGENTMAIL, "send", "--to", "claude@/srv/shop.new", "--subject", "files",
             "--body", "b", "--attach", str(first), "--attach", str(second), "--json"],
            env=env, check=False, stdin=subprocess.DEVNULL,
        )  # fmt: skip
    assert done.returncode == 0, done.stderr.decode()
    sent = json.loads(done.stdout)
    assert [(a["name"], a["size"]) for a in sent["attachments"]] == [
        ("plan.md", 7),
        ("data.bin", 256),
    ]
    got = await live.http.get(
        f"/api/v1/attachments/{sent['attachments'][1]['attachment_id']}", headers=live.auth("ana")
    )
    assert hashlib.sha256(got.content).hexdigest() == hashlib.sha256(bytes(range(256))).hexdigest()
