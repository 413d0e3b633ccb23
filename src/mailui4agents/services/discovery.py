"""Finding people, places and mail: participants, contacts, address suggestions,
and forwarding (docs/behaviour.md#mail-strict-input-inbox).

All of these are reads and keep the read boundary of docs/access.md: an agent
sees only sessions it takes part in, of the workspace of the session it works in
(its scope, which these reads require). The workspace always comes from the
scope session, never from the caller.
"""

from __future__ import annotations

from dataclasses import dataclass, field

from sqlalchemy import func, select, union_all
from sqlalchemy.ext.asyncio import AsyncSession

from mailui4agents.db.tables import (
    AgentRow,
    MailRow,
    PlatformSessionRow,
    RecipientRow,
    SessionRow,
    UserRow,
)
from mailui4agents.db.types import UTCDateTime
from mailui4agents.domain.addresses import AddressError, format_parts
from mailui4agents.domain.errors import not_found
from mailui4agents.domain.results import Duplicate, Sent
from mailui4agents.domain.roots import is_glob
from mailui4agents.domain.times import rfc3339
from mailui4agents.services import access, mail, reading, request_input, size_limits
from mailui4agents.services.wire_shapes import MailContext, session_address
from mailui4agents.settings import Settings
from mailui4agents.wire.models import (
    ContactOut,
    NameSuggestion,
    ParticipantOut,
    PathSuggestion,
    SessionSuggestion,
    Suggestions,
)

ROLE_ORDER = ("from", "to", "cc")
SUGGEST_LIMIT = 20
FORWARD_MARK = "---------- Forwarded mail ----------"


def _address(name: str, path: str, session: str | None) -> str | None:
    """The completed address, or None while the name part is not a valid name."""
    try:
        return format_parts(name, path, session)
    except AddressError:
        return None


def _kind(is_human: bool) -> str:
    return "human" if is_human else "agent"


@dataclass
class _Seen:
    """A participant while the session's mails are walked."""

    human: bool
    roles: set[str] = field(default_factory=set)
    sent: int = 0


# -- participants -----------------------------------------------------------------------


async def participants(
    s: AsyncSession, reader: access.Reader, session_id: str
) -> list[ParticipantOut]:
    """Everyone in from/to/cc of the session's mails, in order of first appearance:
    `{address, name, kind, roles, mails_sent}`; `mails_sent` 0 = not yet spoken."""
    access.require_scope(reader, "listing participants")
    target = await s.get(SessionRow, session_id)
    if target is None:
        raise not_found(f"session '{session_id}'")
    await reader.ensure_read(s, target, f"session '{session_id}'")
    mails = (
        await s.execute(
            select(MailRow.seq, MailRow.from_name, MailRow.from_human)
            .where(MailRow.session_id == target.id)
            .order_by(MailRow.seq)
        )
    ).all()
    recipients = (
        await s.execute(
            select(
                RecipientRow.mail_seq, RecipientRow.name, RecipientRow.is_human, RecipientRow.role
            )
            .join(MailRow, MailRow.seq == RecipientRow.mail_seq)
            .where(MailRow.session_id == target.id)
            .order_by(RecipientRow.mail_seq, RecipientRow.position)
        )
    ).all()
    by_mail: dict[int, list[tuple[str, bool, str]]] = {}
    for seq, name, human, role in recipients:
        by_mail.setdefault(seq, []).append((name, human, role))

    people: dict[str, _Seen] = {}

    def seen(name: str, human: bool) -> _Seen:
        return people.setdefault(name, _Seen(human))

    for seq, sender, sender_human in mails:
        entry = seen(sender, sender_human)
        entry.roles.add("from")
        entry.sent += 1
        for name, human, role in by_mail.get(seq, []):
            seen(name, human).roles.add(role)
    return [
        ParticipantOut(
            address=session_address(target, name),
            name=name,
            kind=_kind(p.human),
            roles=[r for r in ROLE_ORDER if r in p.roles],
            mails_sent=p.sent,
        )
        for name, p in people.items()
    ]


# -- contacts ---------------------------------------------------------------------------


async def contacts(s: AsyncSession, reader: access.Reader) -> list[ContactOut]:
    """Everyone `reader` exchanged mail with (sent to, or received from) in sessions
    it may read: `{name, kind, last_address, last_mail_at, unread}`, most recent
    first. `unread` = the reader's unread mail from that contact, in those sessions."""
    access.require_scope(reader, "listing contacts")
    readable = reader.own_ids()
    # (contact, is_human, mail seq) for every mail between the reader and someone.
    sent_to = (
        select(
            RecipientRow.name.label("name"),
            RecipientRow.is_human.label("human"),
            MailRow.seq.label("seq"),
        )
        .join(MailRow, MailRow.seq == RecipientRow.mail_seq)
        .where(MailRow.from_name == reader.name, MailRow.session_id.in_(readable))
    )
    got_from = (
        select(
            MailRow.from_name.label("name"),
            MailRow.from_human.label("human"),
            MailRow.seq.label("seq"),
        )
        .join(RecipientRow, RecipientRow.mail_seq == MailRow.seq)
        .where(RecipientRow.name == reader.name, MailRow.session_id.in_(readable))
    )
    pairs = union_all(sent_to, got_from).subquery("pairs")
    latest = (
        await s.execute(
            select(pairs.c.name, pairs.c.human, func.max(pairs.c.seq))
            .where(pairs.c.name != reader.name)
            .group_by(pairs.c.name, pairs.c.human)
        )
    ).all()
    if not latest:
        return []
    seqs = {seq for _, _, seq in latest}
    last = {m.seq: m for m in (await s.scalars(select(MailRow).where(MailRow.seq.in_(seqs)))).all()}
    sess = {
        r.id: r
        for r in await s.scalars(
            select(SessionRow).where(SessionRow.id.in_({m.session_id for m in last.values()}))
        )
    }
    counts = await s.execute(
        select(MailRow.from_name, func.count(RecipientRow.id))
        .join(RecipientRow, RecipientRow.mail_seq == MailRow.seq)
        .where(
            RecipientRow.name == reader.name,
            RecipientRow.read_at.is_(None),
            MailRow.session_id.in_(readable),
        )
        .group_by(MailRow.from_name)
    )
    unread = {name: int(n) for name, n in counts.all()}
    out: dict[str, ContactOut] = {}
    for name, human, seq in sorted(latest, key=lambda r: -r[2]):
        if name in out:  # one name is one principal; keep its most recent row
            continue
        m = last[seq]
        out[name] = ContactOut(
            name=name,
            kind=_kind(bool(human)),
            last_address=session_address(sess[m.session_id], name),
            last_mail_at=m.created_at,
            unread=int(unread.get(name, 0)),
        )
    return list(out.values())


# -- address suggestions ----------------------------------------------------------------


async def suggest(
    s: AsyncSession, reader: access.Reader, q: str, limit: int = SUGGEST_LIMIT
) -> Suggestions:
    """Three-part completion of a partial address `name@path.session`.

    - no `@` yet: `names` — users and agents whose name starts with `q`;
    - after `@`: `paths` — workspaces of sessions the reader may read, the one
      with the most recent mail first, then the declared workspaces (of the named
      agent, and of the reader if it is an agent) not seen yet;
    - after a `.` (the last one; paths may contain dots): `sessions` — aliases of
      sessions of that name+path the reader may read, plus platform sessions of
      that agent in that cwd not adopted yet (`adoptable: true`) — shown only to
      that agent's owners (and the agent itself).

    An agent scoped to a session sees only that session's workspace.
    """
    access.require_scope(reader, "address suggestions")
    workspace = reader.scope.workspace if reader.scope is not None else None
    name, at, rest = q.strip().partition("@")
    if not at:
        return Suggestions(names=await _names(s, name, limit), paths=[], sessions=[])
    paths = await _paths(s, reader, workspace, name, rest, limit)
    path, dot, partial = rest.rpartition(".")
    found: list[SessionSuggestion] = []
    if dot and (workspace is None or path == workspace):
        found = await _sessions(s, reader, name, path, partial, limit)
    return Suggestions(names=[], paths=paths, sessions=found)


async def _names(s: AsyncSession, prefix: str, limit: int) -> list[NameSuggestion]:
    low = prefix.lower()
    users = await s.scalars(
        select(UserRow.username)
        .where(func.lower(UserRow.username).startswith(low, autoescape=True))
        .order_by(UserRow.username)
        .limit(limit)
    )
    agents = await s.scalars(
        select(AgentRow.name)
        .where(func.lower(AgentRow.name).startswith(low, autoescape=True))
        .order_by(AgentRow.name)
        .limit(limit)
    )
    found = [NameSuggestion(name=n, kind="human") for n in users] + [
        NameSuggestion(name=n, kind="agent") for n in agents
    ]
    return sorted(found, key=lambda f: (f.name.lower(), f.name))[:limit]


async def _paths(
    s: AsyncSession,
    reader: access.Reader,
    workspace: str | None,
    name: str,
    prefix: str,
    limit: int,
) -> list[PathSuggestion]:
    last = func.max(
        func.coalesce(SessionRow.last_mail_at, SessionRow.created_at), type_=UTCDateTime()
    )
    rows = (
        await s.execute(
            select(SessionRow.workspace, last)
            .where(
                SessionRow.id.in_(reader.readable_ids()),
                SessionRow.workspace.startswith(prefix, autoescape=True),
            )
            .group_by(SessionRow.workspace)
            .order_by(last.desc(), SessionRow.workspace)
            .limit(limit)
        )
    ).all()
    out = [
        PathSuggestion(path=p, address=_address(name, p, None), last_mail_at=when, declared=False)
        for p, when in rows
    ]
    declared: list[str] = []
    for agent_name in dict.fromkeys(
        n for n in (name, reader.name if reader.principal.kind == "agent" else "") if n
    ):
        # Its roots that name one folder (a glob is no address), then what it reported.
        found = (
            await s.execute(
                select(AgentRow.workspace_roots, AgentRow.workspaces).where(
                    AgentRow.name == agent_name
                )
            )
        ).first()
        for paths in found or ():
            declared += [w for w in paths or [] if isinstance(w, str) and not is_glob(w)]
    known = {p.path for p in out}
    for w in declared:
        if w in known or not w.startswith(prefix):
            continue
        if workspace is not None and w != workspace:
            continue  # a scoped agent sees only its workspace
        known.add(w)
        out.append(
            PathSuggestion(
                path=w, address=_address(name, w, None), last_mail_at=None, declared=True
            )
        )
    return out[:limit]


async def _sessions(
    s: AsyncSession,
    reader: access.Reader,
    name: str,
    path: str,
    partial: str,
    limit: int,
) -> list[SessionSuggestion]:
    if not name:
        return []
    recent = func.coalesce(SessionRow.last_mail_at, SessionRow.created_at)
    rows = (
        await s.scalars(
            select(SessionRow)
            .where(
                SessionRow.workspace == path,
                SessionRow.alias.is_not(None),
                SessionRow.alias.startswith(partial, autoescape=True),
                SessionRow.id.in_(reader.readable_ids()),
                SessionRow.id.in_(access.sessions_of(name)),
            )
            .order_by(recent.desc(), SessionRow.alias)
            .limit(limit)
        )
    ).all()
    out = [
        SessionSuggestion(
            alias=row.alias,
            address=_address(name, path, row.alias),
            session_id=row.id,
            status=row.status,
            last_mail_at=row.last_mail_at,
            adoptable=False,
            title=None,
        )
        for row in rows
    ]
    if not await reader.can_see_platform_sessions_of(s, name):
        return out
    # Platform sessions of that agent in that very cwd that no session has adopted:
    # mail to agent@cwd.slug adopts them (docs/behaviour.md). A slug that is already an
    # alias in this workspace would reach that session instead, so it is left out.
    taken = select(SessionRow.alias).where(
        SessionRow.workspace == path, SessionRow.alias.is_not(None)
    )
    platform = (
        await s.scalars(
            select(PlatformSessionRow)
            .where(
                PlatformSessionRow.agent_name == name,
                PlatformSessionRow.cwd == path,
                PlatformSessionRow.adopted_session_id.is_(None),
                PlatformSessionRow.slug.is_not(None),
                PlatformSessionRow.slug.startswith(partial, autoescape=True),
                PlatformSessionRow.slug.not_in(taken),
            )
            .order_by(PlatformSessionRow.updated_at.desc(), PlatformSessionRow.slug)
            .limit(limit)
        )
    ).all()
    seen = {o.alias for o in out}
    for p in platform:
        if p.slug in seen:
            continue
        seen.add(p.slug)
        out.append(
            SessionSuggestion(
                alias=p.slug,
                address=_address(name, path, p.slug),
                session_id=None,
                status=None,
                last_mail_at=p.updated_at,
                adoptable=True,
                title=p.title,
            )
        )
    return out[:limit]


# -- forward ----------------------------------------------------------------------------


def forward_subject(subject: str) -> str:
    return subject if subject[:4].lower() == "fwd:" else f"Fwd: {subject}"


def forward_body(
    ctx: MailContext, note: str | None, shown: request_input.Shown | None = None
) -> str:
    """The note first, then the original with its headers, quoted whole; a
    request mail whose input the forwarder may not see as it is `shown` to it."""
    m = ctx.mail
    subject, body = (shown.subject, shown.body) if shown is not None else (m.subject, m.body)
    headers = [
        ("From", ctx.address_of(m.from_name)),
        ("To", ", ".join(ctx.address_of(n) for n in ctx.names("to"))),
        ("Cc", ", ".join(ctx.address_of(n) for n in ctx.names("cc"))),
        ("Date", rfc3339(m.created_at)),
        ("Subject", subject),
    ]
    lines = [FORWARD_MARK, *(f"{k}: {v}" for k, v in headers if v or k != "Cc"), "", body]
    head = f"{note.rstrip()}\n\n" if note and note.strip() else ""
    return head + "\n".join(lines)


async def forward(
    s: AsyncSession,
    settings: Settings,
    reader: access.Reader,
    mail_id: str,
    *,
    to: list[str],
    cc: list[str],
    note: str | None,
) -> Sent | Duplicate:
    """Quote a mail the reader may read to new recipients (forwarding is reading:
    NotFound otherwise, as if it did not exist). The new mail goes where `to` routes it
    and carries the original's attachments (the reader may read them through it).
    """
    size_limits.check_text("note", note, settings.text_max_bytes)
    access.require_scope(reader, "forwarding")
    ctx = await reading.readable(s, reader, mail_id)
    await reading.record_reads(s, reader.principal, [ctx.mail.seq], reader.scope_id, "forward")
    m = ctx.mail
    head = request_input.MailHead(m.id, m.session_id, m.type, m.from_name, m.from_human)
    shown = (await request_input.hidden(s, reader.principal, [head])).get(m.id)
    return await mail.send_mail(
        s,
        settings,
        reader.principal,
        to=to,
        cc=cc,
        subject=forward_subject(shown.subject if shown is not None else m.subject),
        body=forward_body(ctx, note, shown),
        from_session_id=reader.scope_id,
        attachment_ids=[a.id for a in ctx.attachments],
    )
