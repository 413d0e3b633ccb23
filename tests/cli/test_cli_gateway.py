"""The real ``agentmail`` console script, run as a subprocess against a real gateway.

Every command here is a separate process with its own environment: a private
``XDG_CONFIG_HOME`` per person (never the developer's config) and
``AGENTMAIL_URL`` pointing at the module's one gateway (``shared_gateway``; each
test has its own person and agent on it, ``ana-N`` and ``claude-N``), or at a
gateway of its own (``gateway_process``) for the test that needs a database
nobody else touched.
"""

from __future__ import annotations

import json
import queue
import re
import signal
import stat
import subprocess
import sys
import threading
import time
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from dataclasses import dataclass, field
from datetime import datetime
from itertools import count
from pathlib import Path
from typing import IO, Any

import httpx
import pytest
from tests.conftest import ADMIN_PASSWORD, USER_PASSWORD

from mailui4agents import testing
from mailui4agents.cli.auth import save_login
from mailui4agents.testing import GatewayProcess

pytestmark = [pytest.mark.e2e]

_SCRIPT = Path(sys.executable).with_name("agentmail")
# The installed console script when there is one, else the same entry point via -m.
AGENTMAIL = [str(_SCRIPT)] if _SCRIPT.exists() else [sys.executable, "-m", "mailui4agents.cli.main"]

CLI_TIMEOUT = 30.0  # generous for a loaded CI box; a hang fails instead of blocking
QUICKLY = 10.0  # "no retry loop": one failed request plus interpreter start-up
WATCH_DEADLINE = 20.0

AGENT_KEY = re.compile(r"am_agent_[A-Za-z0-9_-]+")
NEW_SESSION = "<this test's claude-N@/srv/shop.new>"  # in parameters: Names.new_session
SUBJECT = "Fix login bug"
# Long and multi-line, so that a truncated or reflowed body cannot pass for the whole one.
LONG_BODY = "Login fails with a 500 after the upgrade.\n\nSteps:\n" + "".join(
    f"  {n}. step number {n} of the reproduction ✓\n" for n in range(1, 400)
)


@dataclass
class Cli:
    """One person's (or agent's) ``agentmail``: a config directory plus environment."""

    url: str | None
    config_home: Path
    env: dict[str, str] = field(default_factory=dict)

    @property
    def config_file(self) -> Path:
        return self.config_home / "agentmail" / "config.json"

    def environ(self) -> dict[str, str]:
        extra = {"XDG_CONFIG_HOME": str(self.config_home), **self.env}
        if self.url is not None:
            extra["AGENTMAIL_URL"] = self.url
        return testing.clean_env(**extra)

    def __call__(
        self, *args: str, input: str | None = None, timeout: float = CLI_TIMEOUT
    ) -> subprocess.CompletedProcess[str]:
        return subprocess.run(
            [*AGENTMAIL, *args],
            env=self.environ(),
            input=input,
            stdin=subprocess.DEVNULL if input is None else None,
            capture_output=True,
            text=True,
            encoding="utf-8",
            timeout=timeout,
        )

    def ok(self, *args: str, input: str | None = None) -> subprocess.CompletedProcess[str]:
        result = self(*args, input=input)
        assert result.returncode == 0, f"agentmail {' '.join(args)}: {result.stderr}"
        return result

    def json(self, *args: str, input: str | None = None) -> Any:
        return json.loads(self.ok(*args, "--json", input=input).stdout)

    def popen(self, *args: str) -> subprocess.Popen[str]:
        return subprocess.Popen(
            [*AGENTMAIL, *args],
            env=self.environ(),
            stdin=subprocess.DEVNULL,
            stdout=subprocess.PIPE,
            stderr=subprocess.PIPE,
            text=True,
            encoding="utf-8",
        )


class Lines:
    """The lines of a pipe, read in a thread, awaited with a deadline (no sleeps)."""

    def __init__(self, stream: IO[str]) -> None:
        self.seen: list[str] = []
        self._queue: queue.Queue[str | None] = queue.Queue()
        self._thread = threading.Thread(target=self._pump, args=(stream,), daemon=True)
        self._thread.start()

    def _pump(self, stream: IO[str]) -> None:
        for line in stream:
            self._queue.put(line)
        self._queue.put(None)

    def wait_for(self, wanted: Callable[[str], bool], timeout: float = WATCH_DEADLINE) -> str:
        deadline = time.monotonic() + timeout
        while (remaining := deadline - time.monotonic()) > 0:
            try:
                line = self._queue.get(timeout=remaining)
            except queue.Empty:
                break
            if line is None:
                raise AssertionError(f"the stream ended first; it said: {self.seen}")
            self.seen.append(line)
            if wanted(line):
                return line
        raise AssertionError(f"no such line within {timeout} s; saw: {self.seen}")

    def rest(self) -> list[str]:
        """Every line up to the end of the stream (call once the process has ended)."""
        self._thread.join(CLI_TIMEOUT)
        while (line := self._queue.get_nowait()) is not None:
            self.seen.append(line)
        return self.seen


@contextmanager
def watching(cli: Cli, *args: str) -> Iterator[tuple[subprocess.Popen[str], Lines, Lines]]:
    """``agentmail watch ARGS`` until its ready line; always reaped afterwards."""
    proc = cli.popen("watch", *args)
    assert proc.stdout is not None and proc.stderr is not None
    out, err = Lines(proc.stdout), Lines(proc.stderr)
    try:
        err.wait_for(lambda line: line.startswith("watching ") and "Ctrl-C" in line)
        yield proc, out, err
    finally:
        if proc.poll() is None:
            proc.kill()
        proc.wait(CLI_TIMEOUT)
        proc.stdout.close()
        proc.stderr.close()


def interrupt(proc: subprocess.Popen[str]) -> int:
    """Ctrl-C: SIGINT, then the exit status."""
    proc.send_signal(signal.SIGINT)
    return proc.wait(CLI_TIMEOUT)


# -- fixtures ---------------------------------------------------------------------------

_PEOPLE = count(1)


@dataclass(frozen=True)
class Names:
    """This test's person and agent. The module shares one gateway, so every test
    has its own (ana-N, claude-N) and starts from mail, sessions and keys that no
    other test saw."""

    ana: str
    claude: str

    @property
    def new_session(self) -> str:
        return f"{self.claude}@/srv/shop.new"

    @property
    def alias(self) -> str:  # the automatic alias: the agent's name and SUBJECT
        return f"{self.claude}-fix-login-bug"

    @property
    def ana_reply_address(self) -> str:
        return f"{self.ana}@/srv/shop.{self.alias}"

    @property
    def claude_address(self) -> str:
        return f"{self.claude}@/srv/shop.{self.alias}"


def logged_in(url: str, config_home: Path, username: str, password: str) -> Cli:
    """What `agentmail login` leaves behind (cli/auth.save_login), made over HTTP.

    The fixtures' logins, users, agents and set-up mail are made without the CLI
    (each console-script run costs an interpreter start); what the CLI itself does
    at login, `user add`, `agent add`, `send`, `watch`… is what the tests check."""
    r = httpx.post(
        f"{url}/api/v1/auth/login", json={"username": username, "password": password}, timeout=30
    )
    assert r.status_code == 200, r.text
    cli = Cli(url, config_home)
    save_login(url, username, r.json()["token"], cli.config_file)
    return cli


def http(who: Cli, method: str, path: str, **kwargs: Any) -> httpx.Response:
    """A request with the credential `who`'s CLI would use: its AGENTMAIL_KEY, or
    the token in its config file."""
    credential = (
        who.env.get("AGENTMAIL_KEY")
        or json.loads(who.config_file.read_text(encoding="utf-8"))["token"]
    )
    return httpx.request(
        method,
        f"{who.url}{path}",
        headers={"Authorization": f"Bearer {credential}"},
        timeout=30,
        **kwargs,
    )


def admin_post(admin: Cli, path: str, body: dict[str, Any]) -> dict[str, Any]:
    r = http(admin, "POST", path, json=body)
    assert r.status_code == 201, r.text
    created: dict[str, Any] = r.json()
    return created


def sent_over_http(
    sender: Cli, to: str, subject: str, body: str, parent: str | None = None
) -> dict[str, Any]:
    """A set-up mail, over HTTP: the request `agentmail send` makes (client/client.py
    send_mail), for a test whose subject is another command."""
    path = "/api/v1/agent/mail" if "AGENTMAIL_KEY" in sender.env else "/api/v1/mail"
    payload: dict[str, Any] = {"to": [to], "subject": subject, "body": body}
    if parent is not None:
        payload["parent_mail_id"] = parent
    r = http(sender, "POST", path, json=payload)
    assert r.status_code == 201, r.text
    sent: dict[str, Any] = r.json()
    return sent


@pytest.fixture
def names() -> Names:
    n = next(_PEOPLE)
    return Names(ana=f"ana-{n}", claude=f"claude-{n}")


@pytest.fixture
def admin(shared_gateway: GatewayProcess, tmp_path: Path) -> Cli:
    return logged_in(shared_gateway.url, tmp_path / "xdg-admin", "admin", ADMIN_PASSWORD)


@pytest.fixture
def ana(admin: Cli, names: Names, tmp_path: Path) -> Cli:
    assert admin.url is not None
    admin_post(admin, "/api/v1/admin/users", {"username": names.ana, "password": USER_PASSWORD})
    return logged_in(admin.url, tmp_path / "xdg-ana", names.ana, USER_PASSWORD)


@pytest.fixture
def claude(admin: Cli, ana: Cli, names: Names, tmp_path: Path) -> Cli:
    """The agent: its key in AGENTMAIL_KEY and an empty config directory. ana may
    set it to work anywhere (docs/access.md)."""
    agent = {"name": names.claude, "taskers": [names.ana], "workspaces": ["/**"]}
    created = admin_post(admin, "/api/v1/admin/agents", agent)
    return Cli(admin.url, tmp_path / "xdg-claude", {"AGENTMAIL_KEY": created["key"]})


@pytest.fixture
def first_mail(ana: Cli, claude: Cli, names: Names) -> dict[str, Any]:
    """Ana's mail that opens the session ``claude-N-fix-login-bug``."""
    return sent_over_http(ana, names.new_session, SUBJECT, LONG_BODY)


# -- login ------------------------------------------------------------------------------


def test_login_stores_url_and_token_in_a_0600_config_file_that_later_commands_use(
    gateway_process: GatewayProcess, tmp_path: Path
) -> None:
    """A gateway of its own: the user list below is exactly the admin."""
    cli = Cli(gateway_process.url, tmp_path / "xdg")

    result = cli("login", "--username", "admin", "--password", ADMIN_PASSWORD)

    assert result.returncode == 0, result.stderr
    assert ADMIN_PASSWORD not in result.stdout + result.stderr
    assert stat.S_IMODE(cli.config_file.stat().st_mode) == 0o600
    assert stat.S_IMODE(cli.config_file.parent.stat().st_mode) & 0o077 == 0
    stored = json.loads(cli.config_file.read_text(encoding="utf-8"))
    assert stored["url"] == gateway_process.url
    assert stored["token"].startswith("am_user_")
    assert "password" not in stored
    # Neither AGENTMAIL_TOKEN nor even AGENTMAIL_URL: both come from the file now.
    later = Cli(None, cli.config_home)
    assert not any(name.startswith("AGENTMAIL_") for name in later.environ())
    users = later.json("user", "list")
    assert [user["username"] for user in users] == ["admin"]


def test_a_wrong_password_exits_non_zero_with_the_gateways_message_and_writes_no_file(
    shared_gateway: GatewayProcess, admin: Cli, names: Names, tmp_path: Path
) -> None:
    # This test's own user: the failure counts against no name another test logs in with.
    admin_post(admin, "/api/v1/admin/users", {"username": names.ana, "password": USER_PASSWORD})
    cli = Cli(shared_gateway.url, tmp_path / "xdg")

    result = cli("login", "--username", names.ana, "--password", "not-the-password")

    assert result.returncode == 1
    assert "wrong username or password" in result.stderr
    assert "AGENTMAIL_KEY" not in result.stderr  # a failed login is not a stale credential
    assert "not-the-password" not in result.stdout + result.stderr
    assert not cli.config_file.exists()
    assert not list(cli.config_home.rglob("*.tmp"))


# -- admin: agents and users ------------------------------------------------------------


def test_agent_add_json_prints_name_key_and_created_at_with_a_working_agent_key(
    admin: Cli, names: Names, tmp_path: Path
) -> None:
    created = admin.json("agent", "add", names.claude)

    assert set(created) == {"name", "key", "created_at"}
    assert created["name"] == names.claude
    assert created["key"].startswith("am_agent_")
    assert datetime.fromisoformat(created["created_at"].replace("Z", "+00:00")).tzinfo
    agent = Cli(admin.url, tmp_path / "xdg-claude", {"AGENTMAIL_KEY": created["key"]})
    assert agent.json("inbox") == {"items": [], "next_cursor": None}


def test_agent_add_without_json_shows_the_key_exactly_once(
    admin: Cli, names: Names, tmp_path: Path
) -> None:
    result = admin.ok("agent", "add", names.claude)

    keys = AGENT_KEY.findall(result.stdout)
    assert len(keys) == 1, result.stdout
    assert "only this once" in result.stdout
    assert keys[0] not in result.stderr
    agent = Cli(admin.url, tmp_path / "xdg-claude", {"AGENTMAIL_KEY": keys[0]})
    assert "No mail." in agent.ok("inbox").stdout
    # Listing agents afterwards never shows a key again.
    listing = admin.ok("agent", "list", "--json").stdout
    assert keys[0] not in listing
    assert not AGENT_KEY.search(listing.replace('"prefix": "am_agent_', '"prefix": "'))


def test_adding_a_taken_name_again_exits_1_with_a_message_naming_the_conflict(
    admin: Cli, claude: Cli, names: Names
) -> None:
    # `claude` added the agent (over HTTP); the CLI now adds that name again.
    again = admin("agent", "add", names.claude)
    as_user = admin("user", "add", names.claude, "--password", USER_PASSWORD)

    assert again.returncode == 1
    assert names.claude in again.stderr and "already taken" in again.stderr
    assert not AGENT_KEY.search(again.stdout + again.stderr)
    # Users and agents share one namespace: an address name@… means one principal.
    assert as_user.returncode == 1
    assert names.claude in as_user.stderr and "already taken" in as_user.stderr


def test_a_user_added_by_the_admin_logs_in_with_a_separate_config(
    admin: Cli, names: Names, tmp_path: Path
) -> None:
    added = admin.ok("user", "add", names.ana, "--password", USER_PASSWORD)
    assert names.ana in added.stdout
    ana = Cli(admin.url, tmp_path / "xdg-ana")

    ana.ok("login", "--username", names.ana, "--password", USER_PASSWORD)

    assert json.loads(ana.config_file.read_text(encoding="utf-8"))["username"] == names.ana
    assert json.loads(admin.config_file.read_text(encoding="utf-8"))["username"] == "admin"
    assert "No mail." in ana.ok("inbox").stdout
    not_admin = ana("user", "add", "bob", "--password", USER_PASSWORD)
    assert not_admin.returncode == 1
    assert not_admin.stderr.startswith("error: ")


# -- send -------------------------------------------------------------------------------


def test_send_prints_the_session_alias_and_the_reply_address(
    ana: Cli, claude: Cli, names: Names
) -> None:
    result = ana.ok("send", "--to", names.new_session, "--subject", SUBJECT, "--body", "hi")

    assert f"in session {names.alias}." in result.stdout
    assert names.claude_address in result.stdout


@pytest.mark.parametrize("source", ["--body-file", "--body-file -", "piped stdin"])
def test_send_takes_the_body_from_a_file_or_stdin(
    ana: Cli, claude: Cli, names: Names, tmp_path: Path, source: str
) -> None:
    body = f"body via {source}\nsecond line ✓\n\n  indented, trailing newline kept\n"
    args = ["send", "--to", names.new_session, "--subject", SUBJECT]
    piped: str | None = body
    if source == "--body-file":
        path = tmp_path / "body.txt"
        path.write_text(body, encoding="utf-8")
        args += ["--body-file", str(path)]
        piped = None
    elif source == "--body-file -":
        args += ["--body-file", "-"]

    sent = ana.json(*args, input=piped)

    assert sent["body"] == body
    assert ana.json("read", sent["id"])["body"] == body
    assert claude.json("read", sent["id"])["body"] == body


@pytest.mark.parametrize(
    ("recipients", "blamed"),
    [
        (["--to", "not an address"], "to[0]"),
        (["--to", NEW_SESSION, "--to", "nobody-at-all"], "to[1]"),
        (["--to", NEW_SESSION, "--cc", "@/srv/shop"], "cc[0]"),
    ],
)
def test_a_bad_address_exits_non_zero_naming_the_field(
    ana: Cli, claude: Cli, names: Names, recipients: list[str], blamed: str
) -> None:
    recipients = [names.new_session if arg == NEW_SESSION else arg for arg in recipients]
    result = ana("send", *recipients, "--subject", SUBJECT, "--body", "hi")

    assert result.returncode == 1
    assert blamed in result.stderr
    assert result.stdout == ""
    assert ana.json("inbox")["items"] == []  # nothing was sent


# -- the agent's side -------------------------------------------------------------------


def test_the_agent_inbox_lists_the_mail_with_ana_s_reply_address(
    claude: Cli, names: Names, first_mail: dict[str, Any]
) -> None:
    items = claude.json("inbox")["items"]

    assert [item["id"] for item in items] == [first_mail["id"]]
    (item,) = items
    assert item["reply_address"] == names.ana_reply_address
    assert item["session_alias"] == names.alias
    assert item["from"] == names.ana_reply_address
    assert item["subject"] == SUBJECT
    assert item["read"] is False
    human = claude.ok("inbox").stdout
    assert first_mail["id"] in human and SUBJECT in human


def test_read_prints_the_full_body(claude: Cli, names: Names, first_mail: dict[str, Any]) -> None:
    text = claude.ok("read", first_mail["id"]).stdout

    assert LONG_BODY in text
    assert "truncated" not in text
    assert f"Reply to: {names.ana_reply_address}" in text
    assert claude.json("read", first_mail["id"])["body"] == LONG_BODY


def test_thread_lists_the_session_oldest_first(
    ana: Cli, claude: Cli, names: Names, first_mail: dict[str, Any]
) -> None:
    second = sent_over_http(ana, names.claude_address, "Also the logout", "and logout")
    third = sent_over_http(ana, names.claude_address, "Never mind", "logout is fine")
    ids = [first_mail["id"], second["id"], third["id"]]

    scope = ("--session", first_mail["session_id"])
    for who, extra in ((claude, scope), (ana, ())):
        thread = who.json("thread", third["id"], *extra)
        assert [mail["id"] for mail in thread] == ids
        assert {mail["session_id"] for mail in thread} == {first_mail["session_id"]}
    text = claude.ok("thread", second["id"], *scope).stdout
    positions = [text.index(subject) for subject in (SUBJECT, "Also the logout", "Never mind")]
    assert positions == sorted(positions)


def test_an_agent_reply_with_parent_lands_in_the_same_session(
    ana: Cli, claude: Cli, names: Names, first_mail: dict[str, Any]
) -> None:
    (item,) = claude.json("inbox")["items"]

    reply = claude.json(
        "send",
        "--to",
        item["reply_address"],
        "--parent",
        item["id"],
        "--subject",
        f"Re: {SUBJECT}",
        "--body",
        "Fixed in the session middleware.",
    )

    assert reply["session_id"] == first_mail["session_id"]
    assert reply["parent_mail_id"] == first_mail["id"]
    thread = ana.json("thread", first_mail["id"])
    assert [mail["id"] for mail in thread] == [first_mail["id"], reply["id"]]
    assert thread[1]["from"] == names.claude_address
    assert thread[1]["body"] == "Fixed in the session middleware."
    assert {mail["session_id"] for mail in thread} == {first_mail["session_id"]}
    (unread,) = ana.json("inbox", "--unread")["items"]
    assert unread["id"] == reply["id"]


# -- watch ------------------------------------------------------------------------------


def test_watch_json_prints_a_json_line_for_mail_sent_after_it_started(
    ana: Cli, claude: Cli, names: Names
) -> None:
    with watching(claude, "--json") as (proc, out, err):
        sent = sent_over_http(ana, names.new_session, SUBJECT, "hi")

        line = out.wait_for(lambda text: sent["id"] in text)
        event = json.loads(line)
        assert event["type"] == "new_mail"
        assert isinstance(event["id"], int)
        assert event["data"]["mail_id"] == sent["id"]
        assert event["data"]["subject"] == SUBJECT
        assert event["data"]["reply_address"] == names.ana_reply_address

        assert interrupt(proc) == 0
        for text in out.rest():  # every line on stdout is one JSON object
            assert isinstance(json.loads(text), dict)
        assert "Traceback" not in "".join(err.rest())


def test_watch_without_json_prints_one_readable_line_per_event(
    ana: Cli, claude: Cli, names: Names
) -> None:
    first = sent_over_http(ana, names.new_session, SUBJECT, "hi")

    with watching(ana) as (proc, out, _err):
        sent_over_http(claude, names.ana_reply_address, "Re: Fix login bug", "done", first["id"])

        line = out.wait_for(lambda text: "new_mail" in text)
        assert line.startswith("#")
        assert names.claude_address in line and "Re: Fix login bug" in line
        with pytest.raises(json.JSONDecodeError):
            json.loads(line)
        assert interrupt(proc) == 0


# -- revoked keys -----------------------------------------------------------------------


@pytest.fixture
def revoked_claude(admin: Cli, claude: Cli, names: Names) -> Cli:
    """claude's one key, revoked by `agentmail agent revoke-key` (the only test of
    that command; the key's id comes over HTTP)."""
    agents: list[dict[str, Any]] = []
    cursor: str | None = None
    while True:  # every page: the module's other tests added agents too
        r = http(admin, "GET", "/api/v1/admin/agents", params={"cursor": cursor} if cursor else {})
        assert r.status_code == 200, r.text
        agents += r.json()["items"]
        if not (cursor := r.json()["next_cursor"]):
            break
    (agent,) = [a for a in agents if a["name"] == names.claude]
    (key,) = agent["keys"]
    admin.ok("agent", "revoke-key", names.claude, key["key_id"])
    return claude


def test_a_revoked_key_makes_inbox_exit_1_saying_the_key_is_invalid_or_revoked(
    revoked_claude: Cli,
) -> None:
    started = time.monotonic()
    result = revoked_claude("inbox", timeout=QUICKLY)

    assert time.monotonic() - started < QUICKLY
    assert result.returncode == 1
    assert "revoked" in result.stderr and "AGENTMAIL_KEY" in result.stderr
    assert "Traceback" not in result.stderr


def test_a_revoked_key_makes_watch_exit_non_zero_at_once_instead_of_retrying(
    revoked_claude: Cli,
) -> None:
    started = time.monotonic()
    result = revoked_claude("watch", "--json", timeout=QUICKLY)

    assert time.monotonic() - started < QUICKLY
    assert result.returncode != 0
    assert "revoked" in result.stderr
    assert "retrying" not in result.stderr
    assert "watching" not in result.stderr  # the stream never opened
    assert result.stdout == ""


# -- tokens and logout ------------------------------------------------------------------


def test_tokens_lists_the_clis_token_and_logout_revokes_it_and_deletes_it_locally(
    ana: Cli, names: Names, shared_gateway: GatewayProcess, tmp_path: Path
) -> None:
    assert ana.url is not None  # ana's second login elsewhere:
    laptop = logged_in(ana.url, tmp_path / "xdg-ana-laptop", names.ana, USER_PASSWORD)
    listed = ana.json("tokens")
    assert [t["current"] for t in listed].count(True) == 1 and len(listed) == 2
    assert "(this CLI)" in ana.ok("tokens").stdout
    token = json.loads(ana.config_file.read_text(encoding="utf-8"))["token"]

    result = ana.ok("logout")

    assert "revoked" in result.stdout
    stored = json.loads(ana.config_file.read_text(encoding="utf-8"))
    assert "token" not in stored and stored["url"] == shared_gateway.url
    assert stat.S_IMODE(ana.config_file.stat().st_mode) == 0o600
    with_token = Cli(ana.url, tmp_path / "xdg-empty", {"AGENTMAIL_TOKEN": token})
    assert "revoked" in with_token("inbox", timeout=QUICKLY).stderr  # 401 at the gateway
    assert ana("tokens", timeout=QUICKLY).returncode == 1  # nothing stored any more
    assert len(laptop.json("tokens")) == 1  # the other login still works


def test_tokens_revoke_removes_one_token_and_logout_refuses_an_agent_key(
    ana: Cli, claude: Cli, names: Names, tmp_path: Path
) -> None:
    assert ana.url is not None
    laptop = logged_in(ana.url, tmp_path / "xdg-ana-laptop", names.ana, USER_PASSWORD)
    [other] = [t for t in ana.json("tokens") if not t["current"]]
    assert f"Revoked token {other['id']}" in ana.ok("tokens", "--revoke", other["id"]).stdout
    assert laptop("tokens", timeout=QUICKLY).returncode == 1
    result = claude("logout", timeout=QUICKLY)
    assert result.returncode == 1 and "agent key" in result.stderr


def test_rotate_key_with_grace_keeps_the_old_key_working_for_now(
    admin: Cli, claude: Cli, names: Names
) -> None:
    rotated = admin.json("agent", "rotate-key", names.claude, "--grace", "600")
    assert rotated["grace_s"] == 600 and rotated["key"].startswith("am_agent_")
    claude.ok("inbox")  # the old key, within its grace period
    admin.ok("agent", "rotate-key", names.claude)  # no grace: every older key stops now
    assert "revoked" in claude("inbox", timeout=QUICKLY).stderr
