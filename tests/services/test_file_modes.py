"""Data files are the gateway user's alone, whatever the umask: under umask 000
the data dir and blob dirs are 0700, the SQLite database and its -wal and -shm
0600, blobs 0600, and the CLI's config file 0600 in a 0700 directory."""

from __future__ import annotations

import os
import stat
from collections.abc import AsyncIterator, Iterator
from contextlib import asynccontextmanager, contextmanager
from pathlib import Path

import httpx
import pytest

from mailui4agents.app import create_app
from mailui4agents.client.config import write_config_file
from mailui4agents.settings import Settings
from tests.conftest import ADMIN_PASSWORD, Api, fast_settings

pytestmark = pytest.mark.anyio


@contextmanager
def umask(mask: int) -> Iterator[None]:
    old = os.umask(mask)
    try:
        yield
    finally:
        os.umask(old)


@pytest.fixture
def permissive_umask() -> Iterator[None]:
    with umask(0):
        yield


def mode(path: Path) -> int:
    return stat.S_IMODE(path.stat().st_mode)


@asynccontextmanager
async def uploaded(settings: Settings) -> AsyncIterator[str]:
    """A running gateway with one uploaded file; yields its sha256."""
    app = create_app(settings)
    async with app.router.lifespan_context(app):
        transport = httpx.ASGITransport(app=app)
        async with httpx.AsyncClient(transport=transport, base_url="http://gw") as http:
            api = Api(http)
            await api.login("admin", ADMIN_PASSWORD)
            r = await http.post(
                "/api/v1/attachments",
                files={"file": ("a.txt", b"secret", "text/plain")},
                headers=api.auth("admin"),
            )
            assert r.status_code == 201, r.text
            yield r.json()["sha256"]


async def test_a_strict_umask_does_not_lock_the_gateway_out_of_its_own_directories(
    tmp_path: Path,
) -> None:
    """umask 0277 takes the owner's write bit from mkdir(0700): modes are set after."""
    settings = fast_settings(tmp_path)
    with umask(0o277):
        async with uploaded(settings) as sha:
            pass
    blob = settings.data_dir / "blobs" / sha[:2] / sha
    assert (mode(settings.data_dir), mode(blob.parent), mode(blob)) == (0o700, 0o700, 0o600)


async def test_database_blobs_and_their_directories_are_private_under_umask_0(
    tmp_path: Path, permissive_umask: None
) -> None:
    settings = fast_settings(tmp_path)
    async with uploaded(settings) as sha:
        data = settings.data_dir
        # While the gateway runs, SQLite's -wal and -shm exist next to the database.
        files = [data / "agentmail.db", data / "agentmail.db-wal", data / "agentmail.db-shm"]
        blob = data / "blobs" / sha[:2] / sha
        dirs = [data, data / "blobs", data / "blobs" / "tmp", blob.parent]
        assert {str(p): oct(mode(p)) for p in [*files, blob]} == {
            str(p): "0o600" for p in [*files, blob]
        }
        assert {str(p): oct(mode(p)) for p in dirs} == {str(p): "0o700" for p in dirs}


async def test_an_existing_database_file_is_tightened_to_0600(
    tmp_path: Path, permissive_umask: None
) -> None:
    settings = fast_settings(tmp_path)
    settings.data_dir.mkdir()
    db = settings.data_dir / "agentmail.db"
    db.touch(0o644)
    os.chmod(db, 0o644)
    app = create_app(settings)
    async with app.router.lifespan_context(app):
        assert mode(db) == 0o600


def test_the_cli_config_file_is_private_under_umask_0(
    tmp_path: Path, permissive_umask: None
) -> None:
    path = tmp_path / "conf" / "agentmail" / "config.json"
    write_config_file({"url": "http://127.0.0.1:8025", "token": "am_user_x"}, path)
    assert (mode(path), mode(path.parent), mode(path.parent.parent)) == (0o600, 0o700, 0o700)
