"""One-click links in request e-mails (docs/email.md, "One-click links"),
in-process over a real SMTP relay: the links come out of the e-mail the relay
received; their page decides nothing; its POST decides once, as the link's
person, channel `email`; a link is bound to its request and, with
email_links_require_login, to its person's web session."""

from __future__ import annotations

import re
import uuid
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from datetime import timedelta
from pathlib import Path
from typing import Any

import httpx
import pytest
from sqlalchemy import select, update

from mailui4agents.db.reach_tables import EmailTokenRow
from mailui4agents.db.tables import PermissionRow
from mailui4agents.db.types import utcnow
from mailui4agents.services import email_tokens
from mailui4agents.settings import Settings
from tests.conftest import USER_PASSWORD, Api, make_settings
from tests.email.conftest import MAIL_FROM, gateway_of, link_token
from tests.fakes.smtp_relay import Relay

pytestmark = pytest.mark.anyio

BASE = "http://gw"
SAME = {"Origin": BASE, "Sec-Fetch-Site": "same-origin"}
LINKS = re.compile(r"^(Approve|Deny \(with a note\)|Open): (\S+)\r?$", re.M)


@pytest.fixture
def settings(
    tmp_path: Path, db_backend: str, request: pytest.FixtureRequest, relay: Relay
) -> Settings:
    extra = getattr(request, "param", {})
    return make_settings(
        request,
        tmp_path,
        db_backend,
        smtp_url=relay.url,
        mail_from=MAIL_FROM,
        public_url=BASE,
        email_retry_base_s=0.05,
        email_poll_s=0.5,
        **extra,
    )


@pytest.fixture
async def sid(people: Api, relay: Relay) -> str:
    """A session of agent-a that ana owns, bob decides in too; ana's address
    is verified (its mail received), bob has none."""
    api = people
    r = await api.http.post(
        "/api/v1/me/emails", json={"address": "ana@example.org"}, headers=api.auth("ana")
    )
    assert r.status_code == 201, r.text
    [mail] = await relay.wait_async(1)
    body = mail.message.get_body(("plain",))
    assert body is not None
    assert (
        await api.http.post(f"/verify-email/{link_token(body.get_content())}")
    ).status_code == 200
    r = await api.send("ana", ["agent-a@/srv/shop.new"], subject="fix the login")
    assert r.status_code == 201, r.text
    session: str = r.json()["session_id"]
    r = await api.http.post(
        f"/api/v1/sessions/{session}/deciders", json={"name": "bob"}, headers=api.auth("ana")
    )
    assert r.status_code in (200, 201), r.text
    relay.messages.clear()
    return session


async def ask(api: Api, session: str, **body: Any) -> str:
    body = body or {"tool_name": "Bash", "tool_input": {"command": "make deploy"}}
    r = await api.http.post(
        "/api/v1/agent/permissions",
        json={"session_id": session, "relay_key": uuid.uuid4().hex, **body},
        headers=api.auth("agent-a"),
    )
    assert r.status_code == 201, r.text
    rid: str = r.json()["id"]
    return rid


async def links_of(relay: Relay, n: int) -> dict[str, str]:
    """The labelled links of the n-th request e-mail (1-based) the relay got,
    checked to be the same in its text and HTML."""
    got = (await relay.wait_async(n))[n - 1]
    plain, rich = got.message.get_body(("plain",)), got.message.get_body(("html",))
    assert plain is not None and rich is not None
    found = dict(LINKS.findall(plain.get_content()))
    for label, url in found.items():
        assert f'<a href="{url}" rel="noopener noreferrer">{label}</a>' in rich.get_content()
    return found


async def links_for(relay: Relay, rid: str, sent: int) -> dict[str, str]:
    """The links of request `rid`'s e-mail, once the relay got `sent`: e-mails of
    requests asked together are sent concurrently, in no set order."""
    for n in range(1, sent + 1):
        links = await links_of(relay, n)
        if links["Open"] == f"{BASE}/approvals#req-{rid}":
            return links
    raise AssertionError(f"no e-mail of request {rid} among the first {sent}")


async def status_of(api: Api, rid: str) -> dict[str, Any]:
    r = await api.http.get(f"/api/v1/agent/permissions/{rid}", headers=api.auth("agent-a"))
    assert r.status_code == 200, r.text
    body: dict[str, Any] = r.json()
    return body


async def used_tokens(api: Api, rid: str) -> list[str]:
    async with gateway_of(api).read() as s:
        return list(
            await s.scalars(
                select(EmailTokenRow.kind).where(
                    EmailTokenRow.request_id == rid, EmailTokenRow.used_at.is_not(None)
                )
            )
        )


@asynccontextmanager
async def browser(api: Api, login: str | None = None) -> AsyncIterator[httpx.AsyncClient]:
    """A browser of its own (its own cookies), logged in on the web form as `login`."""
    async with httpx.AsyncClient(transport=api.http._transport, base_url=BASE) as http:
        if login is not None:
            page = await http.get("/login")
            csrf = re.search(r'name="csrf" value="([^"]+)"', page.text)
            assert csrf
            r = await http.post(
                "/login",
                data={"username": login, "password": USER_PASSWORD, "csrf": csrf.group(1)},
            )
            assert r.status_code == 303, r.text
        yield http


def form_of(page: httpx.Response) -> dict[str, str]:
    """The hidden fields of the link page's one form."""
    assert page.status_code == 200, page.text
    return dict(re.findall(r'<input type="hidden" name="(\w+)" value="([^"]*)">', page.text))


async def open_and_press(
    http: httpx.AsyncClient, url: str, **extra: str
) -> tuple[httpx.Response, httpx.Response]:
    page = await http.get(url)
    fields = {k: v for k, v in form_of(page).items() if k in ("csrf", "request")}
    return page, await http.post(url, data={**fields, **extra}, headers=SAME)


async def test_a_request_mail_links_approve_deny_and_open(
    people: Api, relay: Relay, sid: str
) -> None:
    rid = await ask(people, sid)
    links = await links_of(relay, 1)
    assert set(links) == {"Approve", "Deny (with a note)", "Open"}
    assert links["Open"] == f"{BASE}/approvals#req-{rid}"
    approve, deny = links["Approve"], links["Deny (with a note)"]
    assert approve.startswith(f"{BASE}/email/decide/") and deny.startswith(f"{BASE}/email/decide/")
    assert approve != deny
    # A question gets no one-click links, only Open: its options are answered
    # on the web or by a reply.
    qid = await ask(
        people, sid, kind="question", question="which db?", options=[{"label": "staging"}]
    )
    assert await links_of(relay, 2) == {"Open": f"{BASE}/approvals#req-{qid}"}


async def test_get_decides_nothing_and_the_post_decides_once_as_its_person(
    people: Api, relay: Relay, sid: str
) -> None:
    api = people
    rid = await ask(api, sid, tool_name="Bash", tool_input={"command": "make deploy"})
    url = (await links_of(relay, 1))["Approve"]
    async with browser(api) as scanner:
        for _ in range(3):  # a mail scanner, a preview, the person: each GET changes nothing
            page = await scanner.get(url)
            assert page.status_code == 200, page.text
    assert page.headers["referrer-policy"] == "no-referrer"
    assert "make deploy" in page.text and "Bash from agent-a" in page.text
    assert page.text.count("<button") == 1  # one button, Approve (no login: no Log out)
    assert (await status_of(api, rid))["status"] == "pending"
    assert await used_tokens(api, rid) == []

    async with browser(api) as ana:
        mine, done = await open_and_press(ana, url)
        assert done.status_code == 200, done.text
        assert "Approved" in done.text
        got = await status_of(api, rid)
        assert got["status"] == "approved" and got["decided_by"] == "ana"
        assert got["decided_via"] == {"channel": "email"}
        assert await used_tokens(api, rid) == ["approve"]
        # The same token again: refused, nothing changes.
        again = await ana.post(url, data=form_of(mine), headers=SAME)
        assert again.status_code == 410, again.text
        assert "used already" in again.text
    assert (await status_of(api, rid))["decided_by"] == "ana"
    r = await api.http.get(f"/api/v1/permissions/{rid}/deliveries", headers=api.auth("ana"))
    decided = [d for d in r.json() if d["state"] == "decided"]
    assert decided and decided[0]["channel"] == "email", r.json()


async def test_the_deny_link_denies_with_the_note(people: Api, relay: Relay, sid: str) -> None:
    rid = await ask(people, sid)
    url = (await links_of(relay, 1))["Deny (with a note)"]
    async with browser(people) as ana:
        page, done = await open_and_press(ana, url, note="use the staging db")
        assert '<textarea id="note" name="note"' in page.text
        assert done.status_code == 200, done.text
    got = await status_of(people, rid)
    assert got["status"] == "denied" and got["note"] == "use the staging db"
    assert got["decided_by"] == "ana" and got["decided_via"] == {"channel": "email"}


async def test_a_link_decides_its_own_request_only(people: Api, relay: Relay, sid: str) -> None:
    a = await ask(people, sid)
    b = await ask(people, sid)
    link_a = (await links_for(relay, a, 2))["Approve"]
    async with browser(people) as ana:
        page = await ana.get(link_a)
        fields = form_of(page)
        assert fields["request"] == a
        r = await ana.post(link_a, data={**fields, "request": b}, headers=SAME)
        assert r.status_code == 400, r.text
        assert "another request" in r.text
    assert (await status_of(people, a))["status"] == "pending"
    assert (await status_of(people, b))["status"] == "pending"
    assert await used_tokens(people, a) == []


async def test_the_post_must_come_from_the_links_own_page(
    people: Api, relay: Relay, sid: str
) -> None:
    rid = await ask(people, sid)
    url = (await links_of(relay, 1))["Approve"]
    async with browser(people) as ana:
        fields = form_of(await ana.get(url))
        for headers, data in (
            ({"Sec-Fetch-Site": "cross-site"}, fields),
            ({"Origin": "https://evil.example"}, fields),
            (SAME, {"request": rid}),  # no CSRF token
            (SAME, {**fields, "csrf": "x" * 43}),
        ):
            r = await ana.post(url, data=data, headers=headers)
            assert r.status_code == 403, (headers, r.text)
    async with browser(people) as other:  # a browser without the page's cookie
        r = await other.post(url, data=fields, headers=SAME)
        assert r.status_code == 403, r.text
    assert (await status_of(people, rid))["status"] == "pending"
    assert await used_tokens(people, rid) == []


async def test_unknown_expired_and_decided_links(people: Api, relay: Relay, sid: str) -> None:
    api = people
    async with browser(api) as ana:
        unknown = await ana.get(f"{BASE}/email/decide/{'a' * 32}")
        assert unknown.status_code == 404 and "not valid" in unknown.text
        assert "<form" not in unknown.text.split("</header>")[-1]

        # Decided by someone else first: the page says by whom.
        rid = await ask(api, sid)
        url = (await links_of(relay, 1))["Approve"]
        fields = form_of(await ana.get(url))
        r = await api.http.post(
            f"/api/v1/permissions/{rid}/decision",
            json={"decision": "deny", "note": "not now"},
            headers=api.auth("bob"),
        )
        assert r.status_code == 200, r.text
        for seen in (await ana.get(url), await ana.post(url, data=fields, headers=SAME)):
            assert seen.status_code == 409, seen.text
            assert "already decided by bob" in seen.text
            assert "make deploy" not in seen.text
        assert (await status_of(api, rid))["decided_by"] == "bob"

        # Its request past its deadline: the link expired with it.
        late = await ask(api, sid)
        url = (await links_of(relay, 2))["Approve"]
        fields = form_of(await ana.get(url))
        past = utcnow() - timedelta(seconds=1)
        async with gateway_of(api).write() as s:
            await s.execute(update(PermissionRow).where(PermissionRow.id == late).values(
                expires_at=past))  # fmt: skip
            await s.execute(update(EmailTokenRow).where(EmailTokenRow.request_id == late).values(
                expires_at=past))  # fmt: skip
        page = await ana.get(url)
        assert page.status_code == 410 and "expired" in page.text, page.text
        assert "make deploy" not in page.text
        r = await ana.post(url, data=fields, headers=SAME)
        assert r.status_code in (409, 410), r.text
        assert (await status_of(api, late))["status"] != "approved"

        # The address it was mailed to removed since: its links are dead.
        gone = await ask(api, sid)
        url = (await links_of(relay, 3))["Approve"]
        fields = form_of(await ana.get(url))
        listed = await api.http.get("/api/v1/me/emails", headers=api.auth("ana"))
        [address] = listed.json()["items"]
        r = await api.http.delete(f"/api/v1/me/emails/{address['id']}", headers=api.auth("ana"))
        assert r.status_code == 200, r.text
        r = await ana.post(url, data=fields, headers=SAME)
        assert r.status_code == 410 and "removed" in r.text, r.text
        assert (await status_of(api, gone))["status"] == "pending"


REQUIRE = [{"email_links_require_login": True}]


@pytest.mark.parametrize("settings", REQUIRE, indirect=True)
async def test_require_login_decides_only_for_the_links_own_person(
    people: Api, relay: Relay, sid: str
) -> None:
    api = people
    rid = await ask(api, sid)
    url = (await links_of(relay, 1))["Approve"]
    path = url.removeprefix(BASE)

    async with browser(api) as anonymous:  # no web session: a login prompt, then back
        page = await anonymous.get(url)
        assert page.status_code == 401, page.text
        assert "make deploy" not in page.text
        assert f'href="/login?next={path.replace("/", "%2F")}"' in page.text
        r = await anonymous.post(url, data={"request": rid}, headers=SAME)
        assert r.status_code == 303
        assert r.headers["location"] == f"/login?next={path.replace('/', '%2F')}"

    async with browser(api, "bob") as bob:  # another person's session: refused
        page = await bob.get(url)
        assert page.status_code == 403 and "another person" in page.text, page.text
        assert "make deploy" not in page.text
        mine = await bob.get("/notifications")
        csrf = re.search(r'<meta name="csrf-token" content="([^"]+)"', mine.text)
        assert csrf
        r = await bob.post(url, data={"csrf": csrf.group(1), "request": rid}, headers=SAME)
        assert r.status_code == 403 and "another person" in r.text, r.text
    assert (await status_of(api, rid))["status"] == "pending"
    assert await used_tokens(api, rid) == []

    async with browser(api, "ana") as ana:  # the link's own person: decides
        _, done = await open_and_press(ana, url)
        assert done.status_code == 200, done.text
    got = await status_of(api, rid)
    assert got["status"] == "approved" and got["decided_by"] == "ana"


async def test_two_uses_racing_with_one_token_one_wins(people: Api, relay: Relay, sid: str) -> None:
    """The claim is a conditional UPDATE: a use that read the token unused, after
    another use marked it, changes nothing and is told so (services/email_tokens.use)."""
    rid = await ask(people, sid)
    token = (await links_of(relay, 1))["Approve"].rsplit("/", 1)[1]
    async with gateway_of(people).write() as s:
        row = await email_tokens.find(s, token)
        assert row is not None and row.used_at is None
        await s.execute(  # the other use, committed first; `row` still says unused
            update(EmailTokenRow)
            .where(EmailTokenRow.id == row.id)
            .values(used_at=utcnow())
            .execution_options(synchronize_session=False)
        )
        assert row.used_at is None
        assert await email_tokens.use(s, row) is False
    assert await used_tokens(people, rid) == ["approve"]


@pytest.mark.parametrize("settings", [{"login_failures_per_address": 3}], indirect=True)
async def test_bad_links_count_as_failed_logins_of_the_address(
    people: Api, relay: Relay, sid: str
) -> None:
    rid = await ask(people, sid)
    good = (await links_of(relay, 1))["Approve"]
    async with browser(people) as guesser:
        assert (await guesser.get(good)).status_code == 200  # a good link costs nothing
        for _ in range(3):
            r = await guesser.get(f"{BASE}/email/decide/{'b' * 32}")
            assert r.status_code == 404
        over = await guesser.get(f"{BASE}/email/decide/{'c' * 32}")
        assert over.status_code == 429 and int(over.headers["retry-after"]) > 0, over.text
        # Over the limit the address is refused, the good link too, and nothing is decided.
        assert (await guesser.get(good)).status_code == 429
    assert (await status_of(people, rid))["status"] == "pending"
