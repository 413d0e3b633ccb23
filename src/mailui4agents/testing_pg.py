"""A throwaway PostgreSQL cluster for tests and benchmarks: `initdb` + `pg_ctl` on a
free port in a temp dir, stopped and deleted afterwards (docs/postgres.md).

initdb refuses to run as root, so as root the server runs as the `postgres`
user (created by the Debian package that scripts/install-test-deps.sh installs)
through `runuser`. Durability is switched off (fsync, synchronous_commit): the
data is thrown away anyway, and tests run faster.
"""

from __future__ import annotations

import asyncio
import os
import pwd
import shutil
import socket
import subprocess
import tempfile
import threading
from collections.abc import Awaitable, Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import TypeVar

T = TypeVar("T")

SERVER_OPTIONS = (
    "-c listen_addresses=127.0.0.1 -c fsync=off -c synchronous_commit=off "
    "-c full_page_writes=off -c max_connections=400 -c shared_buffers=64MB"
)


def find_bindir() -> Path | None:
    """The directory holding initdb and pg_ctl (newest Debian version first)."""
    on_path = shutil.which("initdb")
    if on_path:
        return Path(on_path).parent
    root = Path("/usr/lib/postgresql")
    if root.is_dir():
        versions = sorted(
            (p for p in root.iterdir() if (p / "bin" / "initdb").exists()),
            key=lambda p: int(p.name) if p.name.isdigit() else 0,
        )
        if versions:
            return versions[-1] / "bin"
    return None


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


def run_async(make: Callable[[], Awaitable[T]]) -> T:
    """Run a coroutine to completion on a fresh loop in its own thread (callable
    from sync code, even while another event loop runs in this thread)."""
    box: dict[str, T] = {}
    error: list[BaseException] = []

    def target() -> None:
        async def main() -> T:
            return await make()

        try:
            box["v"] = asyncio.run(main())
        except BaseException as e:
            error.append(e)

    t = threading.Thread(target=target)
    t.start()
    t.join()
    if error:
        raise error[0]
    return box["v"]


@dataclass
class PgCluster:
    """One cluster; `url(db)` gives a postgresql:// URL (trust auth, user postgres)."""

    bindir: Path
    root: Path = field(default_factory=lambda: Path(tempfile.mkdtemp(prefix="agentmail-pg-")))
    port: int = 0
    _as: list[str] = field(default_factory=list)
    _started: bool = False

    @property
    def data(self) -> Path:
        return self.root / "data"

    def url(self, db: str = "postgres") -> str:
        return f"postgresql://postgres@127.0.0.1:{self.port}/{db}"

    def _run(self, *args: str) -> subprocess.CompletedProcess[str]:
        return subprocess.run(
            [*self._as, *args], check=True, capture_output=True, text=True, timeout=120
        )

    def start(self) -> None:
        if os.geteuid() == 0:
            pw = pwd.getpwnam("postgres")  # KeyError: install the Debian package
            os.chown(self.root, pw.pw_uid, pw.pw_gid)
            self._as = ["runuser", "-u", "postgres", "--"]
        os.chmod(self.root, 0o700)
        self._run(
            str(self.bindir / "initdb"), "-D", str(self.data), "-U", "postgres",
            "--auth=trust", "-E", "UTF8", "--locale=C.UTF-8", "--no-sync",
        )  # fmt: skip
        last: subprocess.CalledProcessError | None = None
        for _ in range(5):  # a free port can be taken between probe and bind
            self.port = _free_port()
            try:
                self._run(
                    str(self.bindir / "pg_ctl"), "-D", str(self.data), "-w", "-t", "60",
                    "-l", str(self.root / "server.log"),
                    "-o", f"-p {self.port} -k {self.root} {SERVER_OPTIONS}", "start",
                )  # fmt: skip
            except subprocess.CalledProcessError as e:
                last = e
                continue
            self._started = True
            return
        raise RuntimeError(f"PostgreSQL did not start: {last and last.stderr}\n{self.log()}")

    def log(self) -> str:
        try:
            return (self.root / "server.log").read_text(errors="replace")[-4000:]
        except OSError:
            return ""

    def stop(self) -> None:
        """Stop the server (immediate: nothing here is worth a checkpoint) and
        delete the cluster."""
        if self._started:
            subprocess.run(
                [*self._as, str(self.bindir / "pg_ctl"), "-D", str(self.data), "-m", "immediate",
                 "-w", "stop"],
                capture_output=True, timeout=60, check=False,
            )  # fmt: skip
            self._started = False
        shutil.rmtree(self.root, ignore_errors=True)

    def execute(self, *statements: str, db: str = "postgres") -> None:
        """Run statements outside any transaction (CREATE/DROP DATABASE)."""
        import asyncpg

        async def go() -> None:
            conn = await asyncpg.connect(self.url(db))
            try:
                for st in statements:
                    await conn.execute(st)
            finally:
                await conn.close()

        run_async(go)
