"""`agentmail serve --tls-cert --tls-key`: https by uvicorn itself, with a
certificate of a CA of our own (docs/remote.md, "A LAN with a certificate of your own CA");
Secure cookies; the warning for plain http on an address that is not loopback
(src/mailui4agents/cli/serve.py)."""

from __future__ import annotations

import re
import shutil
import subprocess
import time
from pathlib import Path

import httpx
import pytest

from mailui4agents.client import lite
from mailui4agents.testing import clean_env
from tests.conftest import ADMIN_PASSWORD
from tests.e2e.remote_parts import (
    Served,
    client,
    gateway_env,
    make_certs,
    serve_args,
    web_login,
)
from tests.needs import missing

pytestmark = [pytest.mark.e2e]

WARNING = "WARNING: plain http"


def flags(set_cookie: str) -> set[str]:
    return {part.strip().lower() for part in set_cookie.split(";")[1:]}


def test_https_with_a_certificate_of_our_own_ca_and_secure_cookies(tmp_path: Path) -> None:
    certs = make_certs(tmp_path / "certs")
    gw = Served(tmp_path / "data", ["--tls-cert", str(certs.cert), "--tls-key", str(certs.key)])
    gw.start()
    try:
        assert gw.scheme == "https", gw.out and gw.out.text()
        assert gw.out is not None and WARNING not in gw.out.text()
        with client(gw.url, certs) as http:
            assert http.get("/healthz").json() == {"status": "ok"}
            login_csrf, session = web_login(http)
            assert {"secure", "httponly", "path=/login"} <= flags(login_csrf), login_csrf
            assert {"secure", "httponly", "samesite=lax"} <= flags(session), session
            # The Secure session cookie goes back over https: the inbox opens.
            inbox = http.get("/")
            assert inbox.status_code == 200 and "Log out" in inbox.text, inbox.text
        # Plain http to the TLS port: no answer (uvicorn's TLS handshake fails).
        with pytest.raises(httpx.TransportError):
            httpx.get(f"http://127.0.0.1:{gw.port}/healthz", timeout=30)
        # A client that does not trust our CA refuses the certificate.
        with pytest.raises(httpx.ConnectError, match="CERTIFICATE_VERIFY_FAILED"):
            httpx.get(f"{gw.url}/healthz", timeout=30)
    finally:
        gw.stop()


@pytest.mark.parametrize(
    ("given", "missing"), [("--tls-cert", "--tls-key"), ("--tls-key", "--tls-cert")]
)
def test_tls_cert_and_key_come_together(tmp_path: Path, given: str, missing: str) -> None:
    certs = make_certs(tmp_path / "certs")
    path = certs.cert if given == "--tls-cert" else certs.key
    run = subprocess.run(
        serve_args(tmp_path / "data", given, str(path)),
        env=gateway_env(),
        capture_output=True,
        text=True,
        timeout=60,
    )
    assert run.returncode == 2, run.stderr
    assert f"{given} needs {missing}" in run.stderr, run.stderr
    assert not (tmp_path / "data").exists()  # refused before anything started


def test_a_key_that_is_not_the_certificates_is_refused_at_start(tmp_path: Path) -> None:
    certs = make_certs(tmp_path / "certs")
    other = make_certs(tmp_path / "other")
    run = subprocess.run(
        serve_args(tmp_path / "data", "--tls-cert", str(certs.cert), "--tls-key", str(other.key)),
        env=gateway_env(),
        capture_output=True,
        text=True,
        timeout=60,
    )
    assert run.returncode == 2, run.stderr
    assert "cannot load" in run.stderr and "Traceback" not in run.stderr, run.stderr


def test_plain_http_on_an_address_that_is_not_loopback_is_warned_about(tmp_path: Path) -> None:
    loopback = Served(tmp_path / "loop")
    loopback.start()
    loopback.stop()
    assert loopback.out is not None and WARNING not in loopback.out.text()

    # 0.0.0.0: every address of this machine (the gateway stops at once).
    wide = Served(tmp_path / "wide", host="0.0.0.0")
    wide.start()
    wide.stop()
    assert wide.out is not None
    text = wide.out.text()
    warning = re.search(r"WARNING: plain http on 0\.0\.0\.0:\d+.*", text)
    assert warning is not None, text
    for advice in ("clear text", "--tls-cert FILE --tls-key FILE", "docs/remote.md"):
        assert advice in warning.group(0), warning.group(0)


DOC = Path(__file__).parents[2] / "docs" / "remote.md"
_BLOCK = re.compile(r"<!-- tests/e2e/test_https\.py runs this block[^>]*-->\n```sh\n(.*?)```", re.S)


def test_the_own_ca_commands_of_docs_remote_md_make_a_certificate_clients_trust(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    if shutil.which("openssl") is None:
        missing("openssl missing: apt-get install openssl")
    m = _BLOCK.search(DOC.read_text())
    assert m is not None, "the own-CA block of docs/remote.md"
    script = m.group(1).replace("mailbox.lan", "localhost").replace("192.168.1.20", "127.0.0.1")
    run = subprocess.run(
        ["bash", "-euo", "pipefail", "-c", script],
        env={**clean_env(), "HOME": str(tmp_path)},
        capture_output=True,
        text=True,
        timeout=60,
    )
    assert run.returncode == 0, run.stderr
    assert "server.pem: OK" in run.stdout, run.stdout
    ca = tmp_path / "agentmail-ca"
    gw = Served(
        tmp_path / "data",
        ["--tls-cert", str(ca / "server.pem"), "--tls-key", str(ca / "server.key")],
    )
    gw.start()
    try:
        assert gw.scheme == "https"
        # As the page says: the hooks' client trusts the CA through SSL_CERT_FILE.
        monkeypatch.setenv("SSL_CERT_FILE", str(ca / "ca.pem"))
        for host in ("127.0.0.1", "localhost"):
            hooks = lite.Gateway(f"https://{host}:{gw.port}", None)
            answer = hooks.call(
                "POST",
                "/auth/login",
                {"username": "admin", "password": ADMIN_PASSWORD},
                until=time.monotonic() + 30,
            )
            assert answer["user"]["username"] == "admin", answer
    finally:
        gw.stop()
