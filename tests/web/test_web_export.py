"""The thread page's "Export as mbox" (docs/email.md, "Export"): the same
messages as the API's export for a person who may read the session; the error
page (404) for one who may not; the login page for nobody logged in."""

from __future__ import annotations

import email
import email.policy
import mailbox
from pathlib import Path

import pytest

from tests.conftest import Api
from tests.web.forms import browser

pytestmark = pytest.mark.anyio


async def test_the_thread_page_exports_the_session_for_its_readers_only(
    api: Api, tmp_path: Path
) -> None:
    await api.user("ana")
    await api.user("carol")
    await api.agent("bot")
    r = await api.send("ana", ["bot@/srv/shop.new"], subject="fix it", body="**now**")
    assert r.status_code == 201, r.text
    sid, mail_id = r.json()["session_id"], r.json()["id"]
    reply = await api.send("bot", ["ana@/srv/shop"], subject="Re", parent_mail_id=mail_id)
    assert reply.status_code == 201, reply.text
    path = f"/sessions/{sid}/export"
    async with browser(api, "ana") as ana:
        page = await ana.get(f"/sessions/{sid}")
        assert f'href="{path}" download' in page.text
        got = await ana.get(path)
        assert got.status_code == 200 and got.headers["content-type"] == "application/mbox"
        assert "sandbox" in got.headers["content-security-policy"]
    via_api = await api.http.get(f"/api/v1/sessions/{sid}/export", headers=api.auth("ana"))
    assert got.content == via_api.content  # one export, whichever door
    box_path = tmp_path / "s.mbox"
    box_path.write_bytes(got.content)
    box = mailbox.mbox(box_path, create=False)
    messages = [
        email.message_from_bytes(box.get_bytes(k), policy=email.policy.default)
        for k in box.iterkeys()
    ]
    box.close()
    assert [m["Message-ID"].split("@")[0] for m in messages] == [
        f"<mail.{mail_id}",
        f"<mail.{reply.json()['id']}",
    ]
    async with browser(api, "carol") as carol:
        refused = await carol.get(path)
        assert refused.status_code == 404 and "text/html" in refused.headers["content-type"]
    anonymous = await api.http.get(path)
    assert anonymous.status_code == 303 and anonymous.headers["location"].startswith("/login")
