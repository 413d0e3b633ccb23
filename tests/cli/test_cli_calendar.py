"""``agentmail schedule`` and ``agentmail calendar``: the real console script
against a real gateway (one per module, ``shared_gateway``; each test with a
person and an agent of its own), for a person and for an agent."""

from __future__ import annotations

import json
import subprocess
import sys
from collections.abc import AsyncIterator
from itertools import count
from pathlib import Path

import anyio
import pytest
from tests.conftest import Api, admin_api

from mailui4agents import testing
from mailui4agents.testing import GatewayProcess

pytestmark = [pytest.mark.e2e, pytest.mark.anyio]

_SCRIPT = Path(sys.executable).with_name("agentmail")
AGENTMAIL = [str(_SCRIPT)] if _SCRIPT.exists() else [sys.executable, "-m", "mailui4agents.cli.main"]
_PEOPLE = count(1)


@pytest.fixture
async def live(shared_gateway: GatewayProcess) -> AsyncIterator[Api]:
    """The module's one gateway, its admin logged in (over HTTP)."""
    async with admin_api(shared_gateway.url) as a:
        yield a


@pytest.fixture
def n() -> int:
    """This test's number: its names (ana-N, claude-N) are its own on the shared gateway."""
    return next(_PEOPLE)


async def cli(env: dict[str, str], *args: str) -> subprocess.CompletedProcess[bytes]:
    with anyio.fail_after(60):
        return await anyio.run_process(
            [*AGENTMAIL, *args], env=env, check=False, stdin=subprocess.DEVNULL
        )


async def test_schedule_list_show_edit_and_cancel_from_the_command_line(
    live: Api, shared_gateway: GatewayProcess, n: int, tmp_path: Path
) -> None:
    token = await live.user(f"ana-{n}")
    await live.agent(f"claude-{n}")
    env = testing.clean_env(
        AGENTMAIL_URL=shared_gateway.url,
        AGENTMAIL_TOKEN=token,
        XDG_CONFIG_HOME=str(tmp_path / "xdg"),
    )
    done = await cli(
        env, "schedule", "--to", f"claude-{n}@/srv/shop", "--subject", "standup", "--body", "hi",
        "--at", "2027-03-26T09:00", "--tz", "Europe/Berlin", "--rrule", "FREQ=DAILY;COUNT=4",
        "--json",
    )  # fmt: skip
    assert done.returncode == 0, done.stderr.decode()
    entry = json.loads(done.stdout)
    assert entry["upcoming"][:3] == [
        "2027-03-26T08:00:00Z",
        "2027-03-27T08:00:00Z",
        "2027-03-28T07:00:00Z",  # summer time in Berlin from the 28th
    ]

    listed = await cli(env, "calendar")
    assert listed.returncode == 0, listed.stderr.decode()
    assert entry["id"] in listed.stdout.decode() and "standup" in listed.stdout.decode()

    edited = await cli(env, "calendar", "edit", entry["id"], "--subject", "daily standup")
    assert edited.returncode == 0, edited.stderr.decode()
    shown = await cli(env, "calendar", "show", entry["id"])
    assert (
        "daily standup" in shown.stdout.decode() and "FREQ=DAILY;COUNT=4" in shown.stdout.decode()
    )

    cancelled = await cli(env, "calendar", "cancel", entry["id"])
    assert cancelled.returncode == 0 and "Cancelled" in cancelled.stdout.decode()
    listed = await cli(env, "calendar", "--status", "cancelled", "--json")
    assert [e["id"] for e in json.loads(listed.stdout)["items"]] == [entry["id"]]


async def test_a_refused_schedule_names_the_field_and_exits_1(
    live: Api, shared_gateway: GatewayProcess, n: int, tmp_path: Path
) -> None:
    key = await live.agent(f"claude-{n}")
    # A note to itself, from the session a person started with it: an agent's
    # mail sets an agent (itself too) to work only from there (docs/access.md).
    work = await live.send("admin", [f"claude-{n}@/srv/shop.new"], subject="work")
    assert work.status_code == 201, work.text
    env = testing.clean_env(
        AGENTMAIL_URL=shared_gateway.url,
        AGENTMAIL_KEY=key,
        XDG_CONFIG_HOME=str(tmp_path / "x"),
        AGENTMAIL_SESSION_ID=work.json()["session_id"],
    )
    done = await cli(
        env, "schedule", "--to", f"claude-{n}@/srv/shop", "--subject", "s", "--body", "b",
        "--at", "2027-01-01T09:00", "--tz", "Mars/Olympus",
    )  # fmt: skip
    assert done.returncode == 1
    assert "timezone" in done.stderr.decode() and "Mars/Olympus" in done.stderr.decode()
    ok = await cli(
        env, "schedule", "--to", f"claude-{n}@/srv/shop", "--subject", "note to self",
        "--body", "b",
        "--at", "2027-01-01T09:00Z",
    )  # fmt: skip
    assert ok.returncode == 0, ok.stderr.decode()
    listed = await cli(env, "calendar")
    assert "note to self" in listed.stdout.decode()  # an agent's own calendar
