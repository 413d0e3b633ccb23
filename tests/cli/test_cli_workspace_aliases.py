"""``agentmail workspace alias add|list|remove``: the real console script
against a real gateway (``shared_gateway``; each test with aliases and people
of its own). Admins only; an agent key is refused before any request."""

from __future__ import annotations

import json
from collections.abc import AsyncIterator
from itertools import count
from pathlib import Path

import pytest
from tests.cli.test_cli_devices import cli, env_of
from tests.conftest import Api, admin_api

from mailui4agents import testing
from mailui4agents.testing import GatewayProcess

pytestmark = [pytest.mark.e2e, pytest.mark.anyio]

_N = count(1)


@pytest.fixture
async def live(shared_gateway: GatewayProcess) -> AsyncIterator[Api]:
    async with admin_api(shared_gateway.url) as a:
        yield a


@pytest.fixture
def n() -> int:
    return next(_N)


async def _aliases(live: Api) -> dict[str, str]:
    r = await live.http.get("/api/v1/admin/workspace-aliases", headers=live.auth("admin"))
    assert r.status_code == 200, r.text
    return {a["alias"]: a["workspace"] for a in r.json()["items"]}


async def test_an_admin_adds_lists_and_removes_an_alias(
    live: Api, shared_gateway: GatewayProcess, n: int, tmp_path: Path
) -> None:
    env = env_of(shared_gateway, live.tokens["admin"], tmp_path)
    name = f"shop-{n}"
    added = await cli(env, "workspace", "alias", "add", name, "/srv//shop/")
    assert added.returncode == 0, added.stderr.decode()
    assert f"{name} is /srv/shop" in added.stdout.decode()
    assert (await _aliases(live))[name] == "/srv/shop"

    listed = await cli(env, "workspace", "alias", "list")
    assert listed.returncode == 0, listed.stderr.decode()
    assert f"{name}  /srv/shop" in listed.stdout.decode().splitlines()
    as_json = await cli(env, "workspace", "alias", "list", "--json")
    assert name in {a["alias"] for a in json.loads(as_json.stdout)}

    removed = await cli(env, "workspace", "alias", "remove", name)
    assert removed.returncode == 0, removed.stderr.decode()
    assert name not in await _aliases(live)
    again = await cli(env, "workspace", "alias", "remove", name)
    assert again.returncode == 1 and "not found" in again.stderr.decode()


async def test_a_bad_alias_or_path_is_refused_naming_it(
    live: Api, shared_gateway: GatewayProcess, n: int, tmp_path: Path
) -> None:
    env = env_of(shared_gateway, live.tokens["admin"], tmp_path)
    upper = await cli(env, "workspace", "alias", "add", f"Shop-{n}", "/srv/shop")
    assert upper.returncode == 1
    assert "alias" in upper.stderr.decode() and "lower case" in upper.stderr.decode()
    relative = await cli(env, "workspace", "alias", "add", f"shop-{n}", "srv/shop")
    assert relative.returncode == 1 and "absolute" in relative.stderr.decode()
    assert f"shop-{n}" not in await _aliases(live)


async def test_a_person_who_is_no_admin_and_an_agent_are_refused(
    live: Api, shared_gateway: GatewayProcess, n: int, tmp_path: Path
) -> None:
    ana_env = env_of(shared_gateway, await live.user(f"ana-ws-{n}"), tmp_path / "ana")
    refused = await cli(ana_env, "workspace", "alias", "add", f"x-{n}", "/srv/x")
    assert refused.returncode == 1 and "admins only" in refused.stderr.decode()
    listing = await cli(ana_env, "workspace", "alias", "list")
    assert listing.returncode == 1 and "admins only" in listing.stderr.decode()

    key = await live.agent(f"bot-ws-{n}")
    agent_env = testing.clean_env(
        AGENTMAIL_URL=shared_gateway.url,
        AGENTMAIL_KEY=key,
        AGENTMAIL_AGENT=f"bot-ws-{n}",
        XDG_CONFIG_HOME=str(tmp_path / "bot"),
    )
    agent = await cli(agent_env, "workspace", "alias", "add", f"y-{n}", "/srv/y")
    assert agent.returncode == 1 and "is for people" in agent.stderr.decode()
    assert not {f"x-{n}", f"y-{n}"} & set(await _aliases(live))
