"""A throwaway Dovecot (Debian's `dovecot-imapd` and `dovecot-lmtpd`, installed by
scripts/install-test-deps.sh): the people's IMAP mailboxes and the gateway's own
inbound mailbox in the e-mail tests, and LMTP to deliver into them.

Everything is in one temp dir: its configuration (`dovecot.conf`, never the
system's /etc/dovecot), a passwd-file of users with plain passwords, Maildirs,
the sockets and the log. It listens on 127.0.0.1 only, on ports chosen free:
IMAP (plain, and STARTTLS when `certs` are given; then also IMAPS) and LMTP.

It runs unprivileged: every Dovecot process, the mail processes too, runs as one
user (the current one; as root the package's `dovecot` user, through Popen's
`user=`), so there is no chroot and no setuid. `recipient_delimiter = +`: mail
to `agentmail+<token>@gw.test` lands in `agentmail@gw.test`'s INBOX, as at a
provider that does plus-addressing. An unknown recipient is refused at RCPT.

Readiness is an event: the master's "starting up" line on its stderr (its
listeners are bound by then), then each port's greeting read with a deadline.
`stop()` is SIGTERM and a wait; `restart()` keeps the ports (`crash=True`: SIGKILL).
"""

from __future__ import annotations

import contextlib
import imaplib
import os
import pwd
import re
import shutil
import signal
import socket
import ssl
import subprocess
import tempfile
import threading
import time
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest

from tests.needs import missing

DOVECOT = "/usr/sbin/dovecot"
PERSON = "ana@example.org"
GATEWAY = "agentmail@gw.test"
USERS = {
    PERSON: "ana-imap-password",
    "bob@example.org": "bob-imap-password",
    GATEWAY: "gateway-imap-password",
}
STARTED = re.compile(r"starting up")


def installed() -> bool:
    return (
        os.access(DOVECOT, os.X_OK)
        and os.access("/usr/lib/dovecot/imap", os.X_OK)
        and os.access("/usr/lib/dovecot/lmtp", os.X_OK)
    )


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


@dataclass(frozen=True)
class Ports:
    imap: int
    lmtp: int
    imaps: int


class Dovecot:
    """One Dovecot; `start()`, `stop()`, `restart()`; `imap(user)` logs in a client."""

    def __init__(
        self, users: dict[str, str] | None = None, certs: Any = None, root: Path | None = None
    ) -> None:
        self.users = dict(USERS if users is None else users)
        self.certs = certs  # tests/e2e/remote_parts.Certs, or None: no TLS
        self.root = root or Path(tempfile.mkdtemp(prefix="agentmail-dovecot-"))
        self.ports = Ports(0, 0, 0)
        self.proc: subprocess.Popen[str] | None = None
        self._lines: list[str] = []
        self._pumper: threading.Thread | None = None
        self._cond = threading.Condition()
        if os.geteuid() == 0:
            self._user = pwd.getpwnam("dovecot")  # KeyError: install the Debian package
        else:
            self._user = pwd.getpwuid(os.geteuid())

    host = "127.0.0.1"

    # configuration ---------------------------------------------------------------------

    def _write_config(self) -> Path:
        root = self.root
        for d in ("run", "state", "mail"):
            (root / d).mkdir(exist_ok=True)
        (root / "users").write_text(
            "".join(f"{u}:{{PLAIN}}{p}::::::\n" for u, p in self.users.items()), encoding="utf-8"
        )
        u = self._user
        tls = "no"
        tls_lines = ""
        if self.certs is not None:
            tls = "yes"
            shutil.copy(self.certs.cert, root / "cert.pem")
            shutil.copy(self.certs.key, root / "key.pem")
            tls_lines = f"ssl_cert = <{root}/cert.pem\nssl_key = <{root}/key.pem\n"
        conf = f"""\
# Written by tests/fakes/dovecot.py: a throwaway Dovecot, nothing of /etc/dovecot.
base_dir = {root}/run
state_dir = {root}/state
instance_name = agentmail-test-{root.name}
log_path = /dev/stderr
protocols = imap lmtp
listen = 127.0.0.1
default_internal_user = {u.pw_name}
default_internal_group = {_group(u)}
default_login_user = {u.pw_name}
first_valid_uid = {u.pw_uid}
last_valid_uid = {u.pw_uid}
first_valid_gid = 0
ssl = {tls}
{tls_lines}disable_plaintext_auth = no
auth_mechanisms = plain login
auth_failure_delay = 0
recipient_delimiter = +
lmtp_save_to_detail_mailbox = no
mail_location = maildir:~/Maildir
passdb {{
  driver = passwd-file
  args = scheme=PLAIN username_format=%u {root}/users
}}
userdb {{
  driver = static
  args = uid={u.pw_uid} gid={u.pw_gid} home={root}/mail/%d/%n
}}
service imap-login {{
  chroot =
  inet_listener imap {{
    address = 127.0.0.1
    port = {self.ports.imap}
  }}
  inet_listener imaps {{
    address = 127.0.0.1
    port = {self.ports.imaps if self.certs is not None else 0}
  }}
}}
service lmtp {{
  inet_listener lmtp {{
    address = 127.0.0.1
    port = {self.ports.lmtp}
  }}
}}
service auth-worker {{
  user = $default_internal_user
}}
service anvil {{
  chroot =
}}
"""
        path = root / "dovecot.conf"
        path.write_text(conf, encoding="utf-8")
        if os.geteuid() == 0:
            for p in [root, *root.rglob("*")]:
                os.chown(p, u.pw_uid, u.pw_gid)
        os.chmod(root, 0o700)
        return path

    # the process -----------------------------------------------------------------------

    def start(self, timeout: float = 20.0) -> None:
        """Start it; on the same ports as before if it ran already (restart)."""
        fixed = self.ports.imap != 0
        last = ""
        for _ in range(1 if fixed else 5):  # a free port can be taken before Dovecot binds it
            if not fixed:
                self.ports = Ports(_free_port(), _free_port(), _free_port())
            conf = self._write_config()
            try:
                self._spawn(conf, timeout)
                return
            except RuntimeError as exc:
                last = str(exc)
                self._kill()
        raise RuntimeError(f"Dovecot did not start: {last}")

    def _spawn(self, conf: Path, timeout: float) -> None:
        with self._cond:
            self._lines = []
        extra: dict[str, Any] = {}
        if os.geteuid() == 0:
            extra = {"user": self._user.pw_uid, "group": self._user.pw_gid, "extra_groups": []}
        self.proc = subprocess.Popen(
            [DOVECOT, "-F", "-c", str(conf)],
            stdin=subprocess.DEVNULL,
            stdout=subprocess.PIPE,
            stderr=subprocess.STDOUT,
            text=True,
            cwd=self.root,
            env={"PATH": "/usr/sbin:/usr/bin:/sbin:/bin", "HOME": str(self.root)},
            start_new_session=True,
            **extra,
        )
        self._pumper = threading.Thread(target=self._pump, args=(self.proc,), daemon=True)
        self._pumper.start()
        self._wait_line(STARTED, timeout)
        deadline = time.monotonic() + timeout
        _greeting(self.ports.imap, b"* OK", deadline)
        _greeting(self.ports.lmtp, b"220 ", deadline)

    def _pump(self, proc: subprocess.Popen[str]) -> None:
        assert proc.stdout is not None
        for line in proc.stdout:
            with self._cond:
                self._lines.append(line.rstrip("\n"))
                self._cond.notify_all()
        with self._cond:
            self._cond.notify_all()

    def _wait_line(self, pattern: re.Pattern[str], timeout: float) -> None:
        deadline = time.monotonic() + timeout
        with self._cond:
            while not any(pattern.search(line) for line in self._lines):
                if self.proc is not None and self.proc.poll() is not None:
                    raise RuntimeError(f"dovecot exited {self.proc.returncode}: {self.log()}")
                left = deadline - time.monotonic()
                if left <= 0:
                    raise RuntimeError(f"no {pattern.pattern!r} within {timeout} s: {self.log()}")
                self._cond.wait(min(left, 0.5))  # woken by each line, and by the pipe's end

    def log(self) -> str:
        with self._cond:
            return "\n".join(self._lines[-60:])

    def stop(self, timeout: float = 20.0) -> None:
        """SIGTERM to the master, which stops its children; wait for it."""
        proc, self.proc = self.proc, None
        if proc is None:
            return
        if proc.poll() is not None:
            self._reap(proc)
            return
        proc.send_signal(signal.SIGTERM)
        try:
            proc.wait(timeout)
        except subprocess.TimeoutExpired:
            os.killpg(proc.pid, signal.SIGKILL)
            proc.wait(10)
            raise RuntimeError(f"dovecot did not stop on SIGTERM: {self.log()}") from None
        finally:
            self._reap(proc)

    def _reap(self, proc: subprocess.Popen[str]) -> None:
        if self._pumper is not None:
            self._pumper.join(10)  # the pipe ends with the last process holding it
        if proc.stdout is not None:
            proc.stdout.close()

    def _kill(self) -> None:
        proc, self.proc = self.proc, None
        if proc is not None:
            if proc.poll() is None:
                os.killpg(proc.pid, signal.SIGKILL)
                proc.wait(10)
            self._reap(proc)

    def restart(self, crash: bool = False) -> None:
        """Stop and start on the same ports. `crash`: SIGKILL to every Dovecot
        process instead of a SIGTERM (clients lose their connection without a
        BYE; a clean stop waits about 10 s for a client in IDLE)."""
        if crash:
            self._kill()
        else:
            self.stop()
        self.start()

    def remove(self) -> None:
        self.stop()
        shutil.rmtree(self.root, ignore_errors=True)

    # clients ---------------------------------------------------------------------------

    def url(self, user: str = GATEWAY, mailbox: str = "INBOX", scheme: str = "imap") -> str:
        port = self.ports.imaps if scheme == "imaps" else self.ports.imap
        return f"{scheme}://{user.replace('@', '%40')}@{self.host}:{port}/{mailbox}"

    def imap(self, user: str) -> imaplib.IMAP4:
        """A logged-in IMAP client of `user`, like a mail client (plain, loopback)."""
        client = imaplib.IMAP4(self.host, self.ports.imap, timeout=10)
        client.login(user, self.users[user])
        return client

    def messages(self, user: str, mailbox: str = "INBOX") -> list[bytes]:
        """Every message in `user`'s mailbox, read by IMAP (not from the disk)."""
        with contextlib.closing(_Session(self.imap(user))) as s:
            return s.fetch_all(mailbox)

    def count(self, user: str, mailbox: str = "INBOX") -> int:
        client = self.imap(user)
        try:
            typ, data = client.select(mailbox, readonly=True)
            assert typ == "OK", data
            return int(data[0] or b"0")
        finally:
            client.logout()

    def wait_count(self, user: str, n: int, timeout: float = 20.0) -> int:
        """Block until `user`'s INBOX holds at least `n` messages. Each round waits
        on the server: an IDLE that returns when a message arrives (or after 1 s)."""
        deadline = time.monotonic() + timeout
        client = self.imap(user)
        try:
            while True:
                _typ, data = client.select("INBOX", readonly=True)
                got = int(data[0] or b"0")
                if got >= n:
                    return got
                left = deadline - time.monotonic()
                if left <= 0:
                    raise AssertionError(f"{user}: {got} of {n} messages within {timeout} s")
                _idle_once(client, min(left, 1.0))
        finally:
            with contextlib.suppress(Exception):
                client.logout()

    def wait_empty(self, user: str, timeout: float = 20.0) -> None:
        """Block until `user`'s INBOX holds no message (the gateway's fetcher took
        each and expunged it, which it does only after acting on it)."""
        deadline = time.monotonic() + timeout
        client = self.imap(user)
        try:
            while True:
                _typ, data = client.select("INBOX", readonly=True)
                got = int(data[0] or b"0")
                if got == 0:
                    return
                left = deadline - time.monotonic()
                if left <= 0:
                    raise AssertionError(f"{user}: {got} messages left after {timeout} s")
                _idle_once(client, min(left, 1.0))
        finally:
            with contextlib.suppress(Exception):
                client.logout()

    def lmtp_deliver(self, mail_from: str, rcpt_tos: list[str], data: bytes) -> dict[str, str]:
        """Deliver one message by LMTP, one transaction per recipient (LMTP answers
        DATA once per recipient, which smtplib.LMTP does not read). What each
        recipient was answered: "250 …" or the refusal."""
        import smtplib

        said: dict[str, str] = {}
        for rcpt in rcpt_tos:
            with smtplib.LMTP(self.host, self.ports.lmtp, timeout=10) as lmtp:
                try:
                    lmtp.sendmail(mail_from, [rcpt], data)
                    said[rcpt] = "250 saved"
                except smtplib.SMTPRecipientsRefused as exc:
                    code, msg = exc.recipients[rcpt]
                    said[rcpt] = f"{code} {msg.decode(errors='replace')}"
                except smtplib.SMTPResponseException as exc:
                    error = exc.smtp_error
                    text = error.decode(errors="replace") if isinstance(error, bytes) else error
                    said[rcpt] = f"{exc.smtp_code} {text}"
        return said

    def client_tls(self) -> ssl.SSLContext:
        assert self.certs is not None
        return ssl.create_default_context(cafile=str(self.certs.ca))


class _Session:
    def __init__(self, client: imaplib.IMAP4) -> None:
        self.client = client

    def fetch_all(self, mailbox: str) -> list[bytes]:
        typ, data = self.client.select(mailbox, readonly=True)
        assert typ == "OK", data
        typ, data = self.client.uid("SEARCH", "ALL")
        uids = (data[0] or b"").split()
        out: list[bytes] = []
        for uid in uids:
            _typ, got = self.client.uid("FETCH", uid.decode(), "(BODY.PEEK[])")
            out.extend(part[1] for part in got if isinstance(part, tuple))
        return out

    def close(self) -> None:
        with contextlib.suppress(Exception):
            self.client.logout()


def _idle_once(client: imaplib.IMAP4, seconds: float) -> None:
    """IDLE until the server says something (EXISTS) or `seconds` pass; then DONE."""
    tag = b"TESTIDLE"
    client.send(tag + b" IDLE\r\n")
    line = client.readline()
    if not line.startswith(b"+"):
        raise AssertionError(f"IDLE refused: {line!r}")
    sock = client.socket()
    sock.settimeout(seconds)
    with contextlib.suppress(TimeoutError, socket.timeout):
        client.readline()
    sock.settimeout(10)
    client.send(b"DONE\r\n")
    while True:
        line = client.readline()
        if line.startswith(tag):
            return
        if not line:
            raise AssertionError("IMAP connection closed during IDLE")


def _greeting(port: int, expect: bytes, deadline: float) -> None:
    with socket.create_connection(
        ("127.0.0.1", port), timeout=max(0.1, deadline - time.monotonic())
    ) as s:
        s.settimeout(max(0.1, deadline - time.monotonic()))
        got = s.recv(200)
    if not got.startswith(expect):
        raise RuntimeError(f"port {port} greeted {got!r}, wanted {expect!r}")


def _group(user: pwd.struct_passwd) -> str:
    import grp

    return grp.getgrgid(user.pw_gid).gr_name


@contextlib.contextmanager
def dovecot_server(certs: Any = None) -> Iterator[Dovecot]:
    """A started Dovecot for the block; removed afterwards. Dovecot missing: a
    skip, under CI=true a failure (tests/needs.py)."""
    if not installed():
        missing("Dovecot missing: run scripts/install-test-deps.sh (dovecot-imapd, dovecot-lmtpd)")
    server = Dovecot(certs=certs)
    try:
        server.start()
        yield server
    finally:
        server.remove()


@pytest.fixture
def dovecot() -> Iterator[Dovecot]:
    with dovecot_server() as server:
        yield server
