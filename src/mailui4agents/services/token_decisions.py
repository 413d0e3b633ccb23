"""Deciding with a single-use token instead of a login: a notification's action
token (services/push_actions.py) and an e-mail's one-click link
(services/email_links.py). Each finds its token and its person its own way;
what follows is the same, in the caller's transaction:

1. a token used already → refused (a second tap, a second click, a replay);
2. a request no longer pending → 409 `already_decided`, saying who decided from
   where (services/permissions.already_decided);
3. a token past its deadline → refused;
4. the decision must fit the request (the caller's `choice` raises, naming the
   field, when it does not);
5. the token is claimed by a conditional UPDATE (of two racing uses of one
   token, one wins; the other is refused), then services/permission_decisions
   .decide settles the request with its own conditional UPDATE, as the token's
   person (a person who no longer decides there is refused by it).

Claim and decision share the transaction: a decision refused after the claim
rolls the claim back, so the token still works for a retry.
"""

from __future__ import annotations

from collections.abc import Awaitable, Callable
from datetime import datetime

from sqlalchemy.ext.asyncio import AsyncSession

from mailui4agents.db.tables import PermissionRow
from mailui4agents.domain.errors import DomainError
from mailui4agents.services import permission_decisions, permissions
from mailui4agents.services.permission_decisions import Choice
from mailui4agents.services.principals import Principal
from mailui4agents.wire.models import PermissionOut

USED = "was used already"
EXPIRED = "has expired"


def still_open(
    request: PermissionRow,
    *,
    used_at: datetime | None,
    expires_at: datetime,
    now: datetime,
    refused: Callable[[str], DomainError],
) -> None:
    """Steps 1 to 3: raise unless the token is unused and unexpired and its
    request still pending (a page that shows what a token would decide asks
    the same before it shows a button)."""
    if used_at is not None:
        raise refused(USED)
    if request.status != "pending":
        raise permissions.already_decided(request, now)
    if expires_at <= now:
        raise refused(EXPIRED)


async def decide_once(
    s: AsyncSession,
    person: Principal,
    request: PermissionRow,
    *,
    used_at: datetime | None,
    expires_at: datetime,
    now: datetime,
    choice: Callable[[], Choice],
    claim: Callable[[], Awaitable[bool]],
    refused: Callable[[str], DomainError],
) -> PermissionOut:
    """Decide `request` as `person` with a token (see the module text):
    `claim()` marks the token used and says whether this call did;
    `refused(why)` is the caller's refusal of a bad token ("was used already",
    "has expired")."""
    still_open(request, used_at=used_at, expires_at=expires_at, now=now, refused=refused)
    chosen = choice()
    if not await claim():
        raise refused(USED)
    return await permission_decisions.decide(s, person, request.id, chosen)
