"""Attachments: upload, download, the read boundary, and mails that carry them."""

from __future__ import annotations

import hashlib
import uuid
from pathlib import Path
from typing import Any

import httpx
import pytest

from mailui4agents.app import create_app
from mailui4agents.settings import Settings
from tests.conftest import Api, make_settings, snapshot
from tests.pg_fixtures import db_scalar

pytestmark = pytest.mark.anyio

LIMIT = 64 * 1024
REPORT = b"quarterly numbers\n" * 100


@pytest.fixture
def settings(tmp_path: Path, request: pytest.FixtureRequest) -> Settings:
    return make_settings(request, tmp_path, "sqlite", attachment_max_bytes=LIMIT)


def is_human(api: Api, who: str) -> bool:
    return api.tokens[who].startswith("am_user_")


def route(api: Api, who: str) -> str:
    return "/api/v1/attachments" if is_human(api, who) else "/api/v1/agent/attachments"


async def upload(
    api: Api, who: str, content: bytes, name: str = "report.txt", ctype: str = "text/plain"
) -> httpx.Response:
    return await api.http.post(
        route(api, who), files={"file": (name, content, ctype)}, headers=api.auth(who)
    )


async def upload_id(api: Api, who: str, content: bytes, name: str = "report.txt") -> str:
    r = await upload(api, who, content, name)
    assert r.status_code == 201, r.text
    return str(r.json()["attachment_id"])


async def upload_raw(api: Api, who: str, disposition: bytes, headers: bytes = b"") -> Any:
    """A hand-made multipart body, for what httpx would escape (control characters)."""
    body = (
        b"--XyZ\r\nContent-Disposition: form-data; " + disposition + b"\r\n" + headers
        + b"\r\nhello\r\n--XyZ--\r\n"
    )  # fmt: skip
    return await api.http.post(
        route(api, who),
        content=body,
        headers={**api.auth(who), "Content-Type": "multipart/form-data; boundary=XyZ"},
    )


async def download(
    api: Api, who: str, attachment_id: str, session_id: str | None = None
) -> httpx.Response:
    params = {"session_id": session_id} if session_id else {}
    return await api.http.get(
        f"{route(api, who)}/{attachment_id}", params=params, headers=api.auth(who)
    )


def error(r: httpx.Response) -> dict[str, Any]:
    return dict(r.json()["error"])


def blob_files(settings: Settings) -> list[Path]:
    root = settings.data_dir / "blobs"
    return [p for p in root.rglob("*") if p.is_file()] if root.exists() else []


def db_count(settings: Settings, sql: str, *args: Any) -> int:
    return int(db_scalar(settings, sql, *args))


@snapshot
async def world(api: Api) -> dict[str, Any]:
    """ana mailed claude a report in /srv/shop; claude also works in /srv/other."""
    await api.user("ana")
    await api.user("ben")
    await api.agent("claude")
    await api.agent("codex")
    report = await upload_id(api, "ana", REPORT)
    r = await api.send("ana", ["claude@/srv/shop.new"], subject="numbers", attachment_ids=[report])
    assert r.status_code == 201, r.text
    other = await api.send("ana", ["claude@/srv/other.new"], subject="elsewhere")
    assert other.status_code == 201, other.text
    mail = r.json()
    return {
        "report": report,
        "mail": mail,
        "shop": mail["session_id"],
        "other": other.json()["session_id"],
        "to_ana": f"ana@/srv/shop.{mail['session_alias']}",
    }


# --- upload and download ---


async def test_an_upload_answers_its_id_name_size_sha256_and_type_and_downloads_byte_for_byte(
    api: Api,
) -> None:
    await api.user("ana")
    r = await upload(api, "ana", REPORT, "report.txt", "text/plain")
    assert r.status_code == 201, r.text
    out = r.json()
    assert set(out) == {"attachment_id", "name", "size", "sha256", "content_type"}
    assert out["name"] == "report.txt"
    assert out["size"] == len(REPORT)
    assert out["sha256"] == hashlib.sha256(REPORT).hexdigest()
    assert out["content_type"] == "text/plain"
    got = await download(api, "ana", out["attachment_id"])
    assert got.status_code == 200
    assert got.content == REPORT
    assert got.headers["content-type"].startswith("text/plain")
    assert got.headers["content-length"] == str(len(REPORT))


async def test_an_agent_uploads_and_downloads_on_the_agent_routes(api: Api) -> None:
    await api.agent("claude")
    data = bytes(range(256)) * 10
    aid = await upload_id(api, "claude", data, "table.bin")
    got = await download(api, "claude", aid)
    assert got.status_code == 200 and got.content == data


async def test_each_kind_of_principal_keeps_to_its_own_attachment_routes(api: Api) -> None:
    await api.user("ana")
    await api.agent("claude")
    as_agent = await api.http.post(
        "/api/v1/attachments", files={"file": ("a", b"x")}, headers=api.auth("claude")
    )
    as_human = await api.http.post(
        "/api/v1/agent/attachments", files={"file": ("a", b"x")}, headers=api.auth("ana")
    )
    assert (as_agent.status_code, as_human.status_code) == (403, 403)


async def test_a_file_of_exactly_the_limit_is_accepted(api: Api, settings: Settings) -> None:
    await api.user("ana")
    r = await upload(api, "ana", b"x" * LIMIT)
    assert r.status_code == 201, r.text
    assert r.json()["size"] == LIMIT


async def test_a_file_over_the_limit_is_refused_with_413_and_leaves_nothing_on_disk(
    api: Api, settings: Settings
) -> None:
    await api.user("ana")
    r = await upload(api, "ana", b"x" * (LIMIT + 1))
    assert r.status_code == 413
    assert error(r)["code"] == "too_large"
    assert blob_files(settings) == []
    assert db_count(settings, "SELECT count(*) FROM attachments") == 0


async def test_a_body_far_over_the_limit_is_refused_before_it_is_read(
    api: Api, settings: Settings
) -> None:
    await api.user("ana")
    r = await upload(api, "ana", b"x" * (LIMIT * 3))
    assert r.status_code == 413 and error(r)["code"] == "too_large"
    assert blob_files(settings) == []


@pytest.mark.parametrize(
    ("sent", "stored"),
    [
        ("../../etc/passwd", "passwd"),
        ("a/b\\c", "c"),
        ("C:\\Users\\ana\\report.txt", "report.txt"),
        ("", "attachment"),
        ("..", "attachment"),
        ("résumé 2024.pdf", "résumé 2024.pdf"),
    ],
)
async def test_unsafe_names_are_made_safe(api: Api, sent: str, stored: str) -> None:
    await api.user("ana")
    r = await upload(api, "ana", b"data", sent)
    assert r.status_code == 201, r.text
    assert r.json()["name"] == stored


async def test_control_characters_are_stripped_from_names(api: Api) -> None:
    await api.user("ana")
    r = await upload_raw(
        api, "ana", 'name="file"; filename="ev\x00il\x1b\x7f\u202egnp.exe"'.encode()
    )
    assert r.status_code == 201, r.text
    assert r.json()["name"] == "evilgnp.exe"


async def test_a_name_longer_than_255_bytes_is_shortened_keeping_its_extension(api: Api) -> None:
    await api.user("ana")
    r = await upload(api, "ana", b"data", "ä" * 300 + ".pdf")
    name = r.json()["name"]
    assert len(name.encode()) <= 255 and name.endswith(".pdf")


async def test_a_download_is_offered_as_a_file_under_its_name_never_shown_inline(
    api: Api,
) -> None:
    await api.user("ana")
    r = await upload(api, "ana", b"<script>alert(1)</script>", "résumé.html", "text/html")
    got = await download(api, "ana", r.json()["attachment_id"])
    disposition = got.headers["content-disposition"]
    assert disposition.startswith("attachment;")
    assert "filename*=UTF-8''r%C3%A9sum%C3%A9.html" in disposition
    assert got.headers["x-content-type-options"] == "nosniff"
    assert "sandbox" in got.headers["content-security-policy"]


async def test_the_content_type_comes_from_the_upload_and_defaults_to_octet_stream(
    api: Api,
) -> None:
    await api.user("ana")
    none = await upload_raw(api, "ana", b'name="file"; filename="x"')
    bogus = await upload_raw(
        api, "ana", b'name="file"; filename="x"', b"Content-Type: not a type\r\n"
    )
    given = await upload_raw(
        api, "ana", b'name="file"; filename="x"', b"Content-Type: image/png\r\n"
    )
    assert none.json()["content_type"] == "application/octet-stream"
    assert bogus.json()["content_type"] == "application/octet-stream"
    assert given.json()["content_type"] == "image/png"


async def test_an_upload_without_a_file_part_is_refused_naming_file(api: Api) -> None:
    await api.user("ana")
    r = await api.http.post("/api/v1/attachments", json={"x": 1}, headers=api.auth("ana"))
    assert r.status_code == 400 and error(r)["field"] == "file"
    empty = await api.http.post(
        "/api/v1/attachments",
        content=b"--XyZ--\r\n",
        headers={**api.auth("ana"), "Content-Type": "multipart/form-data; boundary=XyZ"},
    )
    assert empty.status_code == 400 and error(empty)["field"] == "file"


async def test_a_malformed_multipart_body_is_refused_naming_file(
    api: Api, settings: Settings
) -> None:
    await api.user("ana")
    for boundary, body in [
        ("b" * 200, b"--" + b"b" * 200 + b"\r\n"),  # a boundary longer than RFC 2046 allows
        ("XyZ", b"--XyZ\r\nno header line here\r\n\r\ndata\r\n--XyZ--\r\n"),
    ]:
        r = await api.http.post(
            "/api/v1/attachments",
            content=body,
            headers={
                **api.auth("ana"),
                "Content-Type": f"multipart/form-data; boundary={boundary}",
            },
        )
        assert r.status_code == 400, r.text
        assert error(r)["field"] == "file"
    assert blob_files(settings) == []


async def test_an_upload_with_an_unknown_part_is_refused_naming_it(
    api: Api, settings: Settings
) -> None:
    await api.user("ana")
    r = await api.http.post(
        "/api/v1/attachments",
        data={"name": "x"},
        files={"file": ("a.txt", b"data")},
        headers=api.auth("ana"),
    )
    assert r.status_code == 400
    assert (error(r)["code"], error(r)["field"]) == ("unknown_field", "name")
    assert error(r)["accepted_fields"] == ["file"]
    assert db_count(settings, "SELECT count(*) FROM attachments") == 0


# --- who may download ---


async def test_the_recipient_may_download_from_the_mails_workspace(
    api: Api, world: dict[str, Any]
) -> None:
    got = await download(api, "claude", world["report"], session_id=world["shop"])
    assert got.status_code == 200 and got.content == REPORT


async def test_the_recipient_working_in_another_workspace_may_not_download(
    api: Api, world: dict[str, Any]
) -> None:
    got = await download(api, "claude", world["report"], session_id=world["other"])
    assert got.status_code == 404
    assert error(got)["code"] == "not_found"


async def test_an_agent_not_in_the_mails_session_may_not_download(
    api: Api, world: dict[str, Any]
) -> None:
    assert (await download(api, "codex", world["report"])).status_code == 404
    scoped = await download(api, "codex", world["report"], session_id=world["shop"])
    assert scoped.status_code == 404


async def test_a_person_not_in_the_session_may_not_download_but_the_sender_may(
    api: Api, world: dict[str, Any]
) -> None:
    assert (await download(api, "ben", world["report"])).status_code == 404
    assert (await download(api, "ana", world["report"])).content == REPORT


async def test_an_unsent_upload_is_only_for_its_uploader(api: Api, world: dict[str, Any]) -> None:
    aid = await upload_id(api, "codex", b"private draft")
    assert (await download(api, "claude", aid, session_id=world["shop"])).status_code == 404
    assert (await download(api, "ana", aid)).status_code == 404
    assert (await download(api, "codex", aid)).content == b"private draft"


async def test_an_unknown_attachment_is_not_found(api: Api, world: dict[str, Any]) -> None:
    assert (await download(api, "ana", str(uuid.uuid4()))).status_code == 404


async def test_a_download_is_recorded_as_a_read(
    api: Api, world: dict[str, Any], settings: Settings
) -> None:
    await download(api, "claude", world["report"], session_id=world["shop"])
    n = db_count(
        settings,
        "SELECT count(*) FROM read_log WHERE reader='claude' AND action='attachment' "
        "AND mail_id=? AND scope_session_id=?",
        world["mail"]["id"],
        world["shop"],
    )
    assert n == 1


# --- mails that carry attachments ---


async def test_a_mail_lists_its_attachments_in_order_wherever_it_is_shown(
    api: Api, world: dict[str, Any]
) -> None:
    second = await upload_id(api, "ana", b"appendix", "appendix.md")
    r = await api.send(
        "ana",
        [f"claude@/srv/shop.{world['mail']['session_alias']}"],
        subject="more",
        attachment_ids=[second, world["report"]],
    )
    assert r.status_code == 201, r.text
    expected = [
        {
            "attachment_id": second,
            "name": "appendix.md",
            "size": 8,
            "content_type": "text/plain",
            "sha256": hashlib.sha256(b"appendix").hexdigest(),
        },
        {
            "attachment_id": world["report"],
            "name": "report.txt",
            "size": len(REPORT),
            "content_type": "text/plain",
            "sha256": hashlib.sha256(REPORT).hexdigest(),
        },
    ]
    assert r.json()["attachments"] == expected
    mail_id, scope = r.json()["id"], {"session_id": world["shop"]}
    inbox = await api.http.get("/api/v1/agent/inbox", params=scope, headers=api.auth("claude"))
    shown = {m["id"]: m["attachments"] for m in inbox.json()["items"]}
    assert shown[mail_id] == expected
    assert shown[world["mail"]["id"]] == [expected[1]]
    read = await api.http.get(
        f"/api/v1/agent/mail/{mail_id}", params=scope, headers=api.auth("claude")
    )
    assert read.json()["attachments"] == expected
    thread = await api.http.get(f"/api/v1/mail/{mail_id}/thread", headers=api.auth("ana"))
    assert [m["attachments"] for m in thread.json()["items"]] == [[expected[1]], expected]
    elsewhere = await api.http.get(
        "/api/v1/agent/inbox", params={"session_id": world["other"]}, headers=api.auth("claude")
    )
    assert [m["attachments"] for m in elsewhere.json()["items"]] == [[]]  # none where none sent


async def test_a_send_whose_second_attachment_is_invalid_leaves_no_trace_and_frees_its_relay_key(
    api: Api, world: dict[str, Any], settings: Settings
) -> None:
    mine = await upload_id(api, "claude", b"the fix")
    mails = db_count(settings, "SELECT count(*) FROM mails")
    events = db_count(settings, "SELECT count(*) FROM events")
    sessions = db_count(settings, "SELECT count(*) FROM sessions")
    bad = await api.send(
        "claude",
        [world["to_ana"]],
        subject="done",
        relay=True,
        relay_key="rk-attach",
        attachment_ids=[mine, str(uuid.uuid4())],
    )
    assert bad.status_code == 400, bad.text
    assert (error(bad)["code"], error(bad)["field"]) == ("invalid_value", "attachment_ids[1]")
    assert db_count(settings, "SELECT count(*) FROM mails") == mails
    assert db_count(settings, "SELECT count(*) FROM events") == events
    assert db_count(settings, "SELECT count(*) FROM sessions") == sessions
    assert (
        db_count(settings, "SELECT count(*) FROM mail_attachments WHERE attachment_id=?", mine) == 0
    )

    good = await api.send(
        "claude",
        [world["to_ana"]],
        subject="done",
        relay=True,
        relay_key="rk-attach",
        attachment_ids=[mine],
    )
    assert good.status_code == 201, good.text
    assert [a["attachment_id"] for a in good.json()["attachments"]] == [mine]
    again = await api.send(
        "claude", [world["to_ana"]], subject="done", relay=True, relay_key="rk-attach"
    )
    assert again.status_code == 200 and again.json()["status"] == "duplicate_relay"


async def test_an_attachment_listed_twice_is_refused_naming_the_second(
    api: Api, world: dict[str, Any]
) -> None:
    r = await api.send(
        "ana", ["claude@/srv/shop.new"], attachment_ids=[world["report"], world["report"]]
    )
    assert r.status_code == 400
    assert (error(r)["code"], error(r)["field"]) == ("invalid_value", "attachment_ids[1]")


async def test_someone_elses_upload_cannot_be_attached(api: Api, world: dict[str, Any]) -> None:
    theirs = await upload_id(api, "codex", b"not yours")
    r = await api.send("ana", ["claude@/srv/shop.new"], attachment_ids=[theirs])
    assert r.status_code == 400
    assert (error(r)["code"], error(r)["field"]) == ("invalid_value", "attachment_ids[0]")


async def test_a_received_attachment_can_be_passed_on_from_its_workspace_only(
    api: Api, world: dict[str, Any]
) -> None:
    forward = await api.send(
        "claude",
        [world["to_ana"]],
        subject="fwd",
        attachment_ids=[world["report"]],
        from_session_id=world["shop"],
    )
    assert forward.status_code == 201, forward.text
    assert forward.json()["attachments"][0]["attachment_id"] == world["report"]
    leak = await api.send(
        "claude",
        ["codex@/srv/other.new"],
        subject="fwd",
        attachment_ids=[world["report"]],
        from_session_id=world["other"],
    )
    assert leak.status_code == 400
    assert error(leak)["field"] == "attachment_ids[0]"


async def test_a_person_who_received_an_attachment_may_attach_it_again(
    api: Api, world: dict[str, Any]
) -> None:
    await api.user("eve")
    got = await api.send("ana", ["ben@/srv/shop.new"], attachment_ids=[world["report"]])
    assert got.status_code == 201
    passed_on = await api.send("ben", ["claude@/srv/shop.new"], attachment_ids=[world["report"]])
    assert passed_on.status_code == 201, passed_on.text
    refused = await api.send("eve", ["claude@/srv/shop.new"], attachment_ids=[world["report"]])
    assert refused.status_code == 400


def test_the_attachment_routes_are_in_the_openapi_document() -> None:
    doc = create_app(Settings()).openapi()
    for method, path in [
        ("post", "/api/v1/attachments"),
        ("get", "/api/v1/attachments/{attachment_id}"),
        ("post", "/api/v1/agent/attachments"),
        ("get", "/api/v1/agent/attachments/{attachment_id}"),
    ]:
        assert method in doc["paths"].get(path, {}), f"{method.upper()} {path} missing"
    body = doc["paths"]["/api/v1/agent/attachments"]["post"]["requestBody"]["content"]
    assert "file" in body["multipart/form-data"]["schema"]["properties"]
