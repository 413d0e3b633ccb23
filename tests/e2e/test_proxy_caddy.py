"""The gateway behind a real Caddy (Debian package `caddy`) terminating https
with a certificate of our own CA, the gateway on 127.0.0.1 with
`--forwarded-allow-ips 127.0.0.1` (docs/remote.md, "Behind Caddy with a real certificate").

Every 127.x address is this machine's loopback, so each role connects from its
own: Caddy reaches the gateway from 127.0.0.1 (the trusted proxy), clients come
from 127.0.0.2 and up; what the login limiter counts shows which address the
gateway believed."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import httpx
import pytest

from tests.conftest import ADMIN_PASSWORD
from tests.e2e.remote_parts import (
    PER_ADDRESS,
    Caddy,
    Certs,
    Served,
    client,
    flood,
    make_certs,
    needs_caddy,
    set_cookies,
    web_login,
)

pytestmark = [pytest.mark.e2e]


def flags(set_cookie: str) -> set[str]:
    return {part.strip().lower() for part in set_cookie.split(";")[1:]}


def proxied(tmp_path: Path, site: str, *gateway_args: str) -> Iterator[tuple[Served, Caddy, Certs]]:
    needs_caddy()
    certs = make_certs(tmp_path / "certs")
    gw = Served(tmp_path / "data", ["--forwarded-allow-ips", "127.0.0.1", *gateway_args])
    gw.start()
    caddy = Caddy(
        tmp_path / "caddy",
        site.replace("CERT", str(certs.cert))
        .replace("KEY", str(certs.key))
        .replace("GATEWAY", f"127.0.0.1:{gw.port}"),
    )
    try:
        caddy.start()
        yield gw, caddy, certs
    finally:
        caddy.stop()
        gw.stop()


SITE = """https://127.0.0.1:PORT {
	bind 127.0.0.1
	tls CERT KEY
	reverse_proxy GATEWAY
}
"""


def test_behind_caddy_the_client_address_and_https_come_from_the_proxy(tmp_path: Path) -> None:
    for gw, caddy, certs in proxied(tmp_path, SITE):
        assert gw.out is not None and "WARNING" not in gw.out.text()  # loopback: no warning
        via = f"https://127.0.0.1:{caddy.port}"
        # Caddy says X-Forwarded-Proto: https, and the gateway believes it: Secure cookies.
        with client(via, certs, source="127.0.0.2") as http:
            login_csrf, session = web_login(http)
            assert "secure" in flags(login_csrf), login_csrf
            assert {"secure", "httponly"} <= flags(session), session
            assert http.get("/").status_code == 200

        # The limiter counts the real client (Caddy's X-Forwarded-For), whatever
        # X-Forwarded-For the client itself sent Caddy (replaced, not trusted).
        with client(via, certs, source="127.0.0.3") as http:
            statuses = flood(http, [f"203.0.113.{i}" for i in range(PER_ADDRESS + 2)])
            assert statuses == [401] * PER_ADDRESS + [429, 429], statuses
        # ... not the proxy's address: another client through Caddy is not limited.
        with client(via, certs, source="127.0.0.4") as http:
            assert flood(http, ["198.51.100.1"]) == [401]

        # Straight to the gateway from an address that is not the proxy: its
        # X-Forwarded-For is ignored (no dodging the limit) ...
        with client(gw.url, certs, source="127.0.0.5") as http:
            statuses = flood(http, [f"203.0.113.{i}" for i in range(PER_ADDRESS + 2)])
            assert statuses == [401] * PER_ADDRESS + [429, 429], statuses
        # ... and so is its X-Forwarded-Proto: no Secure cookie over plain http.
        with client(gw.url, certs, source="127.0.0.6") as http:
            page = http.get("/login", headers={"X-Forwarded-Proto": "https"})
            (login_csrf,) = set_cookies(page, "am_login_csrf")
            assert "secure" not in flags(login_csrf), login_csrf


def test_behind_caddy_an_event_stream_is_passed_on_as_it_is_written(tmp_path: Path) -> None:
    for _gw, caddy, certs in proxied(tmp_path, SITE):
        with client(f"https://127.0.0.1:{caddy.port}", certs) as http:
            login = http.post(
                "/api/v1/auth/login", json={"username": "admin", "password": ADMIN_PASSWORD}
            )
            token = login.json()["token"]
            # The stream's first frame comes at once and the stream stays open: a
            # proxy buffering it would hold the frame past this 10 s read timeout.
            with http.stream(
                "GET",
                "/api/v1/events",
                headers={"Authorization": f"Bearer {token}"},
                timeout=httpx.Timeout(30, read=10),
            ) as stream:
                assert stream.status_code == 200
                assert stream.headers["content-type"].startswith("text/event-stream")
                first = next(stream.iter_raw())
                assert first.startswith(b": connected"), first


PREFIXED = """https://127.0.0.1:PORT {
	bind 127.0.0.1
	tls CERT KEY
	handle_path /agentmail/* {
		reverse_proxy GATEWAY
	}
}
"""


def test_under_a_path_prefix_the_api_works_and_names_its_root_path(tmp_path: Path) -> None:
    for _gw, caddy, certs in proxied(tmp_path, PREFIXED, "--root-path", "/agentmail"):
        # The base URL an agent or `agentmail login --url` is given.
        with client(f"https://127.0.0.1:{caddy.port}/agentmail", certs) as http:
            assert http.get("healthz").json() == {"status": "ok"}
            login = http.post(
                "api/v1/auth/login", json={"username": "admin", "password": ADMIN_PASSWORD}
            )
            assert login.status_code == 200, login.text
            token = login.json()["token"]
            tokens = http.get("api/v1/auth/tokens", headers={"Authorization": f"Bearer {token}"})
            assert tokens.status_code == 200, tokens.text
            # The OpenAPI document names the prefix as its server (FastAPI, root_path).
            spec = http.get("api/v1/openapi.json").json()
            assert spec["servers"] == [{"url": "/agentmail"}], spec.get("servers")
