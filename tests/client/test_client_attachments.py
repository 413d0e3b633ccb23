"""Attachment calls of the client: routes, multipart shape, bytes back."""

from __future__ import annotations

from pathlib import Path

import httpx
import pytest

from mailui4agents.client import ApiError, AsyncClient, ClientConfig
from mailui4agents.wire.models import to_json

AGENT = ClientConfig(url="http://gw.test", key="am_agent_k", agent_name="claude")
USER = ClientConfig(url="http://gw.test", token="am_user_t")
UPLOADED = {
    "attachment_id": "a1",
    "name": "n",
    "size": 1,
    "sha256": "0" * 64,
    "content_type": "text/plain",
}

pytestmark = pytest.mark.anyio


def recording(answer: httpx.Response) -> tuple[list[httpx.Request], httpx.MockTransport]:
    seen: list[httpx.Request] = []

    def handle(request: httpx.Request) -> httpx.Response:
        request.read()
        seen.append(request)
        return answer

    return seen, httpx.MockTransport(handle)


async def test_an_agent_uploads_bytes_as_the_multipart_part_file_on_the_agent_route() -> None:
    seen, transport = recording(httpx.Response(201, json=UPLOADED))
    async with AsyncClient(AGENT, transport=transport) as api:
        out = await api.upload_attachment(b"hello", name="notes.md")
    assert to_json(out) == UPLOADED  # the gateway's answer, typed
    request = seen[0]
    assert (request.method, request.url.path) == ("POST", "/api/v1/agent/attachments")
    assert request.headers["content-type"].startswith("multipart/form-data; boundary=")
    assert b'name="file"; filename="notes.md"' in request.content
    assert b"Content-Type: text/markdown" in request.content
    assert b"\r\n\r\nhello\r\n" in request.content


async def test_a_person_uploads_a_file_from_disk_under_its_own_name(tmp_path: Path) -> None:
    path = tmp_path / "report.csv"
    path.write_bytes(b"a,b\n1,2\n")
    seen, transport = recording(httpx.Response(201, json=UPLOADED))
    async with AsyncClient(USER, transport=transport) as api:
        await api.upload_attachment(path, content_type="application/x-custom")
    request = seen[0]
    assert request.url.path == "/api/v1/attachments"
    assert b'filename="report.csv"' in request.content
    assert b"Content-Type: application/x-custom" in request.content
    assert b"a,b\n1,2\n" in request.content


async def test_a_download_returns_the_bytes_and_passes_the_agents_session() -> None:
    seen, transport = recording(httpx.Response(200, content=b"\x00\x01raw"))
    async with AsyncClient(AGENT, transport=transport) as api:
        data = await api.download_attachment("a1", session_id="s1")
    assert data == b"\x00\x01raw"
    assert seen[0].url.path == "/api/v1/agent/attachments/a1"
    assert seen[0].url.params["session_id"] == "s1"


async def test_a_person_downloads_on_the_human_route_without_a_session() -> None:
    seen, transport = recording(httpx.Response(200, content=b"x"))
    async with AsyncClient(USER, transport=transport) as api:
        assert await api.download_attachment("a1") == b"x"
        with pytest.raises(ValueError):
            await api.download_attachment("a1", session_id="s1")
    assert [r.url.path for r in seen] == ["/api/v1/attachments/a1"]


async def test_a_refused_download_raises_the_gateways_error() -> None:
    body = {"error": {"code": "not_found", "message": "attachment 'a1' not found"}}
    _, transport = recording(httpx.Response(404, json=body))
    async with AsyncClient(AGENT, transport=transport) as api:
        with pytest.raises(ApiError) as refused:
            await api.download_attachment("a1")
    assert (refused.value.status, refused.value.code) == (404, "not_found")
