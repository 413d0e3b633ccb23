"""``agentmail notify settings``: the real console script against a real gateway
(``shared_gateway``; each test with people of its own). It prints the caller's
policy; its options change only what they name (docs/remote.md, "Notification
policy")."""

from __future__ import annotations

import json
import subprocess
from collections.abc import AsyncIterator
from itertools import count
from pathlib import Path

import anyio
import pytest
from tests.cli.test_cli_devices import AGENTMAIL, env_of
from tests.conftest import Api, admin_api

from mailui4agents import testing
from mailui4agents.testing import GatewayProcess

pytestmark = [pytest.mark.e2e, pytest.mark.anyio]

_PEOPLE = count(1)
DEFAULT_LINES = [
    "push: on",
    "email: on",
    "email of agents' mails: on",
    "push content: preview",
    "when a page is visible: skip",
    "quiet hours: off",
    "time zone: UTC",
    "remind after: off",
    "escalate after: off",
    "daily digest: off",
]


@pytest.fixture
async def live(shared_gateway: GatewayProcess) -> AsyncIterator[Api]:
    async with admin_api(shared_gateway.url) as a:
        yield a


@pytest.fixture
def n() -> int:
    return next(_PEOPLE)


async def cli(env: dict[str, str], *args: str) -> subprocess.CompletedProcess[bytes]:
    with anyio.fail_after(60):
        return await anyio.run_process(
            [*AGENTMAIL, "notify", "settings", *args],
            env=env,
            check=False,
            stdin=subprocess.DEVNULL,
        )


def out(done: subprocess.CompletedProcess[bytes]) -> list[str]:
    assert done.returncode == 0, done.stderr.decode()
    return done.stdout.decode().splitlines()


async def test_settings_prints_and_changes_only_what_is_named(
    live: Api, shared_gateway: GatewayProcess, n: int, tmp_path: Path
) -> None:
    ana, bob = f"ana-{n}", f"bob-{n}"
    env = env_of(shared_gateway, await live.user(ana), tmp_path)
    bob_token = await live.user(bob)
    assert out(await cli(env)) == DEFAULT_LINES
    changed = out(
        await cli(
            env,
            "--quiet",
            "22:00-07:00",
            "--timezone",
            "Europe/Madrid",
            "--remind-after",
            "15",
            "--content",
            "none",
            "--when-visible",
            "push",
            "--email",
            "off",
            "--email-mail",
            "off",
            "--digest-hour",
            "7",
        )
    )
    assert changed == [
        "push: on",
        "email: off",
        "email of agents' mails: off",
        "push content: none",
        "when a page is visible: push",
        "quiet hours: 22:00-07:00 (Europe/Madrid)",
        "time zone: Europe/Madrid",
        "remind after: 15 min",
        "escalate after: off",
        "daily digest: 7:00 (Europe/Madrid)",
    ]
    # One option changes one setting; the rest stay.
    again = out(await cli(env, "--escalate-after", "30", "--push", "off"))
    assert again[0] == "push: off" and again[-2] == "escalate after: 30 min"
    assert again[1:-2] == changed[1:-2] and again[-1] == changed[-1]
    # The API says the same.
    policy = await live.http.get("/api/v1/me/notify-policy", headers=live.auth(ana))
    assert policy.json()["quiet_end"] == "07:00" and policy.json()["escalate_after_min"] == 30
    assert policy.json()["email"] is False and policy.json()["email_mail"] is False
    # off switches quiet hours, the reminder and escalation off.
    done = await cli(
        env, "--quiet", "off", "--remind-after", "off", "--escalate-after", "off",
        "--digest-hour", "off",
    )  # fmt: skip
    js = json.loads((await cli(env, "--json")).stdout)
    assert js["email_digest_hour"] is None and out(done)[-1] == "daily digest: off"
    assert out(done)[5] == "quiet hours: off" and js["remind_after_min"] is None
    assert js["escalate_after_min"] is None and js["timezone"] == "Europe/Madrid"
    # bob's policy is his own: untouched.
    bob_env = env_of(shared_gateway, bob_token, tmp_path / "bob")
    assert out(await cli(bob_env)) == DEFAULT_LINES


@pytest.mark.parametrize(
    ("args", "says"),
    [
        (["--quiet", "25:00-07:00"], "quiet_start"),
        (["--quiet", "22:00-22:00"], "quiet_end"),
        (["--timezone", "Mars/Olympus"], "timezone"),
        (["--remind-after", "0"], "remind_after_min"),
        (["--escalate-after", "2000"], "escalate_after_min"),
        (["--digest-hour", "24"], "email_digest_hour"),
    ],
)
async def test_a_value_the_gateway_refuses_names_the_field(
    live: Api, shared_gateway: GatewayProcess, n: int, tmp_path: Path, args: list[str], says: str
) -> None:
    env = env_of(shared_gateway, await live.user(f"ana-{n}"), tmp_path)
    done = await cli(env, *args)
    assert done.returncode == 1, done.stdout
    assert says in done.stderr.decode()
    assert out(await cli(env)) == DEFAULT_LINES  # nothing changed


@pytest.mark.parametrize(
    ("args", "says"),
    [
        (["--quiet", "22:00"], "--quiet"),
        (["--remind-after", "soon"], "--remind-after"),
        (["--push", "maybe"], "--push"),
        (["--digest-hour", "noon"], "--digest-hour"),
    ],
)
async def test_a_malformed_option_is_refused_before_any_call(
    shared_gateway: GatewayProcess, tmp_path: Path, args: list[str], says: str
) -> None:
    env = env_of(shared_gateway, "am_user_not-a-real-token", tmp_path)
    done = await cli(env, *args)
    assert done.returncode == 2 and says in done.stderr.decode()


async def test_agents_and_strangers_are_refused(
    live: Api, shared_gateway: GatewayProcess, n: int, tmp_path: Path
) -> None:
    key = await live.agent(f"claude-{n}")
    agent_env = testing.clean_env(
        AGENTMAIL_URL=shared_gateway.url, AGENTMAIL_KEY=key, XDG_CONFIG_HOME=str(tmp_path / "x")
    )
    done = await cli(agent_env)
    assert done.returncode == 1 and "for people" in done.stderr.decode()
    stranger = env_of(shared_gateway, "am_user_not-a-real-token", tmp_path / "s")
    done = await cli(stranger)
    assert done.returncode == 1 and "log in again" in done.stderr.decode()
