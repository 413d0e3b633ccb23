"""The workspace aliases the admin keeps (docs/email.md, "New work by e-mail"):
a mail to `claude+shop@domain` starts a session of agent `claude` in the
workspace named `shop`. Admins set and remove them; anyone may be told the
aliases usable with an agent they may task (services/email_work.py).

An alias goes into the local part of an e-mail address, so it is lower case
letters, digits and hyphens (`ALIAS_PATTERN`); a workspace is an absolute
path, normalised as every workspace is (domain/workspaces.py)."""

from __future__ import annotations

import re

from sqlalchemy import func, select
from sqlalchemy.exc import IntegrityError
from sqlalchemy.ext.asyncio import AsyncSession

from mailui4agents.db.reach_tables import WorkspaceAliasRow
from mailui4agents.db.tables import UserRow
from mailui4agents.db.types import utcnow
from mailui4agents.domain.errors import Conflict, Forbidden, invalid_value, not_found
from mailui4agents.domain.workspaces import WorkspaceError, normalise_workspace
from mailui4agents.services.principals import Principal
from mailui4agents.wire.email import WorkspaceAliasOut

ALIAS_PATTERN = re.compile(r"[a-z0-9][a-z0-9-]{0,62}")
"""An alias: 1–63 characters, lower case, a letter or digit first (it is the part
after `+` in an e-mail address's local part, which is at most 64 characters)."""

MAX_WORKSPACE_ALIASES = 500
"""Most aliases a gateway keeps: each mail that names an unknown one is answered
with the list of those usable, and every listing reads them all."""


def _admins_only(who: Principal) -> None:
    if not (who.is_human and who.is_admin):
        raise Forbidden("admins only: workspace aliases are kept by the admin")


def check_alias(alias: str, field: str = "alias") -> str:
    """`alias` if it is one (Invalid naming `field` otherwise)."""
    if not ALIAS_PATTERN.fullmatch(alias):
        shown = alias[:80]
        raise invalid_value(
            field,
            f"'{shown}' is not a workspace alias: 1–63 characters of a-z, 0-9 and '-', "
            "a letter or digit first (it becomes part of an e-mail address, so lower case)",
        )
    return alias


def check_workspace(path: str, field: str = "workspace") -> str:
    """`path` normalised, if it is an absolute path (Invalid naming `field`)."""
    if not path.startswith("/"):
        raise invalid_value(field, f"'{path[:80]}' must be an absolute path (starting with /)")
    try:
        return normalise_workspace(path)
    except WorkspaceError as e:
        raise invalid_value(field, f"the workspace {e}") from None


def _out(row: WorkspaceAliasRow, creator: str | None) -> WorkspaceAliasOut:
    return WorkspaceAliasOut(
        alias=row.alias, workspace=row.workspace, created_by=creator, created_at=row.created_at
    )


async def list_aliases(s: AsyncSession, who: Principal) -> list[WorkspaceAliasOut]:
    """Every alias, by name (admins)."""
    _admins_only(who)
    rows = await s.execute(
        select(WorkspaceAliasRow, UserRow.username)
        .outerjoin(UserRow, UserRow.id == WorkspaceAliasRow.created_by)
        .order_by(WorkspaceAliasRow.alias)
    )
    return [_out(row, name) for row, name in rows]


async def put_alias(
    s: AsyncSession, who: Principal, alias: str, workspace: str
) -> tuple[WorkspaceAliasOut, bool]:
    """Set `alias` to `workspace` (admins): (the alias, whether it is new).
    A new one past MAX_WORKSPACE_ALIASES is a Conflict; changing one never is."""
    _admins_only(who)
    check_alias(alias)
    path = check_workspace(workspace)
    row = await s.get(WorkspaceAliasRow, alias)
    created = row is None
    if row is None:
        count = await s.scalar(select(func.count()).select_from(WorkspaceAliasRow)) or 0
        if count >= MAX_WORKSPACE_ALIASES:
            raise Conflict(
                f"there are {count} workspace aliases already; at most {MAX_WORKSPACE_ALIASES} "
                "(remove one first)",
                reason="too_many_aliases",
                limit=MAX_WORKSPACE_ALIASES,
            )
        new = WorkspaceAliasRow(alias=alias, workspace=path, created_by=who.id, created_at=utcnow())
        try:
            async with s.begin_nested():
                s.add(new)
                await s.flush()
            return _out(new, who.name), True
        except IntegrityError:  # another admin created it a moment ago (PostgreSQL)
            row = await s.get(WorkspaceAliasRow, alias, populate_existing=True)
            if row is None:  # and removed it again since: let the admin decide
                raise Conflict(
                    f"workspace alias '{alias}' changed meanwhile; try again", reason="changed"
                ) from None
            created = False
    row.workspace = path
    row.created_by = who.id
    await s.flush()
    return _out(row, who.name), created


async def remove_alias(s: AsyncSession, who: Principal, alias: str) -> None:
    """Remove `alias` (admins); NotFound if there is none. Sessions started
    through it keep their workspace."""
    _admins_only(who)
    row = await s.get(WorkspaceAliasRow, alias)
    if row is None:
        raise not_found(f"workspace alias '{alias[:80]}'", field="alias")
    await s.delete(row)
    await s.flush()


async def all_aliases(s: AsyncSession) -> dict[str, str]:
    """alias -> workspace, for new work by e-mail (its caller shows a person only
    those usable with an agent they may task)."""
    rows = await s.execute(
        select(WorkspaceAliasRow.alias, WorkspaceAliasRow.workspace).order_by(
            WorkspaceAliasRow.alias
        )
    )
    return {a: w for a, w in rows}
