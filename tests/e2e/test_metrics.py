"""GET /metrics and the request log of a real `agentmail serve` (docs/metrics.md,
docs/api.md, "Request ids and logs"): a known workload, then every counter read back with
prometheus_client's own parser, exactly; who may read it; the JSON lines, their
request ids, and no secret of the workload in any line."""

from __future__ import annotations

import json
import sqlite3
import time
import uuid
from collections.abc import AsyncIterator, Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import httpx
import pytest
from prometheus_client.parser import text_string_to_metric_families

from mailui4agents.testing import FAST_HASH_ENV, GatewayProcess, clean_env
from tests.conftest import ADMIN_PASSWORD, USER_PASSWORD, Api, copy_template
from tests.docs.test_metrics_doc import documented
from tests.fakes.push_service import PushService, push_service

pytestmark = [pytest.mark.anyio, pytest.mark.e2e]

SCRAPE_TOKEN = "scrape-" + uuid.uuid4().hex
WORKSPACE = "/srv/metrics-shop"


@pytest.fixture(scope="module")
def fake() -> Iterator[PushService]:
    with push_service() as service:
        yield service


def start(tmp_path: Path, template_db: Path, *args: str, **env: str) -> GatewayProcess:
    copy_template(template_db, tmp_path / "data")
    gp = GatewayProcess(
        data_dir=tmp_path / "data",
        env=clean_env(AGENTMAIL_ADMIN_PASSWORD=ADMIN_PASSWORD, **FAST_HASH_ENV, **env),
        extra_args=["--log-level", "info", *args],
    )
    gp.start()
    return gp


@pytest.fixture
def gateway(tmp_path: Path, template_db: Path, fake: PushService) -> Iterator[GatewayProcess]:
    gp = start(
        tmp_path,
        template_db,
        "--log-format",
        "json",
        "--push-endpoint-allow",
        f"{fake.url}/push/",
        AGENTMAIL_METRICS_TOKEN=SCRAPE_TOKEN,
    )
    try:
        yield gp
    finally:
        gp.stop()


@pytest.fixture
async def api(gateway: GatewayProcess) -> AsyncIterator[Api]:
    async with httpx.AsyncClient(base_url=gateway.url, timeout=30) as http:
        yield Api(http)


def families(text: str) -> dict[str, dict[tuple[tuple[str, str], ...], float]]:
    """Sample name -> {sorted labels: value}, parsed by prometheus_client."""
    out: dict[str, dict[tuple[tuple[str, str], ...], float]] = {}
    for family in text_string_to_metric_families(text):
        for sample in family.samples:
            out.setdefault(sample.name, {})[tuple(sorted(sample.labels.items()))] = sample.value
    return out


def by(samples: dict[tuple[tuple[str, str], ...], float], label: str) -> dict[str, float]:
    return {dict(k)[label]: v for k, v in samples.items()}


def db_counts(data_dir: Path, sql: str) -> dict[str, int]:
    with sqlite3.connect(data_dir / "agentmail.db") as c:
        return {str(k): int(n) for k, n in c.execute(sql).fetchall()}


EVENTS = "SELECT type, count(*) FROM events GROUP BY type"
MAILS = "SELECT type, count(*) FROM mails GROUP BY type"


def minus(after: dict[str, int], before: dict[str, int]) -> dict[str, float]:
    return {k: float(n - before.get(k, 0)) for k, n in after.items() if n - before.get(k, 0)}


@dataclass
class Workload:
    request_id: str
    secrets: list[str]


async def workload(api: Api, fake: PushService) -> Workload:
    """Logins, an agent key's mail and request, a push subscription, a decision:
    every request's answer is checked, so each count below is known."""
    await api.login("admin", ADMIN_PASSWORD)  # POST /auth/login 200
    api.open_agents = False
    r = await api.http.post(
        "/api/v1/admin/users",
        json={"username": "ann", "password": USER_PASSWORD},
        headers=api.auth("admin"),
    )
    assert r.status_code == 201, r.text
    await api.login("ann", USER_PASSWORD)  # POST /auth/login 200
    key = await api.agent(  # POST /admin/agents 201
        "bot", owners=["ann"], taskers=["ann"], workspaces=["/srv/**"],
        max_mode={"owners": "full", "taskers": "full"},
    )  # fmt: skip
    sub = fake.make_subscription("ann-phone")
    r = await api.http.post(
        "/api/v1/push/subscriptions",
        json={**sub.to_json(), "device_name": "ann-phone"},
        headers=api.auth("ann"),
    )
    assert r.status_code == 201, r.text
    sent = await api.send("ann", [f"bot@{WORKSPACE}.new"], subject="Tidy up")
    assert sent.status_code == 201, sent.text
    sid = sent.json()["session_id"]
    asked = await api.http.post(
        "/api/v1/agent/permissions",
        json={
            "session_id": sid,
            "kind": "approval",
            "tool_name": "Bash",
            "tool_input": {"command": "make deploy"},
            "relay_key": "k1",
        },
        headers=api.auth("bot"),
    )
    assert asked.status_code == 201, asked.text
    rid = asked.json()["id"]
    await fake.wait_async(1, "ann-phone")
    decided = await api.http.post(
        f"/api/v1/permissions/{rid}/decision",
        json={"decision": "approve"},
        headers=api.auth("ann"),
    )
    assert decided.status_code == 200, decided.text
    await fake.wait_async(2, "ann-phone")  # the settled push
    missing = await api.http.get("/api/v1/mail/no-such-mail", headers=api.auth("ann"))
    assert missing.status_code == 404
    nobody = await api.http.get("/no/such/path?token=in-the-query")
    assert nobody.status_code == 404
    return Workload(
        decided.headers["x-request-id"],
        [ADMIN_PASSWORD, USER_PASSWORD, api.tokens["admin"], api.tokens["ann"], key,
         sub.to_json()["keys"]["auth"], sub.to_json()["keys"]["p256dh"], "in-the-query"],
    )  # fmt: skip


async def scrape_until(api: Api, done: Any, within_s: float = 10.0) -> tuple[str, int]:
    """Scrape (with the scrape token) until `done(text)`; returns the text and the
    number of scrapes made."""
    deadline = time.monotonic() + within_s
    n = 0
    while True:
        r = await api.http.get("/metrics", headers={"Authorization": f"Bearer {SCRAPE_TOKEN}"})
        n += 1
        assert r.status_code == 200, r.text
        assert r.headers["content-type"].startswith("text/plain; version=0.0.4")
        if done(r.text):
            return r.text, n
        assert time.monotonic() < deadline, r.text
        await api.http.get("/healthz")  # counted below: the scrapes wait on answers, not sleeps


def push_sent(text: str) -> float:
    return families(text).get("agentmail_push_deliveries_total", {}).get((("outcome", "sent"),), 0)


async def test_a_known_workload_reads_back_exactly(
    api: Api, gateway: GatewayProcess, fake: PushService
) -> None:
    events_before = db_counts(gateway.data_dir, EVENTS)
    mails_before = db_counts(gateway.data_dir, MAILS)
    await workload(api, fake)
    text, scrapes = await scrape_until(api, lambda t: push_sent(t) == 2)
    m = families(text)

    requests = {
        (d["route"], d["method"], d["status"]): v
        for d, v in ((dict(k), v) for k, v in m["agentmail_http_requests_total"].items())
    }
    polls = {("/healthz", "GET", "200"): scrapes - 1, ("/metrics", "GET", "200"): scrapes - 1}
    assert requests == {
        **{k: v for k, v in polls.items() if v},
        ("/api/v1/auth/login", "POST", "200"): 2,
        ("/api/v1/admin/users", "POST", "201"): 1,
        ("/api/v1/admin/agents", "POST", "201"): 1,
        ("/api/v1/push/subscriptions", "POST", "201"): 1,
        ("/api/v1/mail", "POST", "201"): 1,
        ("/api/v1/agent/permissions", "POST", "201"): 1,
        ("/api/v1/permissions/{request_id}/decision", "POST", "200"): 1,
        ("/api/v1/mail/{mail_id}", "GET", "404"): 1,
        ("unmatched", "GET", "404"): 1,
    }
    # Every answered request is timed once (no stream was opened).
    counts = {
        (dict(k)["route"], dict(k)["method"]): v
        for k, v in m["agentmail_http_request_duration_seconds_count"].items()
    }
    timed: dict[tuple[str, str], float] = {}
    for (route, method, _), n in requests.items():
        timed[(route, method)] = timed.get((route, method), 0) + n
    assert counts == timed
    assert by(m["agentmail_mails_total"], "type") == {
        "message": 1,
        "permission_request": 1,
        "permission_decision": 1,
    }
    assert by(m["agentmail_mails_total"], "type") == minus(
        db_counts(gateway.data_dir, MAILS), mails_before
    )
    assert by(m["agentmail_events_appended_total"], "type") == minus(
        db_counts(gateway.data_dir, EVENTS), events_before
    )
    assert by(m["agentmail_permission_requests_total"], "outcome") == {"asked": 1}
    assert by(m["agentmail_permission_decisions_total"], "status") == {"approved": 1}
    assert by(m["agentmail_permission_decision_seconds_count"], "status") == {"approved": 1}
    assert m["agentmail_permission_requests_pending"] == {(): 0}
    assert by(m["agentmail_push_deliveries_total"], "outcome") == {"sent": 2}
    assert "agentmail_email_deliveries_total" not in m  # no relay configured: no samples
    assert by(m["agentmail_streams_open"], "kind") == {"agent": 0, "human": 0, "wait": 0}
    assert m["agentmail_scheduler_pass_seconds_count"][()] >= 1
    assert m["agentmail_scheduler_lag_seconds"][()] < 5
    pool = m["agentmail_db_connections"]
    assert {dict(k)["engine"] for k in pool} == {"writer", "reader"}
    served = {
        f.name + ("_total" if f.type == "counter" else "")
        for f in text_string_to_metric_families(text)
    }
    assert served == documented("Gateway")  # docs/metrics.md lists exactly these


async def test_pending_requests_and_open_streams_are_read_when_scraped(
    api: Api, gateway: GatewayProcess
) -> None:
    await api.login("admin", ADMIN_PASSWORD)
    await api.agent("bot", workspaces=["/srv/**"])
    sent = await api.send("admin", [f"bot@{WORKSPACE}.new"])
    assert sent.status_code == 201, sent.text
    for key in ("a", "b"):
        r = await api.http.post(
            "/api/v1/agent/permissions",
            json={"session_id": sent.json()["session_id"], "kind": "approval",
                  "tool_name": "Bash", "tool_input": {"command": key}, "relay_key": key},
            headers=api.auth("bot"),
        )  # fmt: skip
        assert r.status_code == 201, r.text
    headers = api.auth("bot")
    async with api.http.stream("GET", "/api/v1/agent/events", headers=headers) as stream:
        assert stream.status_code == 200
        text, _ = await scrape_until(
            api, lambda t: by(families(t)["agentmail_streams_open"], "kind")["agent"] == 1
        )
        # A commit while the stream is open reaches it, handed over directly or
        # read from the log (which one is events/hub.py's choice: test_hub.py).
        before = by(families(text)["agentmail_event_handoffs_total"], "way")
        assert set(before) == {"direct", "read"}
        sent = await api.send("admin", [f"bot@{WORKSPACE}"])
        assert sent.status_code == 201, sent.text
        text, _ = await scrape_until(
            api,
            lambda t: (
                sum(by(families(t)["agentmail_event_handoffs_total"], "way").values())
                > sum(before.values())
            ),
        )
    m = families(text)
    assert m["agentmail_permission_requests_pending"] == {(): 2}
    assert by(m["agentmail_streams_open"], "kind") == {"agent": 1, "human": 0, "wait": 0}


async def test_who_may_read_metrics(api: Api, gateway: GatewayProcess) -> None:
    await api.login("admin", ADMIN_PASSWORD)
    api.open_agents = False
    await api.user("ann")  # not an admin
    await api.agent("bot")

    async def get(token: str | None) -> int:
        headers = {"Authorization": f"Bearer {token}"} if token is not None else {}
        return (await api.http.get("/metrics", headers=headers)).status_code

    assert await get(None) == 401
    assert await get("nobody's-token") == 401
    assert await get(api.tokens["bot"]) == 403
    assert await get(api.tokens["ann"]) == 403
    assert await get(api.tokens["admin"]) == 200
    assert await get(SCRAPE_TOKEN) == 200
    assert await get(SCRAPE_TOKEN + "x") == 401
    assert await get(SCRAPE_TOKEN[:-1]) == 401
    om = await api.http.get(
        "/metrics",
        headers={**api.auth("admin"), "Accept": "application/openmetrics-text; version=1.0.0"},
    )
    assert om.headers["content-type"].startswith("application/openmetrics-text")
    assert om.text.endswith("# EOF\n")
    # Neither a cookie nor a query string opens it.
    r = await api.http.get(f"/metrics?token={SCRAPE_TOKEN}")
    assert r.status_code == 401


async def test_the_off_switch_and_no_scrape_token(tmp_path: Path, template_db: Path) -> None:
    gp = start(tmp_path, template_db, AGENTMAIL_METRICS_ENABLED="false")
    try:
        async with httpx.AsyncClient(base_url=gp.url, timeout=30) as http:
            a = Api(http)
            await a.login("admin", ADMIN_PASSWORD)
            r = await http.get("/metrics", headers=a.auth("admin"))
            assert r.status_code == 404, r.text
            assert r.json()["error"]["code"] == "not_found"
            assert (await http.get("/healthz")).status_code == 200
    finally:
        gp.stop()


def test_a_removed_public_switch_stops_the_start(tmp_path: Path, template_db: Path) -> None:
    with pytest.raises(RuntimeError, match="AGENTMAIL_METRICS_PUBLIC is no longer read"):
        start(tmp_path, template_db, AGENTMAIL_METRICS_PUBLIC="true")


def test_a_short_scrape_token_stops_the_start(tmp_path: Path, template_db: Path) -> None:
    with pytest.raises(RuntimeError, match="metrics_token must have at least 16"):
        start(tmp_path, template_db, AGENTMAIL_METRICS_TOKEN="short")


def json_lines(gp: GatewayProcess) -> list[dict[str, Any]]:
    out = []
    for line in gp.output:
        if line.startswith("{"):
            out.append(json.loads(line))
        else:  # only the CLI's own lines (the bound address) are not JSON
            assert line.startswith("agentmail: ") or not line.strip(), line
    return out


async def test_json_request_lines_carry_the_answers_request_id_and_no_secret(
    api: Api, gateway: GatewayProcess, fake: PushService
) -> None:
    done = await workload(api, fake)
    await scrape_until(api, lambda t: push_sent(t) == 2)
    # A one-time pairing code travels in a path (/pair/{code}): opened, it is logged
    # by its route template only.
    paired = await api.http.post(
        "/api/v1/devices/pairings", json={"name": "tablet"}, headers=api.auth("ann")
    )
    assert paired.status_code == 201, paired.text
    code = paired.json()["url"].rsplit("/", 1)[1]
    assert (await api.http.get(f"/pair/{code}")).status_code == 200
    done.secrets.append(code)
    gateway.stop()  # every line written and read
    lines = json_lines(gateway)
    requests = [x for x in lines if x["logger"] == "mailui4agents.access"]
    decision = [x for x in requests if x["request_id"] == done.request_id]
    assert len(decision) == 1
    assert decision[0]["route"] == "/api/v1/permissions/{request_id}/decision"
    assert (decision[0]["method"], decision[0]["status"]) == ("POST", 200)
    assert decision[0]["duration_ms"] > 0
    assert len({x["request_id"] for x in requests}) == len(requests)  # one id per request
    assert {x["route"] for x in requests} >= {"unmatched", "/api/v1/mail/{mail_id}", "/pair/{code}"}
    output = "".join(gateway.output)
    assert "/no/such/path" not in output and "no-such-mail" not in output
    for secret in done.secrets:
        assert secret not in output, secret


async def test_text_lines_name_the_request_id_too(tmp_path: Path, template_db: Path) -> None:
    gp = start(tmp_path, template_db)  # --log-format text, the default
    try:
        async with httpx.AsyncClient(base_url=gp.url, timeout=30) as http:
            r = await http.post(
                "/api/v1/auth/login", json={"username": "admin", "password": ADMIN_PASSWORD}
            )
            assert r.status_code == 200
            rid = r.headers["x-request-id"]
            token = r.json()["token"]
            assert (await http.get("/healthz")).headers["x-request-id"] != rid
    finally:
        gp.stop()
    output = "".join(gp.output)
    line = next(x for x in gp.output if f"request_id={rid}" in x)
    assert "INFO mailui4agents.access: POST /api/v1/auth/login 200" in line
    assert token not in output and ADMIN_PASSWORD not in output


@pytest.mark.live_both_backends
async def test_counts_and_pools_on_both_databases(live: Api, live_backend: str) -> None:
    """The same notes on PostgreSQL (one pool, reported as the writer's)."""
    await live.agent("bot", workspaces=["/srv/**"])
    sent = await live.send("admin", [f"bot@{WORKSPACE}.new"])
    assert sent.status_code == 201, sent.text
    asked = await live.http.post(
        "/api/v1/agent/permissions",
        json={"session_id": sent.json()["session_id"], "kind": "approval",
              "tool_name": "Bash", "tool_input": {"command": "ls"}, "relay_key": "k"},
        headers=live.auth("bot"),
    )  # fmt: skip
    assert asked.status_code == 201, asked.text
    denied = await live.http.post(  # a built-in deny rule decides it at once
        "/api/v1/agent/permissions",
        json={"session_id": sent.json()["session_id"], "kind": "approval",
              "tool_name": "Bash", "tool_input": {"command": "rm -rf /"}, "relay_key": "k2"},
        headers=live.auth("bot"),
    )  # fmt: skip
    assert denied.status_code == 201, denied.text
    assert denied.json()["status"] == "denied"
    r = await live.http.get("/metrics", headers=live.auth("admin"))
    assert r.status_code == 200, r.text
    m = families(r.text)
    assert by(m["agentmail_mails_total"], "type") == {"message": 1, "permission_request": 1}
    assert by(m["agentmail_permission_requests_total"], "outcome") == {"asked": 1, "denied": 1}
    assert m["agentmail_permission_requests_pending"] == {(): 1}
    assert "agentmail_permission_decisions_total" not in m  # none was settled after asking
    engines = {dict(k)["engine"] for k in m["agentmail_db_connections"]}
    assert engines == ({"writer"} if live_backend == "postgresql" else {"writer", "reader"})
