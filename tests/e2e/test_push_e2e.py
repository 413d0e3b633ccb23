"""Web Push with real `agentmail serve` processes and the fake push service
(tests/fakes/push_service.py; docs/remote.md, "Push"):

- `agentmail notify test` prints each device's push service answer, and says so
  when there is no device to push to;
- two replicas on one PostgreSQL database, both polling the outbox every 50 ms:
  200 queued pushes are each sent exactly once;
- `--push-endpoint-allow` is checked at start.
"""

from __future__ import annotations

import subprocess
import sys
from collections import Counter
from collections.abc import Iterator
from pathlib import Path

import anyio
import httpx
import pytest
from click.testing import CliRunner

from mailui4agents.cli.main import main
from mailui4agents.db.engine import Database
from mailui4agents.services import push_send
from mailui4agents.settings import Settings
from mailui4agents.testing import FAST_HASH_ENV, GatewayProcess, clean_env
from mailui4agents.testing_pg import PgCluster
from tests.conftest import ADMIN_PASSWORD, USER_PASSWORD
from tests.fakes.push_service import PushService, push_service
from tests.pg_fixtures import fresh_database

pytestmark = [pytest.mark.anyio, pytest.mark.e2e, pytest.mark.timeout(300)]

_SCRIPT = Path(sys.executable).with_name("agentmail")
AGENTMAIL = [str(_SCRIPT)] if _SCRIPT.exists() else [sys.executable, "-m", "mailui4agents.cli.main"]


@pytest.fixture(scope="module")
def fake() -> Iterator[PushService]:
    with push_service() as service:
        yield service


def gateway_env(**extra: str) -> dict[str, str]:
    return clean_env(AGENTMAIL_ADMIN_PASSWORD=ADMIN_PASSWORD, **FAST_HASH_ENV, **extra)


async def login(url: str, username: str, password: str) -> str:
    async with httpx.AsyncClient(base_url=url) as http:
        r = await http.post("/api/v1/auth/login", json={"username": username, "password": password})
        assert r.status_code == 200, r.text
        token: str = r.json()["token"]
        return token


async def person(url: str, name: str) -> str:
    admin = await login(url, "admin", ADMIN_PASSWORD)
    async with httpx.AsyncClient(base_url=url) as http:
        r = await http.post(
            "/api/v1/admin/users",
            json={"username": name, "password": USER_PASSWORD},
            headers={"Authorization": f"Bearer {admin}"},
        )
        assert r.status_code == 201, r.text
    return await login(url, name, USER_PASSWORD)


async def subscribe(url: str, token: str, body: dict[str, object]) -> dict[str, str]:
    async with httpx.AsyncClient(base_url=url) as http:
        r = await http.post(
            "/api/v1/push/subscriptions", json=body, headers={"Authorization": f"Bearer {token}"}
        )
        assert r.status_code == 201, r.text
        out: dict[str, str] = r.json()
        return out


async def notify_test(url: str, token: str, tmp: Path) -> subprocess.CompletedProcess[bytes]:
    env = clean_env(AGENTMAIL_URL=url, AGENTMAIL_TOKEN=token, XDG_CONFIG_HOME=str(tmp / "xdg"))
    with anyio.fail_after(60):
        return await anyio.run_process(
            [*AGENTMAIL, "notify", "test"], env=env, check=False, stdin=subprocess.DEVNULL
        )


async def test_notify_test_prints_each_devices_answer(tmp_path: Path, fake: PushService) -> None:
    gw = GatewayProcess(
        tmp_path / "data", gateway_env(), extra_args=["--push-endpoint-allow", f"{fake.url}/push/"]
    )
    gw.start(timeout=60)
    try:
        ana = await person(gw.url, "ana")
        lonely = await notify_test(gw.url, ana, tmp_path)
        assert lonely.returncode == 1
        assert b"no device of yours has push notifications on" in lonely.stderr

        phone, laptop = fake.make_subscription(), fake.make_subscription()
        fake.answer(laptop.name, 413, "Request Entity Too Large")
        await subscribe(gw.url, ana, {**phone.to_json(), "device_name": "Ana's phone"})
        await subscribe(gw.url, ana, {**laptop.to_json(), "device_name": "Ana's laptop"})
        done = await notify_test(gw.url, ana, tmp_path)
        lines = sorted(done.stdout.decode().splitlines())
        assert done.returncode == 1, done  # one device failed
        assert lines[0] == (
            "Ana's laptop: NOT sent (413): "
            "push to Ana's laptop failed: 413 Request Entity Too Large"
        )
        assert lines[1].startswith("Ana's phone: sent, push service answered 201 in ")
        [msg] = fake.received(phone.name)
        assert msg.payload["type"] == "test"
    finally:
        gw.stop()


async def test_two_replicas_send_each_push_once(
    pg_cluster: PgCluster, tmp_path: Path, fake: PushService
) -> None:
    url = pg_cluster.url(fresh_database(pg_cluster, "template1"))
    env = gateway_env(
        AGENTMAIL_PUSH_POLL_S="0.05", AGENTMAIL_PUSH_ENDPOINT_ALLOW=f"{fake.url}/push/"
    )
    procs = [
        GatewayProcess(tmp_path / "data", env, extra_args=["--database-url", url]) for _ in range(2)
    ]
    db: Database | None = None
    try:
        for p in procs:
            p.start(timeout=120)
        ana = await person(procs[0].url, "ana")
        sub = fake.make_subscription()
        made = await subscribe(procs[0].url, ana, {**sub.to_json(), "device_name": "Ana's phone"})
        # Both replicas signed with one key (the gateway_keys row).
        keys = set()
        for p in procs:
            async with httpx.AsyncClient(base_url=p.url) as http:
                keys.add((await http.get("/api/v1/push/vapid-public-key")).json()["key"])
        assert len(keys) == 1

        # Queued from outside both (no sender here wakes): only their polls find them.
        db = Database(Settings(database_url=url).resolved_database_url())
        n = 200
        async with db.write() as s:
            for i in range(n):
                await push_send.enqueue(
                    s,
                    subscription_id=made["id"],
                    request_id=None,
                    kind="test",
                    payload={"i": i},
                    person="ana",
                    device_id=made["device_id"],
                    device_name="Ana's phone",
                )
        got = await fake.wait_async(n, sub.name, within_s=60)
        seen = Counter(m.payload["i"] for m in got)
        assert sorted(seen) == list(range(n))
        assert max(seen.values()) == 1, [i for i, c in seen.items() if c > 1]
        assert len(fake.posts) == len([p for p in fake.posts if p[0] != sub.name]) + n
        admin = await login(procs[0].url, "admin", ADMIN_PASSWORD)
        sent = []
        for p in procs:
            async with httpx.AsyncClient(base_url=p.url) as http:
                r = await http.get(
                    "/api/v1/push/stats", headers={"Authorization": f"Bearer {admin}"}
                )
                sent.append(r.json()["counts"].get("sent", 0))
        assert sum(sent) == n, sent
        print(f"\npushes sent per replica: {sent}")
    finally:
        if db is not None:
            await db.dispose()
        for p in procs:
            p.stop()


def test_a_push_endpoint_prefix_without_a_path_is_refused_at_start(tmp_path: Path) -> None:
    result = CliRunner().invoke(
        main,
        ["serve", "--data-dir", str(tmp_path / "d"), "--push-endpoint-allow", "http://10.0.0.5:80"],
    )
    assert result.exit_code == 2, result.output
    assert "must be an http(s) URL with a path" in result.output
