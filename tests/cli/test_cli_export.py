"""``agentmail export``: the real console script against a real gateway
(``shared_gateway``, no SMTP). The mbox and the .eml files read back with
Python's `mailbox` and `email`: one message per mail, the threading headers,
attachments byte for byte; agents and people without access are refused, and
no file is left behind then (docs/email.md, "Export")."""

from __future__ import annotations

import email
import email.policy
import mailbox
import subprocess
from collections.abc import AsyncIterator
from email.message import EmailMessage
from itertools import count
from pathlib import Path

import anyio
import pytest
from tests.cli.test_cli_devices import AGENTMAIL, env_of
from tests.conftest import Api, admin_api

from mailui4agents import testing
from mailui4agents.testing import GatewayProcess

pytestmark = [pytest.mark.e2e, pytest.mark.anyio]

_RUN = count(1)
DATA = bytes(range(256)) * 40  # 10 KiB, every byte value


@pytest.fixture
async def live(shared_gateway: GatewayProcess) -> AsyncIterator[Api]:
    async with admin_api(shared_gateway.url) as a:
        yield a


async def cli(env: dict[str, str], *args: str) -> subprocess.CompletedProcess[bytes]:
    with anyio.fail_after(60):
        return await anyio.run_process(
            [*AGENTMAIL, "export", *args], env=env, check=False, stdin=subprocess.DEVNULL
        )


def parse(data: bytes) -> EmailMessage:
    msg = email.message_from_bytes(data, policy=email.policy.default)
    assert isinstance(msg, EmailMessage)
    return msg


async def test_export_writes_mbox_and_eml_that_read_back(
    live: Api, shared_gateway: GatewayProcess, tmp_path: Path
) -> None:
    n = next(_RUN)
    ana, carol, bot = f"ana-x{n}", f"carol-x{n}", f"bot-x{n}"
    token = await live.user(ana)
    carol_token = await live.user(carol)
    key = await live.agent(bot)
    first = await live.send(ana, [f"{bot}@/srv/shop.new"], subject="fix it")
    assert first.status_code == 201, first.text
    sid, parent = first.json()["session_id"], first.json()["id"]
    up = await live.http.post(
        "/api/v1/agent/attachments",
        files={"file": ("report.bin", DATA, "application/octet-stream")},
        headers=live.auth(bot),
    )
    assert up.status_code == 201, up.text
    answer = await live.send(
        bot, [f"{ana}@/srv/shop"], subject="Re: fix it", body="done",
        parent_mail_id=parent, attachment_ids=[up.json()["attachment_id"]],
    )  # fmt: skip
    assert answer.status_code == 201, answer.text
    ids = [parent, answer.json()["id"]]

    env = env_of(shared_gateway, token, tmp_path)
    box = tmp_path / "thread.mbox"
    done = await cli(env, sid, "--out", str(box))
    assert done.returncode == 0, done.stderr.decode()
    assert f"2 messages written to {box}" in done.stdout.decode()
    source = mailbox.mbox(box, create=False)
    messages = [parse(source.get_bytes(k)) for k in source.iterkeys()]
    source.close()
    assert [m["Message-ID"].split("@")[0] for m in messages] == [f"<mail.{i}" for i in ids]
    assert messages[1]["In-Reply-To"] == messages[0]["Message-ID"]
    assert messages[1]["References"].split() == [
        messages[0]["In-Reply-To"],  # the session's thread root
        messages[0]["Message-ID"],
    ]
    [part] = list(messages[1].iter_attachments())
    assert part.get_filename() == "report.bin" and part.get_content() == DATA
    # A second run does not overwrite the file.
    again = await cli(env, sid, "--out", str(box))
    assert again.returncode == 1 and b"exists already" in again.stderr

    out = tmp_path / "eml"
    done = await cli(env, sid, "--format", "eml", "--out", str(out))
    assert done.returncode == 0, done.stderr.decode()
    files = sorted(out.iterdir())
    assert [f.name for f in files] == [f"0001-{ids[0]}.eml", f"0002-{ids[1]}.eml"]
    raw = files[1].read_bytes()
    assert b"\r\n" in raw and b"\n" not in raw.replace(b"\r\n", b"")  # CRLF, as mailed
    eml = parse(raw)
    assert eml["Message-ID"] == messages[1]["Message-ID"]
    assert eml["References"] == messages[1]["References"]
    [part] = list(eml.iter_attachments())
    assert part.get_content() == DATA

    # carol may not read the session: 404, no file; an agent key: refused.
    nothing = tmp_path / "carol.mbox"
    refused = await cli(
        env_of(shared_gateway, carol_token, tmp_path / "c"), sid, "--out", str(nothing)
    )
    assert refused.returncode == 1, refused.stderr
    assert f"session '{sid}'".encode() in refused.stderr, refused.stderr
    assert not nothing.exists() and not nothing.with_name("carol.mbox.part").exists()
    agent_env = testing.clean_env(
        AGENTMAIL_URL=shared_gateway.url, AGENTMAIL_KEY=key, XDG_CONFIG_HOME=str(tmp_path / "a")
    )
    refused = await cli(agent_env, sid, "--out", str(tmp_path / "agent.mbox"))
    assert refused.returncode == 1 and b"export is for people" in refused.stderr, refused.stderr
    assert not (tmp_path / "agent.mbox").exists()
