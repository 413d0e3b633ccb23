"""`agentmail backup` of a running gateway while a sender keeps sending, and
`agentmail restore` into a new data dir that a new gateway then serves
(docs/backup.md): real `agentmail serve` processes on real SQLite files, the CLI
as a real subprocess."""

from __future__ import annotations

import json
import os
import shutil
import sqlite3
import subprocess
import sys
from collections.abc import Iterator
from dataclasses import dataclass
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any

import anyio
import httpx
import pytest

from mailui4agents.testing import FAST_HASH_ENV, GatewayProcess, clean_env
from tests.conftest import ADMIN_PASSWORD, USER_PASSWORD, Api

pytestmark = [pytest.mark.anyio, pytest.mark.e2e]

ENV = {"AGENTMAIL_ADMIN_PASSWORD": ADMIN_PASSWORD, **FAST_HASH_ENV}


def agentmail(*args: str | Path, **env: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-m", "mailui4agents.cli.main", *map(str, args)],
        env=clean_env(**ENV, **env),
        capture_output=True,
        text=True,
        timeout=120,
        check=False,
    )


async def agentmail_async(*args: str | Path) -> subprocess.CompletedProcess[bytes]:
    """The CLI in a subprocess without blocking the event loop (the sender keeps going)."""
    return await anyio.run_process(
        [sys.executable, "-m", "mailui4agents.cli.main", *map(str, args)],
        env=clean_env(**ENV),
        check=False,
    )


def tree(root: Path) -> dict[str, bytes]:
    return {
        p.relative_to(root).as_posix(): p.read_bytes()
        for p in sorted(root.rglob("*"))
        if p.is_file()
    }


@dataclass
class Target:
    """A gateway's data dir and, on PostgreSQL, its database URL."""

    data_dir: Path
    url: str | None = None

    def args(self) -> list[str]:
        return ["--database-url", self.url] if self.url else []


@pytest.fixture
def targets(tmp_path: Path, live_backend: str, request: pytest.FixtureRequest) -> dict[str, Target]:
    """Where the live gateway runs and where the backup is restored to: on
    PostgreSQL a migrated database and a new, empty one (pg_restore's target)."""
    live, restored = Target(tmp_path / "data"), Target(tmp_path / "restored")
    if live_backend == "postgresql":
        live.url = request.getfixturevalue("pg_database")
        cluster = request.getfixturevalue("pg_cluster")
        name = f"restored_{os.getpid()}_{tmp_path.name[-12:]}".replace("-", "_").lower()
        cluster.execute(f'CREATE DATABASE "{name}"')
        request.addfinalizer(
            lambda: cluster.execute(f'DROP DATABASE IF EXISTS "{name}" WITH (FORCE)')
        )
        restored.url = cluster.url(name)
    return {"live": live, "restored": restored}


@pytest.fixture
def gateways(targets: dict[str, Target]) -> Iterator[dict[str, GatewayProcess]]:
    procs = {
        name: GatewayProcess(data_dir=t.data_dir, env=clean_env(**ENV), extra_args=t.args())
        for name, t in targets.items()
    }
    try:
        yield procs
    finally:
        for p in procs.values():
            p.stop()


async def blobs_named(t: Target) -> set[str]:
    sql = "SELECT sha256 FROM attachments UNION SELECT sha256 FROM blobs"
    if t.url is None:
        con = sqlite3.connect(t.data_dir / "agentmail.db")
        try:
            return {r[0] for r in con.execute(sql)}
        finally:
            con.close()
    import asyncpg

    conn = await asyncpg.connect(t.url)
    try:
        return {r[0] for r in await conn.fetch(sql)}
    finally:
        await conn.close()


async def upload(a: Api, content: bytes, name: str) -> str:
    r = await a.http.post(
        "/api/v1/attachments", files={"file": (name, content, "application/octet-stream")},
        headers=a.auth("ana"),
    )  # fmt: skip
    assert r.status_code == 201, r.text
    return str(r.json()["attachment_id"])


async def world(a: Api) -> dict[str, Any]:
    """Mail with attachments, a decided request with its grant, a pending request,
    and a calendar entry holding an attachment."""
    await a.login("admin", ADMIN_PASSWORD)
    await a.user("ana")
    await a.agent("claude")
    files = {"big.bin": os.urandom(300_000), "note.txt": b"hello\x00world\n" * 10}
    ids = {name: await upload(a, content, name) for name, content in files.items()}
    r = await a.send(
        "ana", ["claude@/srv/shop.new"], subject="with files", attachment_ids=list(ids.values())
    )
    assert r.status_code == 201, r.text
    first = r.json()
    sid = first["session_id"]

    async def ask(key: str, command: str) -> dict[str, Any]:
        r = await a.http.post(
            "/api/v1/agent/permissions",
            json={"session_id": sid, "kind": "approval", "tool_name": "Bash",
                  "tool_input": {"command": command}, "relay_key": key},
            headers=a.auth("claude"),
        )  # fmt: skip
        assert r.status_code == 201, r.text
        return dict(r.json())

    decided = await ask("k1", "npm test")
    r = await a.http.post(
        f"/api/v1/permissions/{decided['id']}/decision",
        json={"decision": "approve", "always": True},
        headers=a.auth("ana"),
    )
    assert r.status_code == 200, r.text
    grant_id = r.json()["grant_id"]
    pending = await ask("k2", "make deploy")
    later = (datetime.now(UTC) + timedelta(days=2)).replace(microsecond=0)
    cal_file = os.urandom(50_000)
    cal_att = await upload(a, cal_file, "agenda.bin")
    r = await a.http.post(
        "/api/v1/calendar",
        json={"to": ["claude@/srv/shop"], "subject": "standup", "body": "b",
              "start_at": later.isoformat().replace("+00:00", "Z"), "attachment_ids": [cal_att]},
        headers=a.auth("ana"),
    )  # fmt: skip
    assert r.status_code == 201, r.text
    return {
        "sid": sid,
        "first": first["id"],
        "files": files | {"agenda.bin": cal_file},
        "attachment_ids": ids | {"agenda.bin": cal_att},
        "decided": decided["id"],
        "pending": pending["id"],
        "grant": grant_id,
        "calendar": r.json()["id"],
    }


@pytest.mark.live_both_backends
async def test_a_backup_while_mail_keeps_coming_restores_everything_acknowledged_before_it(
    gateways: dict[str, GatewayProcess], targets: dict[str, Target], tmp_path: Path
) -> None:
    live = gateways["live"]
    live.start()
    a = Api(httpx.AsyncClient(base_url=live.url, timeout=30))
    w = await world(a)

    acked: list[tuple[str, bytes | None, str | None]] = []  # mail id, attachment bytes, its id
    stop = anyio.Event()
    enough = anyio.Event()

    async def sender() -> None:
        """Mail after mail, every third with a new attachment (a new blob)."""
        n = 0
        while not stop.is_set():
            n += 1
            content = os.urandom(2000 + n) if n % 3 == 0 else None
            att = [await upload(a, content, f"f{n}.bin")] if content else []
            r = await a.send(
                "ana", ["claude@/srv/shop"], subject=f"loop {n}", parent_mail_id=w["first"],
                attachment_ids=att,
            )  # fmt: skip
            assert r.status_code == 201, r.text
            acked.append((r.json()["id"], content, att[0] if att else None))
            if len(acked) >= 15:
                enough.set()

    dest = tmp_path / "backup"
    async with anyio.create_task_group() as tg:
        tg.start_soon(sender)
        with anyio.fail_after(60):
            await enough.wait()
        before = list(acked)  # acknowledged (201) before the backup began
        done = await agentmail_async(
            "backup", dest, "--data-dir", live.data_dir, *targets["live"].args()
        )
        during = len(acked) - len(before)
        stop.set()
    assert done.returncode == 0, done.stderr.decode()
    assert during > 0, "no mail was sent while the backup ran: the test shows nothing"
    await a.http.aclose()

    manifest = json.loads((dest / "manifest.json").read_text())
    sqlite = targets["live"].url is None
    assert manifest["database"] == ("sqlite" if sqlite else "postgresql")
    assert manifest["schema_revision"]
    assert manifest["counts"]["mails"] >= len(before) + 1
    assert oct(dest.stat().st_mode & 0o777) == "0o700"
    assert all(oct(p.stat().st_mode & 0o777) == "0o600" for p in dest.rglob("*") if p.is_file())
    if sqlite:  # on PostgreSQL the push key is a row of the database
        assert "files/vapid_private.pem" in manifest["files"]

    # Negative controls: the live data dir (in use), a non-empty dir, a tampered backup.
    refused = agentmail("restore", dest, live.data_dir)
    assert refused.returncode == 1 and "in use" in refused.stderr, refused.stderr
    occupied = tmp_path / "occupied"
    occupied.mkdir()
    (occupied / "keep.txt").write_text("mine")
    refused = agentmail("restore", dest, occupied)
    assert refused.returncode == 1 and "not empty" in refused.stderr, refused.stderr
    assert tree(occupied) == {"keep.txt": b"mine"}
    tampered = tmp_path / "tampered"
    shutil.copytree(dest, tampered)
    blob = next(p for p in sorted((tampered / "blobs").rglob("*")) if p.is_file())
    data = bytearray(blob.read_bytes())
    data[len(data) // 2] ^= 0x01
    blob.write_bytes(bytes(data))
    refused = agentmail(
        "restore", tampered, tmp_path / "from-tampered", *targets["restored"].args()
    )
    assert refused.returncode == 1, refused.stderr
    assert str(blob) in refused.stderr and "damaged" in refused.stderr, refused.stderr
    assert not (tmp_path / "from-tampered").exists()
    assert not [n for n in os.listdir(tmp_path) if ".restoring-" in n]
    if not sqlite:
        # Into a database that is not empty (the live one): refused, nothing written.
        refused = agentmail("restore", dest, tmp_path / "into-live-db", *targets["live"].args())
        assert refused.returncode == 1 and "is not empty" in refused.stderr, refused.stderr
        assert not (tmp_path / "into-live-db").exists()
        # No pg_dump on PATH: said so, nothing written.
        refused = agentmail(
            "backup", tmp_path / "no-pg-dump", "--data-dir", live.data_dir,
            *targets["live"].args(), PATH="/nonexistent",
        )  # fmt: skip
        assert refused.returncode == 1 and "pg_dump not found" in refused.stderr, refused.stderr
        assert not (tmp_path / "no-pg-dump").exists()

    restored = agentmail(
        "restore", dest, gateways["restored"].data_dir, *targets["restored"].args()
    )
    assert restored.returncode == 0, restored.stderr
    # Consistent: every blob a restored row names is there (mail that came in
    # while the backup ran included: its rows and its blobs, or neither).
    named = await blobs_named(targets["restored"])
    blobs = gateways["restored"].data_dir / "blobs"
    assert named and not [sha for sha in named if not (blobs / sha[:2] / sha).is_file()]
    live.stop()  # the restored gateway alone serves what it has

    gw = gateways["restored"]
    gw.start()
    b = Api(httpx.AsyncClient(base_url=gw.url, timeout=30))
    await b.login("ana", USER_PASSWORD)
    for mail_id, content, att_id in before:
        r = await b.http.get(f"/api/v1/mail/{mail_id}", headers=b.auth("ana"))
        assert r.status_code == 200, (mail_id, r.text)
        if content is not None:
            got = await b.http.get(f"/api/v1/attachments/{att_id}", headers=b.auth("ana"))
            assert got.status_code == 200 and got.content == content
    for name, content in w["files"].items():
        got = await b.http.get(
            f"/api/v1/attachments/{w['attachment_ids'][name]}", headers=b.auth("ana")
        )
        assert got.status_code == 200, got.text
        assert got.content == content, name
    status: dict[str, str] = {}
    for which in ("pending", "decided"):
        r = await b.http.get("/api/v1/permissions", params={"status": which}, headers=b.auth("ana"))
        assert r.status_code == 200, r.text
        status |= {p["id"]: p["status"] for p in r.json()["items"]}
    assert status[w["decided"]] == "approved" and status[w["pending"]] == "pending"
    r = await b.http.get("/api/v1/grants", headers=b.auth("ana"))
    assert [g["id"] for g in r.json()["items"]] == [w["grant"]]
    r = await b.http.get(f"/api/v1/calendar/{w['calendar']}", headers=b.auth("ana"))
    assert r.status_code == 200 and r.json()["status"] == "scheduled", r.text
    # The restored gateway is a working one: it takes new mail too.
    r = await b.send("ana", ["claude@/srv/shop"], subject="after", parent_mail_id=w["first"])
    assert r.status_code == 201, r.text
    await b.http.aclose()
    if sqlite:
        pem = "vapid_private.pem"
        assert (gw.data_dir / pem).read_bytes() == (live.data_dir / pem).read_bytes()
