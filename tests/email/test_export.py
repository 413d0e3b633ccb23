"""A session exported as real mail (docs/email.md, "Export"), read back with
Python's `mailbox` and `email` packages: one message per mail of the session,
the Message-IDs, In-Reply-To and References of the e-mails the relay received,
attachments byte for byte; who may export (the read rule) and what a reader
who is no decider sees of a request."""

from __future__ import annotations

import email
import email.policy
import mailbox
import uuid
from email.message import EmailMessage
from pathlib import Path
from typing import Any

import pytest

from tests.conftest import Api
from tests.email.conftest import MAIL_FROM, gateway_of
from tests.email.test_agent_mail import BIG, LIMIT, SMALL, reply, thread, upload, verify
from tests.fakes.smtp_relay import Relay

pytestmark = pytest.mark.anyio

__all__ = ["thread", "verify"]  # fixtures used here
DOMAIN = MAIL_FROM.split("@")[1]
SECRET_CMD = "deploy --to production-db-7"


def export_path(sid: str) -> str:
    return f"/api/v1/sessions/{sid}/export"


def read_mbox(data: bytes, tmp_path: Path) -> list[EmailMessage]:
    path = tmp_path / f"{uuid.uuid4().hex}.mbox"
    path.write_bytes(data)
    box = mailbox.mbox(path, create=False)
    try:
        out = []
        for key in box.iterkeys():
            msg = email.message_from_bytes(box.get_bytes(key), policy=email.policy.default)
            assert isinstance(msg, EmailMessage)
            out.append(msg)
        return out
    finally:
        box.close()


@pytest.fixture
async def exported(people: Api, relay: Relay, thread: dict[str, Any]) -> dict[str, Any]:
    """The agent answers with two files (one over the e-mail limit), ana
    answers, the agent asks for a command: four mails after ana's first."""
    api = people
    small = await upload(api, "notes.bin", SMALL, "application/octet-stream")
    big = await upload(api, "big.bin", BIG, "application/octet-stream")
    one = await reply(api, thread["first"], cc=["bob@/srv/shop"], attachment_ids=[small, big])
    r = await api.send("ana", ["agent-a@/srv/shop"], subject="Re", parent_mail_id=one["id"])
    assert r.status_code == 201, r.text
    two = r.json()
    three = await reply(api, two["id"])
    r = await api.http.post(
        "/api/v1/agent/permissions",
        json={"session_id": thread["sid"], "relay_key": uuid.uuid4().hex, "tool_name": "Bash",
              "tool_input": {"command": SECRET_CMD}},
        headers=api.auth("agent-a"),
    )  # fmt: skip
    assert r.status_code == 201, r.text
    mailed = await relay.wait_async(4)  # ana and bob the first answer, ana the second, the request
    return {
        **thread,
        "ids": [thread["first"], one["id"], two["id"], three["id"]],
        "parents": {one["id"]: thread["first"], two["id"]: one["id"], three["id"]: two["id"]},
        "mailed": {(m.rcpt_tos[0], m.message["Message-ID"]): m for m in mailed},
        "one": one["id"],
        "small": small,
    }


@pytest.mark.parametrize("settings", [LIMIT], indirect=True)
async def test_the_export_reads_back_with_the_threading_of_the_e_mails_sent(
    people: Api, exported: dict[str, Any], tmp_path: Path
) -> None:
    api = people
    r = await api.http.get(export_path(exported["sid"]), headers=api.auth("ana"))
    assert r.status_code == 200, r.text
    assert r.headers["content-type"] == "application/mbox"
    assert "attachment" in r.headers["content-disposition"]
    messages = read_mbox(r.content, tmp_path)
    # Every mail of the session, oldest first: the four plus the request's own mail.
    ids = [m["Message-ID"] for m in messages]
    assert len(messages) == 5, ids
    assert ids[:4] == [f"<mail.{i}@{DOMAIN}>" for i in exported["ids"]]
    root = f"<session.{exported['sid']}@{DOMAIN}>"
    by_id = {m["Message-ID"]: m for m in messages}
    assert by_id[ids[0]]["In-Reply-To"] == root and by_id[ids[0]]["References"] == root
    for child, parent in exported["parents"].items():
        msg = by_id[f"<mail.{child}@{DOMAIN}>"]
        assert msg["In-Reply-To"] == f"<mail.{parent}@{DOMAIN}>"
        refs = msg["References"].split()
        assert refs[0] == root and refs[-1] == f"<mail.{parent}@{DOMAIN}>"
    # The e-mails sent carry exactly these headers (plus each copy's reply token).
    mid = f"<mail.{exported['one']}@{DOMAIN}>"
    sent = exported["mailed"][("ana@example.org", mid)].message
    mine = by_id[mid]
    for header in ("Message-ID", "In-Reply-To", "Subject", "Date", "From"):
        assert mine[header] == sent[header], header
    assert sent["References"].split()[:-1] == mine["References"].split()
    assert mine["Reply-To"] is None  # no token in an export
    # Attachments as MIME parts, byte for byte, the one too big for e-mail too.
    parts = [(p.get_filename(), p.get_content()) for p in mine.iter_attachments()]
    assert parts == [("notes.bin", SMALL), ("big.bin", BIG)]
    # The request, in full for ana (a decider of the session).
    request = messages[4].get_body(("plain",))
    assert request is not None and SECRET_CMD in request.get_content()


async def test_who_may_export(people: Api, exported: dict[str, Any], tmp_path: Path) -> None:
    """The read rule, from every side: anonymous 401, an agent key 403 (a
    person's route), a person outside the session 404 (as the session itself),
    a participant and an admin 200; an unknown session 404, a bad format 400."""
    api = people
    path = export_path(exported["sid"])
    assert (await api.http.get(path)).status_code == 401
    r = await api.http.get(path, headers=api.auth("agent-a"))
    assert r.status_code == 403, r.text
    r = await api.http.get(path, headers=api.auth("carol"))
    assert r.status_code == 404, r.text
    r = await api.http.get(export_path(str(uuid.uuid4())), headers=api.auth("ana"))
    assert r.status_code == 404, r.text
    r = await api.http.get(path, params={"format": "zip"}, headers=api.auth("ana"))
    assert r.status_code == 400 and r.json()["error"]["field"] == "format", r.text
    for who in ("bob", "admin"):
        r = await api.http.get(path, headers=api.auth(who))
        assert r.status_code == 200, (who, r.text)
        assert len(read_mbox(r.content, tmp_path)) == 5
    # bob takes part but decides nothing: the request's input is not in his copy.
    r = await api.http.get(path, headers=api.auth("bob"))
    assert SECRET_CMD.encode() not in r.content
    assert b"Only the session's deciders see what it asked for" in r.content.replace(b"=\r\n", b"")


async def test_two_exports_are_the_same_bytes(
    people: Api, exported: dict[str, Any], tmp_path: Path
) -> None:
    """Message-IDs, dates and boundaries depend on the mails and mail_from only."""
    api = people
    a = await api.http.get(export_path(exported["sid"]), headers=api.auth("ana"))
    b = await api.http.get(export_path(exported["sid"]), headers=api.auth("ana"))
    first, second = read_mbox(a.content, tmp_path), read_mbox(b.content, tmp_path)
    assert [m["Message-ID"] for m in first] == [m["Message-ID"] for m in second]
    assert a.content == b.content  # the same bytes: no time of export in them
    assert gateway_of(api).settings.mail_from == MAIL_FROM
