"""Rules before the human (docs/rules.md): which rules apply to a request, and
who may list, add, switch and remove them.

Who may write which rule (docs/rules.md, "Who writes rules"):

- a **session** rule: the session's owners and deciders (those who would
  decide its requests anyway, `access.Reader.ensure_decide`);
- a **workspace** rule: the workspace's owners — the owners of an agent whose
  workspace roots (domain/roots.py) cover the workspace: they are the ones who
  let an agent work there — and admins;
- a **global** rule, and the switches of the built-in rules: admins only.

An allow rule of a session or a workspace applies only in sessions where its
author decides (an owner of one agent rooted in `/srv/*` cannot wave through
the requests of a session decided by someone else); deny and ask rules only
take power away and apply to every session of their scope. Agents reach none
of this: every route is a person's (api/deps.Human).
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence

from sqlalchemy import and_, bindparam, delete, func, or_, select
from sqlalchemy.ext.asyncio import AsyncSession

from mailui4agents.db.base import new_id
from mailui4agents.db.rule_tables import BuiltinRuleSwitchRow, RuleFileRow, RuleRow
from mailui4agents.db.tables import AgentOwnerRow, AgentRow, SessionRow
from mailui4agents.db.types import utcnow
from mailui4agents.domain import roots
from mailui4agents.domain.errors import Conflict, Missing, forbidden, invalid_value, not_found
from mailui4agents.domain.grants import GrantRule, covers
from mailui4agents.domain.modes import mode_for_deciding
from mailui4agents.domain.rules import (
    BUILTIN_IDS,
    BUILTINS,
    EFFECTS,
    MAX_PATTERN,
    MAX_REASON,
    MAX_RULES_PER_AUTHOR,
    MAX_TOOL,
    SCOPES,
    Builtin,
    Decision,
    Rule,
    builtin_matches,
    decide,
    grant_rule_of,
)
from mailui4agents.domain.rules_file import RuleFileError, sha256_of
from mailui4agents.domain.rules_file import parse as parse_rules_file
from mailui4agents.domain.workspaces import WorkspaceError, normalise_workspace
from mailui4agents.services import access
from mailui4agents.services.principals import Principal
from mailui4agents.services.session_summary import get_session
from mailui4agents.wire.rules import RuleFileOut, RuleOut

# --- the decision ----------------------------------------------------------------

# Whether any enabled rule could apply to a request of this session and tool
# (a column of permission_requests._ASKING, correlated with its session row):
# the rules are read only then.
HAS_RULES = (
    select(RuleRow.id)
    .where(
        RuleRow.enabled.is_(True),
        RuleRow.tool_name == bindparam("b_tool"),
        or_(
            RuleRow.scope == "global",
            RuleRow.session_id == SessionRow.id,
            and_(RuleRow.scope == "workspace", RuleRow.workspace == SessionRow.workspace),
        ),
    )
    .exists()
)


async def _applicable(
    s: AsyncSession,
    session: SessionRow,
    tool_name: str,
    deciders: Sequence[str],
    file_sha256: str | None,
) -> list[Rule]:
    rows = (
        await s.scalars(
            select(RuleRow)
            .where(
                RuleRow.enabled.is_(True),
                RuleRow.tool_name == tool_name,
                or_(
                    RuleRow.scope == "global",
                    and_(RuleRow.scope == "session", RuleRow.session_id == session.id),
                    and_(RuleRow.scope == "workspace", RuleRow.workspace == session.workspace),
                ),
            )
            .order_by(RuleRow.created_at, RuleRow.id)
        )
    ).all()
    out = []
    for r in rows:
        if r.effect == "allow":
            if r.scope != "global" and r.author not in deciders:
                continue  # an allow rule works only where its author decides
            if r.source == "file" and (file_sha256 is None or r.file_sha256 != file_sha256):
                continue  # the file changed since it was accepted (docs/rules.md)
        out.append(Rule(r.id, r.effect, r.tool_name, r.pattern, r.reason))  # type: ignore[arg-type]
    return out


async def decision(
    s: AsyncSession,
    session: SessionRow,
    tool_name: str,
    tool_input: Mapping[str, object],
    *,
    deciders: Sequence[str],
    has_rules: bool,
    grants: Sequence[tuple[str, GrantRule]],
    file_sha256: str | None,
) -> Decision:
    """The order of docs/rules.md for one approval of this session. Reads the
    rules only when `has_rules` (HAS_RULES), the built-in switches only when a
    built-in rule matches."""
    workspace = session.workspace or ""
    on: set[str] = set(BUILTIN_IDS)
    hits = [b.id for b in BUILTINS if builtin_matches(b.id, tool_name, tool_input, workspace)]
    if hits:
        off = await s.scalars(
            select(BuiltinRuleSwitchRow.id).where(
                BuiltinRuleSwitchRow.id.in_(hits), BuiltinRuleSwitchRow.enabled.is_(False)
            )
        )
        on -= set(off)
    rules = await _applicable(s, session, tool_name, deciders, file_sha256) if has_rules else []
    return decide(
        tool_name=tool_name,
        tool_input=tool_input,
        mode=mode_for_deciding(session.permission_mode),
        workspace=workspace,
        rules=rules,
        grants=grants,
        builtins_on=on,
    )


# --- shapes ------------------------------------------------------------------------


def rule_out(r: RuleRow) -> RuleOut:
    return RuleOut(
        id=r.id,
        effect=r.effect,
        tool_name=r.tool_name,
        pattern=r.pattern,
        scope=r.scope,
        session_id=r.session_id,
        workspace=r.workspace,
        author=r.author,
        reason=r.reason,
        enabled=r.enabled,
        builtin=False,
        source=r.source,
        covers=covers(grant_rule_of(Rule(r.id, "deny", r.tool_name, r.pattern))),
        created_at=r.created_at,
    )


def builtin_out(b: Builtin, enabled: bool) -> RuleOut:
    return RuleOut(
        id=b.id,
        effect="deny",
        tool_name="shell commands (and file tools, for start-up files)",
        pattern=None,
        scope="global",
        author="built-in",
        reason=b.reason,
        enabled=enabled,
        builtin=True,
        source="builtin",
        covers=b.title,
    )


async def builtin_switches(s: AsyncSession) -> dict[str, bool]:
    rows = (await s.execute(select(BuiltinRuleSwitchRow.id, BuiltinRuleSwitchRow.enabled))).all()
    return {str(i): bool(e) for i, e in rows}


# --- who owns a workspace --------------------------------------------------------------


async def owned_roots(s: AsyncSession, name: str) -> list[str]:
    """The workspace roots of every agent `name` owns."""
    rows = await s.scalars(
        select(AgentRow.workspace_roots)
        .join(AgentOwnerRow, AgentOwnerRow.agent_id == AgentRow.id)
        .where(AgentOwnerRow.username == name)
    )
    return [root for agent_roots in rows for root in (agent_roots or [])]


async def owns_workspace(s: AsyncSession, who: Principal, workspace: str) -> bool:
    """An admin, or an owner of an agent whose roots cover `workspace`."""
    if not who.is_human:
        return False
    if who.is_admin:
        return True
    return roots.allowed(await owned_roots(s, who.name), workspace)


def _workspace(value: str | None) -> str:
    if not value:
        raise Missing("workspace", "a workspace rule names its workspace (an absolute path)")
    try:
        ws = normalise_workspace(value)
    except WorkspaceError as e:
        raise invalid_value("workspace", f"workspace {e}") from None
    if not ws.startswith("/"):
        raise invalid_value("workspace", "the workspace must be an absolute path")
    return ws


# --- listing -----------------------------------------------------------------------


async def list_rules(
    s: AsyncSession,
    who: Principal,
    *,
    session_id: str | None = None,
    workspace: str | None = None,
) -> list[RuleOut]:
    """The built-in rules, then the rules `who` may see: admins all; others the
    global ones, their own, those of sessions they read and those of
    workspaces they own."""
    stmt = select(RuleRow).order_by(RuleRow.created_at, RuleRow.id)
    if session_id is not None:
        stmt = stmt.where(RuleRow.session_id == session_id)
    if workspace is not None:
        stmt = stmt.where(RuleRow.workspace == _workspace(workspace))
    if not who.is_admin:
        stmt = stmt.where(
            or_(
                RuleRow.scope == "global",
                RuleRow.author == who.name,
                RuleRow.session_id.in_(access.Reader(who).readable_ids()),
                RuleRow.scope == "workspace",  # filtered below by ownership
            )
        )
    rows = (await s.scalars(stmt)).all()
    mine = await owned_roots(s, who.name) if not who.is_admin else []
    out = [
        rule_out(r)
        for r in rows
        if who.is_admin
        or r.scope != "workspace"
        or r.author == who.name
        or roots.allowed(mine, r.workspace or "")
    ]
    if session_id is None and workspace is None:
        switches = await builtin_switches(s)
        out = [builtin_out(b, switches.get(b.id, True)) for b in BUILTINS] + out
    return out


# --- writing -------------------------------------------------------------------------


def _check_text(tool_name: str, pattern: str | None, reason: str | None) -> None:
    if not tool_name.strip():
        raise Missing("tool_name", "a rule names its tool (e.g. Bash, Write)")
    if len(tool_name) > MAX_TOOL:
        raise invalid_value("tool_name", f"tool_name is at most {MAX_TOOL} characters")
    if pattern is not None:
        if not pattern.strip():
            raise invalid_value("pattern", "a blank pattern; omit it (or give *) for every input")
        if len(pattern) > MAX_PATTERN:
            raise invalid_value("pattern", f"pattern is at most {MAX_PATTERN} characters")
    if reason is not None and len(reason) > MAX_REASON:
        raise invalid_value("reason", f"reason is at most {MAX_REASON} characters")


async def add_rule(
    s: AsyncSession,
    who: Principal,
    *,
    effect: str,
    tool_name: str,
    pattern: str | None,
    scope: str,
    session_id: str | None,
    workspace: str | None,
    reason: str | None,
) -> RuleOut:
    if not who.is_human:
        raise forbidden("only people write rules")
    if effect not in EFFECTS:
        raise invalid_value("effect", "effect is one of allow, deny, ask")
    if scope not in SCOPES:
        raise invalid_value("scope", "scope is one of session, workspace, global")
    _check_text(tool_name, pattern, reason)
    ws: str | None = None
    if scope == "session":
        if not session_id:
            raise Missing("session_id", "a session rule names its session")
        if workspace is not None:
            raise invalid_value("workspace", "a session rule has no workspace")
        session = await get_session(s, session_id)
        await access.Reader(who).ensure_decide(s, session, f"session '{session_id}'")
    elif scope == "workspace":
        if session_id is not None:
            raise invalid_value("session_id", "a workspace rule has no session")
        ws = _workspace(workspace)
        if not await owns_workspace(s, who, ws):
            raise forbidden(
                f"only the workspace's owners (owners of an agent whose workspace roots "
                f"cover {ws}) and admins write rules for it"
            )
    else:
        if session_id is not None or workspace is not None:
            field = "session_id" if session_id is not None else "workspace"
            raise invalid_value(field, "a global rule has no session or workspace")
        if not who.is_admin:
            raise forbidden("only admins write global rules")
    count = await s.scalar(select(func.count(RuleRow.id)).where(RuleRow.author == who.name))
    if (count or 0) >= MAX_RULES_PER_AUTHOR:
        raise Conflict(
            f"you have {MAX_RULES_PER_AUTHOR} rules already; remove some first",
            reason="too_many_rules",
        )
    row = RuleRow(
        id=new_id(),
        effect=effect,
        tool_name=tool_name.strip(),
        pattern=pattern,
        scope=scope,
        session_id=session_id if scope == "session" else None,
        workspace=ws,
        author=who.name,
        reason=reason,
        enabled=True,
        source="api",
        file_sha256=None,
        created_at=utcnow(),
    )
    s.add(row)
    await s.flush()
    return rule_out(row)


async def _own_rule(s: AsyncSession, who: Principal, rule_id: str) -> RuleRow:
    """The rule, for its author or an admin. Whoever may see it otherwise gets
    403; whoever may not, 404."""
    row = await s.get(RuleRow, rule_id)
    if row is None:
        raise not_found(f"rule '{rule_id}'")
    if who.is_admin or row.author == who.name:
        return row
    if row.scope == "global":
        visible = True
    elif row.scope == "session" and row.session_id is not None:
        session = await s.get(SessionRow, row.session_id)
        visible = session is not None and await access.Reader(who).can_read(s, session)
    else:
        visible = roots.allowed(await owned_roots(s, who.name), row.workspace or "")
    if visible:
        raise forbidden("only the rule's author or an admin changes it")
    raise not_found(f"rule '{rule_id}'")


async def remove_rule(s: AsyncSession, who: Principal, rule_id: str) -> RuleOut:
    if rule_id in BUILTIN_IDS:
        raise Conflict(
            "a built-in rule cannot be removed; an admin switches it off", reason="builtin"
        )
    row = await _own_rule(s, who, rule_id)
    if row.source == "file":
        raise Conflict(
            "this rule comes from an accepted .agentmail/rules.toml: change the file and "
            "accept it again",
            reason="from_file",
        )
    out = rule_out(row)
    await s.delete(row)
    await s.flush()
    return out


async def set_enabled(s: AsyncSession, who: Principal, rule_id: str, *, enabled: bool) -> RuleOut:
    if rule_id in BUILTIN_IDS:
        if not who.is_admin:
            raise forbidden("only admins switch built-in rules")
        switch = await s.get(BuiltinRuleSwitchRow, rule_id)
        if switch is None:
            s.add(BuiltinRuleSwitchRow(id=rule_id, enabled=enabled, changed_by=who.name))
        else:
            switch.enabled, switch.changed_by, switch.changed_at = enabled, who.name, utcnow()
        await s.flush()
        [b] = [b for b in BUILTINS if b.id == rule_id]
        return builtin_out(b, enabled)
    row = await _own_rule(s, who, rule_id)
    row.enabled = enabled
    await s.flush()
    return rule_out(row)


# --- the rule file (docs/rules.md, "The rule file") ------------------------------------


def _file_out(f: RuleFileRow, rows: Sequence[RuleRow]) -> RuleFileOut:
    return RuleFileOut(
        workspace=f.workspace,
        sha256=f.sha256,
        accepted_by=f.accepted_by,
        accepted_at=f.accepted_at,
        rules=[rule_out(r) for r in rows],
    )


async def accept_file(
    s: AsyncSession, who: Principal, workspace: str, content: str, sha256: str
) -> RuleFileOut:
    """A workspace owner accepts exactly this content of the workspace's
    `.agentmail/rules.toml`: its rules replace those of the last accepted
    version. Agents never get here (api/deps.Human); checked again anyway."""
    if not who.is_human:
        raise forbidden("only people accept rule files")
    ws = _workspace(workspace)
    if sha256_of(content) != sha256:
        raise invalid_value(
            "sha256", "sha256 is not the SHA-256 of content: the file changed, accept it again"
        )
    try:
        parsed = parse_rules_file(content)
    except RuleFileError as e:
        raise invalid_value("content", str(e)) from None
    if not await owns_workspace(s, who, ws):
        raise forbidden(
            f"only the workspace's owners (owners of an agent whose workspace roots cover "
            f"{ws}) and admins accept its rule file"
        )
    now = utcnow()
    await s.execute(delete(RuleRow).where(RuleRow.source == "file", RuleRow.workspace == ws))
    f = await s.get(RuleFileRow, ws)
    if f is None:
        f = RuleFileRow(workspace=ws, sha256=sha256, content=content, accepted_by=who.name)
        s.add(f)
    f.sha256, f.content, f.accepted_by, f.accepted_at = sha256, content, who.name, now
    rows = [
        RuleRow(
            id=new_id(),
            effect=r.effect,
            tool_name=r.tool_name,
            pattern=r.pattern,
            scope="workspace",
            session_id=None,
            workspace=ws,
            author=who.name,
            reason=r.reason,
            enabled=True,
            source="file",
            file_sha256=sha256,
            created_at=now,
        )
        for r in parsed
    ]
    s.add_all(rows)
    await s.flush()
    return _file_out(f, rows)


async def get_file(s: AsyncSession, who: Principal, workspace: str) -> RuleFileOut:
    ws = _workspace(workspace)
    f = await s.get(RuleFileRow, ws)
    if f is None or not await owns_workspace(s, who, ws):
        raise not_found(f"an accepted rule file of {ws}")
    rows = (
        await s.scalars(
            select(RuleRow)
            .where(RuleRow.source == "file", RuleRow.workspace == ws)
            .order_by(RuleRow.created_at, RuleRow.id)
        )
    ).all()
    return _file_out(f, rows)
