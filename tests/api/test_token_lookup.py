"""The token look-up of every request (api/deps.py → identity.authenticate_in)
reads the database each time: a token revoked or expired by another process —
the CLI on the SQLite file, another replica on PostgreSQL — is refused at the
very next request to a running gateway, however often it was used before. The
gateway is a real `agentmail serve` subprocess; the revocation is made by this
test process through an engine of its own on the same database."""

from __future__ import annotations

from collections.abc import AsyncIterator
from datetime import timedelta

import httpx
import pytest
from sqlalchemy import select, update

from mailui4agents.db.engine import Database
from mailui4agents.db.tables import AgentKeyRow, UserTokenRow
from mailui4agents.db.types import utcnow
from mailui4agents.services import agent_accounts, identity
from mailui4agents.settings import Settings
from mailui4agents.testing import GatewayProcess
from tests.conftest import Api

pytestmark = [pytest.mark.anyio, pytest.mark.live_both_backends]


@pytest.fixture
async def other(
    gateway_process: GatewayProcess, live_backend: str, request: pytest.FixtureRequest
) -> AsyncIterator[Database]:
    """A second engine on the gateway's database, in this (another) process."""
    if live_backend == "postgresql":
        url = request.getfixturevalue("pg_database")  # the one the gateway was given
    else:
        url = f"sqlite:///{gateway_process.data_dir / 'agentmail.db'}"
    db = Database(Settings(database_url=url).resolved_database_url())
    try:
        yield db
    finally:
        await db.dispose()


def bearer(token: str) -> dict[str, str]:
    return {"Authorization": f"Bearer {token}"}


async def status(live: Api, path: str, token: str) -> int:
    r: httpx.Response = await live.http.get(path, headers=bearer(token))
    return r.status_code


TOKENS, INBOX = "/api/v1/auth/tokens", "/api/v1/agent/inbox"


async def test_a_revocation_by_another_process_is_refused_at_the_next_request(
    live: Api, other: Database
) -> None:
    ana = await live.user("ana")
    r = await live.http.post(TOKENS, json={"name": "ci"}, headers=bearer(ana))
    assert r.status_code == 201, r.text
    ana_ci = r.json()["token"]
    bot = await live.agent("bot")
    for _ in range(5):  # used, and used again: a cache would hold them now
        assert await status(live, TOKENS, ana) == 200
        assert await status(live, INBOX, bot) == 200

    async with other.write() as s:  # as `agentmail admin` or a replica would
        await s.execute(
            update(UserTokenRow)
            .where(UserTokenRow.token_hash == identity.hash_token(ana))
            .values(revoked_at=utcnow())
        )
        key_id = await s.scalar(
            select(AgentKeyRow.id).where(AgentKeyRow.key_hash == identity.hash_token(bot))
        )
        assert key_id is not None
        await agent_accounts.revoke_agent_key(s, "bot", key_id)

    r = await live.http.get(TOKENS, headers=bearer(ana))
    assert r.status_code == 401, r.text
    assert r.json()["error"]["code"] == "unauthorized"
    assert await status(live, INBOX, bot) == 401
    # Negative controls: ana's other token and the admin still work.
    assert await status(live, TOKENS, ana_ci) == 200
    assert await status(live, TOKENS, live.tokens["admin"]) == 200


async def test_an_expiry_set_by_another_process_holds_at_the_next_request(
    live: Api, other: Database
) -> None:
    ana = await live.user("ana")
    bot = await live.agent("bot")
    spare = await live.agent("spare")
    assert await status(live, TOKENS, ana) == 200
    assert await status(live, INBOX, bot) == 200
    past, future = utcnow() - timedelta(seconds=1), utcnow() + timedelta(hours=1)
    async with other.write() as s:
        await s.execute(
            update(UserTokenRow)
            .where(UserTokenRow.token_hash == identity.hash_token(ana))
            .values(expires_at=past)
        )
        await s.execute(
            update(AgentKeyRow)
            .where(AgentKeyRow.key_hash == identity.hash_token(bot))
            .values(expires_at=past)
        )
        await s.execute(  # an end still ahead changes nothing yet
            update(AgentKeyRow)
            .where(AgentKeyRow.key_hash == identity.hash_token(spare))
            .values(expires_at=future)
        )
    assert await status(live, TOKENS, ana) == 401
    assert await status(live, INBOX, bot) == 401
    assert await status(live, INBOX, spare) == 200
