"""One-click links in request e-mails (docs/email.md, "One-click links"):
`{public_url}/email/decide/{token}`, one to approve and one to deny, for each
person and address a request was mailed to (services/email_request.py issues
the tokens, services/email_tokens.py keeps them hashed).

`peek` says what a link would decide, for its page (web/email_links_page.py);
it writes nothing and never marks the token used, because mail scanners,
antivirus gateways and link previews fetch every link in a mail. Only `decide`,
the page's POST, decides: as the token's person, channel `email`, through
services/token_decisions.decide_once (shared with a notification's actions),
so the token is claimed by a conditional UPDATE in the decision's transaction.

A link works only while: the token is one we issued, of kind approve or deny,
unused, unexpired (it ends with its request); the address it was mailed to is
still its person's and verified (removing it kills its links, checked now, not
when the mail went out); the form names the token's own request; and, with
`email_links_require_login`, the browser is logged in to the web UI as the
token's person.
"""

from __future__ import annotations

from dataclasses import dataclass

from sqlalchemy import select
from sqlalchemy.ext.asyncio import AsyncSession

from mailui4agents.db.reach_tables import EmailAddressRow, EmailTokenRow
from mailui4agents.db.tables import PermissionRow, SessionRow, UserRow
from mailui4agents.db.types import utcnow
from mailui4agents.domain.errors import DomainError, Forbidden, invalid_value
from mailui4agents.services import email_tokens, permissions, size_limits, token_decisions
from mailui4agents.services.permission_decisions import Choice
from mailui4agents.services.principals import Principal
from mailui4agents.state import Gateway
from mailui4agents.wire.models import PermissionOut

LINK_KINDS = ("approve", "deny")
UNKNOWN = (
    "This link is not valid: agentmail did not mail it, or it was cut short. "
    "Open the request on the Approvals page instead."
)


class BadLink(DomainError):
    """The link cannot decide anything: unknown (`gone` False), or used,
    expired, or mailed to an address removed since (`gone` True). Its message
    names nothing of the request."""

    default_code = "unauthorized"

    def __init__(self, message: str, *, gone: bool = False) -> None:
        super().__init__(message)
        self.gone = gone


class LoginNeeded(DomainError):
    """`email_links_require_login` is on and the browser has no web session."""

    default_code = "unauthorized"


def _refused(why: str) -> BadLink:
    return BadLink(f"This link {why}. Open the request on the Approvals page instead.", gone=True)


@dataclass(frozen=True, slots=True)
class Link:
    """A known link's token: what it does, whose it is, the request it is about."""

    token: EmailTokenRow
    person: Principal
    request: PermissionRow
    session: SessionRow


@dataclass(frozen=True, slots=True)
class Shown:
    """What a live link's page shows: its button (`kind` approve or deny) and
    the request as the web UI shows it (its input is stored masked)."""

    kind: str
    request: PermissionOut


_HELD = (
    select(EmailTokenRow, UserRow, PermissionRow, SessionRow, EmailAddressRow)
    .join(UserRow, UserRow.id == EmailTokenRow.user_id)
    .join(PermissionRow, PermissionRow.id == EmailTokenRow.request_id)
    .join(SessionRow, SessionRow.id == PermissionRow.session_id)
    .outerjoin(EmailAddressRow, EmailAddressRow.id == EmailTokenRow.address_id)
)


async def _held(s: AsyncSession, token: str) -> Link:
    """The token's link; BadLink for anything that is not a live link's token."""
    row = await email_tokens.find(s, token)
    if row is None or row.kind not in LINK_KINDS or row.request_id is None:
        raise BadLink(UNKNOWN)
    found = (await s.execute(_HELD.where(EmailTokenRow.id == row.id))).first()
    if found is None:
        raise BadLink(UNKNOWN)
    tok, user, request, session, address = found
    if address is None or address.user_id != user.id or address.verified_at is None:
        raise _refused("was mailed to an address that has been removed since")
    person = Principal(kind="user", id=user.id, name=user.username, is_admin=bool(user.is_admin))
    return Link(tok, person, request, session)


def _ensure_person(link: Link, viewer: Principal | None, require_login: bool) -> None:
    """With email_links_require_login, only a web session of the link's own
    person may use it; without, the token alone is the credential."""
    if not require_login:
        return
    if viewer is None:
        raise LoginNeeded("log in to the web UI as the person this e-mail was sent to")
    if viewer.id != link.person.id:
        raise Forbidden(
            "this link was mailed to another person: log out, and log in as the person "
            "this e-mail was sent to"
        )


async def peek(
    s: AsyncSession, token: str, viewer: Principal | None, *, require_login: bool
) -> Shown:
    """What the link would decide, for its page; writes nothing. BadLink,
    LoginNeeded, 403 another person's session, 409 `already_decided`."""
    link = await _held(s, token)
    _ensure_person(link, viewer, require_login)
    token_decisions.still_open(
        link.request,
        used_at=link.token.used_at,
        expires_at=link.token.expires_at,
        now=utcnow(),
        refused=_refused,
    )
    if link.request.kind != "approval":
        raise _not_for_questions()
    return Shown(link.token.kind, permissions.permission_out(link.request, link.session))


def _not_for_questions() -> DomainError:
    return invalid_value(
        "token",
        "a question is answered on the Approvals page, or by a reply to its e-mail, not by a link",
    )


def _choice(link: Link, note: str | None) -> Choice:
    if link.request.kind != "approval":
        raise _not_for_questions()
    return Choice(link.token.kind, note or None, channel="email")


async def decide(
    gw: Gateway,
    token: str,
    *,
    request_id: str,
    note: str | None,
    viewer: Principal | None,
    require_login: bool,
) -> PermissionOut:
    """The link's POST: decide its request as its person, once (see the module
    text). `request_id`: the request its page showed, which must be the
    token's (400 `request` for another). BadLink, LoginNeeded, 403, 409
    `already_decided`, 400 as `peek`; a note over the limit: 413 `note`."""
    size_limits.check_decision(gw.settings, note, None, None)
    async with gw.write() as s:
        link = await _held(s, token)
        _ensure_person(link, viewer, require_login)
        if request_id != link.request.id:
            raise invalid_value(
                "request", "this link belongs to another request: use the link in its own e-mail"
            )

        async def claim() -> bool:
            return await email_tokens.use(s, link.token)

        return await token_decisions.decide_once(
            s,
            link.person,
            link.request,
            used_at=link.token.used_at,
            expires_at=link.token.expires_at,
            now=utcnow(),
            choice=lambda: _choice(link, note),
            claim=claim,
            refused=_refused,
        )
