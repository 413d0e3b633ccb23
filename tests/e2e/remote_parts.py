"""Real parts for the https and proxy tests (docs/remote.md): a test CA and a
server certificate made with `cryptography`, an `agentmail serve` subprocess
that may serve https, and a Debian `caddy` reverse proxy. Every wait is on a
line the process prints, with a deadline; none is a sleep."""

from __future__ import annotations

import datetime
import ipaddress
import re
import shutil
import socket
import ssl
import subprocess
import sys
import threading
from dataclasses import dataclass, field
from pathlib import Path

import httpx
from cryptography import x509
from cryptography.hazmat.primitives import hashes, serialization
from cryptography.hazmat.primitives.asymmetric import ec
from cryptography.x509.oid import ExtendedKeyUsageOID, NameOID

from mailui4agents.testing import FAST_HASH_ENV, clean_env, keep_log, log_level
from tests.conftest import ADMIN_PASSWORD
from tests.needs import missing

PER_ADDRESS = 3  # failed logins one address may have per window
_LISTENING = re.compile(r"listening on (https?)://\S+:(\d+)")
_CSRF = re.compile(r'name="csrf" value="([^"]+)"')


@dataclass(frozen=True)
class Certs:
    ca: Path
    cert: Path
    key: Path

    def verify(self) -> ssl.SSLContext:
        """A client context trusting only the test CA."""
        return ssl.create_default_context(cafile=str(self.ca))


def make_certs(where: Path) -> Certs:
    """A CA and, signed by it, a certificate for 127.0.0.1 and localhost."""
    now = datetime.datetime.now(datetime.UTC)
    ca_key = ec.generate_private_key(ec.SECP256R1())
    ca_name = x509.Name([x509.NameAttribute(NameOID.COMMON_NAME, "agentmail test CA")])
    ca = (
        x509.CertificateBuilder()
        .subject_name(ca_name)
        .issuer_name(ca_name)
        .public_key(ca_key.public_key())
        .serial_number(x509.random_serial_number())
        .not_valid_before(now - datetime.timedelta(minutes=5))
        .not_valid_after(now + datetime.timedelta(days=1))
        .add_extension(x509.BasicConstraints(ca=True, path_length=0), critical=True)
        .add_extension(
            x509.KeyUsage(
                digital_signature=True,
                content_commitment=False,
                key_encipherment=False,
                data_encipherment=False,
                key_agreement=False,
                key_cert_sign=True,
                crl_sign=True,
                encipher_only=False,
                decipher_only=False,
            ),
            critical=True,
        )
        .add_extension(x509.SubjectKeyIdentifier.from_public_key(ca_key.public_key()), False)
        .sign(ca_key, hashes.SHA256())
    )
    key = ec.generate_private_key(ec.SECP256R1())
    cert = (
        x509.CertificateBuilder()
        .subject_name(x509.Name([x509.NameAttribute(NameOID.COMMON_NAME, "127.0.0.1")]))
        .issuer_name(ca_name)
        .public_key(key.public_key())
        .serial_number(x509.random_serial_number())
        .not_valid_before(now - datetime.timedelta(minutes=5))
        .not_valid_after(now + datetime.timedelta(days=1))
        .add_extension(
            x509.SubjectAlternativeName(
                [x509.IPAddress(ipaddress.ip_address("127.0.0.1")), x509.DNSName("localhost")]
            ),
            critical=False,
        )
        .add_extension(x509.BasicConstraints(ca=False, path_length=None), critical=True)
        .add_extension(x509.ExtendedKeyUsage([ExtendedKeyUsageOID.SERVER_AUTH]), critical=False)
        .add_extension(
            x509.AuthorityKeyIdentifier.from_issuer_public_key(ca_key.public_key()), False
        )
        .sign(ca_key, hashes.SHA256())
    )
    where.mkdir(parents=True, exist_ok=True)
    certs = Certs(where / "ca.pem", where / "cert.pem", where / "key.pem")
    certs.ca.write_bytes(ca.public_bytes(serialization.Encoding.PEM))
    certs.cert.write_bytes(cert.public_bytes(serialization.Encoding.PEM))
    certs.key.write_bytes(
        key.private_bytes(
            serialization.Encoding.PEM,
            serialization.PrivateFormat.PKCS8,
            serialization.NoEncryption(),
        )
    )
    certs.key.chmod(0o600)
    return certs


class _Output:
    """A subprocess's output lines, read by a thread; `wait_for` waits on them."""

    def __init__(self, proc: subprocess.Popen[str]) -> None:
        self.lines: list[str] = []
        self._changed = threading.Condition()
        self._ended = False
        self._proc = proc
        self._thread = threading.Thread(target=self._pump, daemon=True)
        self._thread.start()

    def _pump(self) -> None:
        assert self._proc.stdout is not None
        for line in self._proc.stdout:
            with self._changed:
                self.lines.append(line)
                self._changed.notify_all()
        with self._changed:
            self._ended = True
            self._changed.notify_all()

    def wait_for(self, pattern: re.Pattern[str], timeout: float) -> re.Match[str]:
        def found() -> re.Match[str] | None:
            for line in self.lines:
                if m := pattern.search(line):
                    return m
            return None

        with self._changed:
            self._changed.wait_for(lambda: found() is not None or self._ended, timeout)
            m = found()
        if m is None:
            raise RuntimeError(f"no {pattern.pattern!r} in:\n" + self.text())
        return m

    def text(self) -> str:
        with self._changed:
            return "".join(self.lines)

    def close(self) -> None:
        self._thread.join(10)
        if self._proc.stdout is not None:
            self._proc.stdout.close()
        keep_log("gateway", self._proc.pid, self.lines)


def _stop(proc: subprocess.Popen[str]) -> None:
    if proc.poll() is None:
        proc.terminate()
        try:
            proc.wait(15)
        except subprocess.TimeoutExpired:
            proc.kill()
            proc.wait(10)


def serve_args(data_dir: Path, *args: str, host: str = "127.0.0.1") -> list[str]:
    return [
        sys.executable, "-m", "mailui4agents.cli.main", "serve", "--host", host,
        "--port", "0", "--data-dir", str(data_dir), "--log-level", log_level(), *args,
    ]  # fmt: skip


def gateway_env() -> dict[str, str]:
    return clean_env(
        AGENTMAIL_ADMIN_PASSWORD=ADMIN_PASSWORD,
        AGENTMAIL_LOGIN_FAILURES_PER_ADDRESS=str(PER_ADDRESS),
        **FAST_HASH_ENV,
    )


@dataclass
class Served:
    """`agentmail serve` on a free port of `host`, http or https."""

    data_dir: Path
    args: list[str] = field(default_factory=list)
    host: str = "127.0.0.1"
    scheme: str = ""
    port: int = 0
    proc: subprocess.Popen[str] | None = None
    out: _Output | None = None

    @property
    def url(self) -> str:
        return f"{self.scheme}://127.0.0.1:{self.port}"

    def start(self, timeout: float = 30.0) -> None:
        self.proc = subprocess.Popen(
            serve_args(self.data_dir, *self.args, host=self.host),
            env=gateway_env(),
            stdout=subprocess.PIPE,
            stderr=subprocess.STDOUT,
            text=True,
        )
        self.out = _Output(self.proc)
        try:
            m = self.out.wait_for(_LISTENING, timeout)
        except RuntimeError:
            self.stop()
            raise
        self.scheme, self.port = m.group(1), int(m.group(2))

    def stop(self) -> None:
        if self.proc is not None:
            _stop(self.proc)
        if self.out is not None:
            self.out.close()


def free_port() -> int:
    """A port free now on 127.0.0.1, for Caddy (which has no "port 0" it reports)."""
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        port: int = s.getsockname()[1]
        return port


CADDY = shutil.which("caddy")


def needs_caddy() -> str:
    """The caddy binary; missing: a failure under CI=true, else a skip (tests/needs.py)."""
    if CADDY is None:
        missing("caddy missing: scripts/install-test-deps.sh (Debian package caddy)")
    return CADDY


_CADDY_READY = re.compile(r"serving initial configuration")


@dataclass
class Caddy:
    """A Caddy reverse proxy on 127.0.0.1 with a Caddyfile body of `site`."""

    home: Path
    site: str
    port: int = 0
    proc: subprocess.Popen[str] | None = None
    out: _Output | None = None

    def start(self, timeout: float = 30.0) -> None:
        caddy = needs_caddy()
        self.port = free_port()
        self.home.mkdir(parents=True, exist_ok=True)
        caddyfile = self.home / "Caddyfile"
        # No admin endpoint (:2019), no port 80 redirect listener, no certificate
        # management (the test CA's certificate is given), state in `home`.
        caddyfile.write_text(
            "{\n\tadmin off\n\tauto_https off\n"
            f"\tstorage file_system {self.home / 'data'}\n}}\n"
            + self.site.replace("PORT", str(self.port))
        )
        env = clean_env(
            HOME=str(self.home), XDG_DATA_HOME=str(self.home), XDG_CONFIG_HOME=str(self.home)
        )
        self.proc = subprocess.Popen(
            [caddy, "run", "--config", str(caddyfile), "--adapter", "caddyfile"],
            env=env,
            stdout=subprocess.PIPE,
            stderr=subprocess.STDOUT,
            text=True,
        )
        self.out = _Output(self.proc)
        try:
            self.out.wait_for(_CADDY_READY, timeout)
        except RuntimeError:
            self.stop()
            raise

    def stop(self) -> None:
        if self.proc is not None:
            _stop(self.proc)
        if self.out is not None:
            self.out.close()


def client(base_url: str, certs: Certs, source: str = "127.0.0.1") -> httpx.Client:
    """An httpx client trusting only the test CA, connecting from `source` (any
    127.x address is this machine's loopback: one "client address" per test role)."""
    transport = httpx.HTTPTransport(verify=certs.verify(), local_address=source)
    return httpx.Client(base_url=base_url, transport=transport, timeout=30)


def set_cookies(response: httpx.Response, name: str) -> list[str]:
    return [c for c in response.headers.get_list("set-cookie") if c.startswith(name + "=")]


def web_login(http: httpx.Client, password: str = ADMIN_PASSWORD) -> tuple[str, str]:
    """Log in on the web form: the Set-Cookie lines of the login CSRF cookie and
    of the session cookie."""
    page = http.get("/login")
    assert page.status_code == 200, page.text
    (login_csrf,) = set_cookies(page, "am_login_csrf")
    m = _CSRF.search(page.text)
    assert m is not None, page.text
    done = http.post(
        "/login",
        data={"csrf": m.group(1), "next": "/", "username": "admin", "password": password},
    )
    assert done.status_code == 303, done.text
    (session,) = set_cookies(done, "am_web")
    return login_csrf, session


def flood(http: httpx.Client, forwarded_for: list[str]) -> list[int]:
    """A failed API login per X-Forwarded-For value (each for a new username, so
    the per-username limit never counts): the statuses."""
    return [
        http.post(
            "/api/v1/auth/login",
            json={"username": f"nobody{i}", "password": "wrong-password"},
            headers={"X-Forwarded-For": xff},
        ).status_code
        for i, xff in enumerate(forwarded_for)
    ]
