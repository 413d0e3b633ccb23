"""``agentmail pair`` and ``agentmail devices``: the real console script against
a real gateway (``shared_gateway``; each test with people of its own). The URL
on pair's last line logs a browser in once; devices lists and revokes it."""

from __future__ import annotations

import re
import subprocess
import sys
from collections.abc import AsyncIterator
from itertools import count
from pathlib import Path

import anyio
import httpx
import pytest
from tests.conftest import Api, admin_api

from mailui4agents import testing
from mailui4agents.testing import GatewayProcess

pytestmark = [pytest.mark.e2e, pytest.mark.anyio]

_SCRIPT = Path(sys.executable).with_name("agentmail")
AGENTMAIL = [str(_SCRIPT)] if _SCRIPT.exists() else [sys.executable, "-m", "mailui4agents.cli.main"]
_PEOPLE = count(1)
BLOCKS = set("█▀▄ ")  # segno's compact terminal QR code: Unicode half blocks


@pytest.fixture
async def live(shared_gateway: GatewayProcess) -> AsyncIterator[Api]:
    async with admin_api(shared_gateway.url) as a:
        yield a


@pytest.fixture
def n() -> int:
    return next(_PEOPLE)


def env_of(gateway: GatewayProcess, token: str, tmp_path: Path) -> dict[str, str]:
    return testing.clean_env(
        AGENTMAIL_URL=gateway.url, AGENTMAIL_TOKEN=token, XDG_CONFIG_HOME=str(tmp_path / "xdg")
    )


async def cli(env: dict[str, str], *args: str) -> subprocess.CompletedProcess[bytes]:
    with anyio.fail_after(60):
        return await anyio.run_process(
            [*AGENTMAIL, *args], env=env, check=False, stdin=subprocess.DEVNULL
        )


async def use(url: str, browser: httpx.AsyncClient) -> httpx.Response:
    page = await browser.get(url)
    m = re.search(r'name="csrf" value="([^"]+)"', page.text)
    assert m, page.text
    return await browser.post(url, data={"csrf": m.group(1)})


async def test_pair_prints_a_qr_code_and_the_url_that_logs_a_browser_in_once(
    live: Api, shared_gateway: GatewayProcess, n: int, tmp_path: Path
) -> None:
    ana = f"ana-{n}"
    env = env_of(shared_gateway, await live.user(ana), tmp_path)
    done = await cli(env, "pair", "--name", "Ana's phone")
    assert done.returncode == 0, done.stderr.decode()
    lines = done.stdout.decode().splitlines()
    url = lines[-1]
    assert re.fullmatch(re.escape(shared_gateway.url) + r"/pair/[A-Za-z0-9_-]{43}", url), url
    qr = [line for line in lines[:-1] if line and set(line) <= BLOCKS]
    assert len(qr) >= 15 and len({len(line) for line in qr}) == 1, lines  # a square block
    assert sum(line.count("█") for line in qr) > 100
    assert any("Ana's phone" in line and ana in line for line in lines[:-1])

    async with httpx.AsyncClient(timeout=30) as phone:
        assert (await use(url, phone)).status_code == 303
        home = await phone.get(f"{shared_gateway.url}/")
        assert home.status_code == 200 and f'class="who">{ana}<' in home.text
        async with httpx.AsyncClient(timeout=30) as other:
            assert (await other.get(url)).status_code == 404  # used

        listed = await cli(env, "devices")
        assert listed.returncode == 0, listed.stderr.decode()
        [line] = listed.stdout.decode().splitlines()
        device_id = line.split()[0]
        assert "Ana's phone" in line and "last seen" in line
        revoked = await cli(env, "devices", "--revoke", device_id)
        assert revoked.returncode == 0 and f"Revoked device {device_id}" in revoked.stdout.decode()
        assert (await phone.get(f"{shared_gateway.url}/")).status_code == 303  # logged out
    assert "No paired devices" in (await cli(env, "devices")).stdout.decode()


async def test_pair_user_is_for_admins(
    live: Api, shared_gateway: GatewayProcess, n: int, tmp_path: Path
) -> None:
    ana, bob = f"ana-{n}", f"bob-{n}"
    await live.user(ana)
    bob_env = env_of(shared_gateway, await live.user(bob), tmp_path / "bob")
    refused = await cli(bob_env, "pair", "--user", ana, "--name", "x")
    assert refused.returncode == 1 and "admins" in refused.stderr.decode()
    admin_env = env_of(shared_gateway, live.tokens["admin"], tmp_path / "admin")
    done = await cli(admin_env, "pair", "--user", ana, "--name", "Ana's tablet")
    assert done.returncode == 0, done.stderr.decode()
    url = done.stdout.decode().splitlines()[-1]
    async with httpx.AsyncClient(timeout=30) as tablet:
        assert (await use(url, tablet)).status_code == 303
        home = await tablet.get(f"{shared_gateway.url}/")
        assert f'class="who">{ana}<' in home.text  # ana's device, not the admin's
