"""Users, passwords, tokens and authentication; the names users and agents share.
Agents as accounts (creation, owners, keys) are services/agent_accounts.py."""

from __future__ import annotations

import hashlib
import secrets
import time
import weakref
from collections.abc import Iterable, Sequence
from datetime import datetime, timedelta
from typing import Any

from argon2 import PasswordHasher
from argon2.exceptions import InvalidHashError, VerificationError
from sqlalchemy import Select, and_, bindparam, literal, or_, select, union_all, update
from sqlalchemy.engine import Connection, Engine
from sqlalchemy.ext.asyncio import AsyncSession

from mailui4agents.db.engine import Database
from mailui4agents.db.tables import AgentKeyRow, AgentRow, UserRow, UserTokenRow
from mailui4agents.db.types import utcnow
from mailui4agents.domain import names
from mailui4agents.domain.errors import conflict, forbidden, invalid_value, not_found
from mailui4agents.domain.workspaces import WorkspaceError, normalise_workspace
from mailui4agents.services.principals import Principal, principal_key
from mailui4agents.wire.models import (
    NameWarning,
    TokenOut,
    UserOut,
)

USER_TOKEN_PREFIX = "am_user_"
AGENT_KEY_PREFIX = "am_agent_"
MAX_PASSWORD = 1024  # characters; Argon2 takes any length, a form field does not
MAX_LISTED_TOKENS = 500  # a token list holds at most this many (newest first)


def password_hasher(time_cost: int = 3, memory_kib: int = 65536) -> PasswordHasher:
    """Argon2id; the cost comes from settings (tests turn it down, never production)."""
    return PasswordHasher(time_cost=time_cost, memory_cost=memory_kib, parallelism=1)


def hash_token(token: str) -> str:
    """Tokens are 256 random bits, so a fast hash is enough (unlike passwords)."""
    return hashlib.sha256(token.encode()).hexdigest()


def new_secret(prefix: str) -> str:
    return prefix + secrets.token_urlsafe(32)


def check_name(name: str, field: str) -> str:
    """The name as stored (NFC), or Invalid naming `field` (domain/names.py says why)."""
    bad = not name or len(name) > 200 or any(c in name for c in "@ \t\r\n/.")
    if bad:
        raise invalid_value(
            field, f"{field} must be 1-200 characters without '@', '.', '/' or spaces"
        )
    try:
        return names.clean_name(name)
    except names.NameRefused as e:
        raise invalid_value(field, f"{field} {e}") from None


def normalised_workspace(path: str, field: str) -> str:
    """A workspace path normalised (domain/workspaces.py); Invalid naming `field`."""
    try:
        return normalise_workspace(path)
    except WorkspaceError as e:
        raise invalid_value(field, f"workspace {e}") from None


def normalised_workspaces(paths: list[str] | None, field: str = "workspaces") -> list[str]:
    return [normalised_workspace(p, f"{field}[{i}]") for i, p in enumerate(paths or ())]


async def look_alikes(s: AsyncSession, name: str) -> list[str]:
    """Existing users and agents whose names look like `name` (to warn an admin)."""
    existing = [*await s.scalars(select(UserRow.username)), *await s.scalars(select(AgentRow.name))]
    return names.look_alikes(name, existing)


async def name_taken(s: AsyncSession, name: str) -> bool:
    """Users and agents share one namespace: an address must mean one principal."""
    user = await s.scalar(select(UserRow.id).where(UserRow.username == name))
    agent = await s.scalar(select(AgentRow.id).where(AgentRow.name == name))
    return user is not None or agent is not None


async def create_user(
    s: AsyncSession, hasher: PasswordHasher, username: str, password: str, is_admin: bool = False
) -> UserRow:
    username = check_name(username, "username")
    check_password(password)
    if await name_taken(s, username):
        raise conflict(f"the name '{username}' is already taken")
    row = UserRow(username=username, password_hash=hasher.hash(password), is_admin=is_admin)
    s.add(row)
    await s.flush()
    return row


def require_admin(who: Principal) -> None:
    """Forbidden unless `who` is an admin person: the one admin check of the API
    (api/deps.admin) and the web pages (web/views.py)."""
    if not (who.is_human and who.is_admin):
        raise forbidden("admins only")


def check_password(password: str) -> None:
    if len(password) < 8:
        raise invalid_value("password", "password must have at least 8 characters")
    if len(password) > MAX_PASSWORD:
        raise invalid_value("password", f"password must have at most {MAX_PASSWORD} characters")


async def _user(s: AsyncSession, username: str) -> UserRow:
    row = await user_by_name(s, username)
    if row is None:
        raise not_found(f"user '{username}'", field="username")
    return row


async def set_admin(s: AsyncSession, username: str, is_admin: bool) -> UserOut:
    """Make a user an admin or take it back. The last admin stays one (nobody
    could add users or agents any more): 409."""
    row = await _user(s, username)
    if row.is_admin and not is_admin:
        others = await s.scalar(
            select(UserRow.id).where(UserRow.is_admin.is_(True), UserRow.id != row.id).limit(1)
        )
        if others is None:
            raise conflict(f"'{username}' is the last admin; make another admin first")
    row.is_admin = is_admin
    await s.flush()
    # Principals are read per request (authenticate), so the change holds at once;
    # open streams re-check after the commit.
    s.info.setdefault("recheck", set()).add(principal_key(row.username, True))
    return user_out(row)


async def reset_password(
    s: AsyncSession, username: str, password_hash: str, keep_token: str | None = None
) -> UserOut:
    """Set a user's password (hashed by the caller, outside the write transaction)
    and end every login and API token of that user — a reset usually means the old
    password leaked — except `keep_token` (the caller's own, when one resets
    oneself)."""
    row = await _user(s, username)
    row.password_hash = password_hash
    stmt = update(UserTokenRow).where(
        UserTokenRow.user_id == row.id,
        active(UserTokenRow.revoked_at, UserTokenRow.expires_at, utcnow()),
    )
    if keep_token is not None:
        stmt = stmt.where(UserTokenRow.token_hash != hash_token(keep_token))
    await s.execute(stmt.values(revoked_at=utcnow()))
    await s.flush()
    s.info.setdefault("recheck", set()).add(principal_key(row.username, True))
    return user_out(row)


def password_matches(hasher: PasswordHasher, password_hash: str | None, password: str) -> bool:
    """Argon2 check (CPU and memory heavy: run it in a worker thread, never while
    holding the write transaction). An unknown user spends the same time."""
    if password_hash is None:
        hasher.hash(password)
        return False
    try:
        hasher.verify(password_hash, password)
    except (VerificationError, InvalidHashError):
        return False
    return True


async def user_by_name(s: AsyncSession, username: str) -> UserRow | None:
    row: UserRow | None = await s.scalar(select(UserRow).where(UserRow.username == username))
    return row


async def issue_user_token(
    s: AsyncSession, user_id: str, name: str, ttl_s: float | None = None
) -> str:
    """A new token; `ttl_s` None means until revoked (named API tokens)."""
    token = new_secret(USER_TOKEN_PREFIX)
    expires = None if ttl_s is None else utcnow() + timedelta(seconds=ttl_s)
    s.add(
        UserTokenRow(user_id=user_id, name=name, token_hash=hash_token(token), expires_at=expires)
    )
    await s.flush()
    return token


def active(revoked: Any, expires: Any, now: Any) -> Any:
    """Not revoked and not expired at `now` (a datetime, or a bindparam)."""
    return and_(revoked.is_(None), or_(expires.is_(None), expires > now))


# The statements every authenticated request runs, built once here with bind
# parameters: building one per request (operators, coercions, cache keys) was
# about a tenth of the event loop's time on a bare authenticated GET. Core
# columns, not ORM entities: rows, not objects, and no ORM compile step.
_users, _user_tokens = UserRow.__table__, UserTokenRow.__table__
_agents, _agent_keys = AgentRow.__table__, AgentKeyRow.__table__
_USER_BY_TOKEN = (
    select(_users.c.id, _users.c.username, _users.c.is_admin, _user_tokens.c.expires_at)
    .select_from(_users.join(_user_tokens, _user_tokens.c.user_id == _users.c.id))
    .where(
        _user_tokens.c.token_hash == bindparam("digest"),
        active(_user_tokens.c.revoked_at, _user_tokens.c.expires_at, bindparam("now")),
    )
)
_AGENT_BY_KEY = (
    select(_agents.c.id, _agents.c.name, _agent_keys.c.expires_at)
    .select_from(_agents.join(_agent_keys, _agent_keys.c.agent_id == _agents.c.id))
    .where(
        _agent_keys.c.key_hash == bindparam("digest"),
        active(_agent_keys.c.revoked_at, _agent_keys.c.expires_at, bindparam("now")),
    )
)
_USER_TOKENS = (
    select(
        _user_tokens.c.id,
        _user_tokens.c.name,
        _user_tokens.c.created_at,
        _user_tokens.c.expires_at,
        _user_tokens.c.token_hash,
    )
    .where(
        _user_tokens.c.user_id == bindparam("user_id"),
        active(_user_tokens.c.revoked_at, _user_tokens.c.expires_at, bindparam("now")),
    )
    .order_by(_user_tokens.c.created_at.desc(), _user_tokens.c.id)
    .limit(MAX_LISTED_TOKENS)
)


async def list_user_tokens(s: AsyncSession, user_id: str, current: str) -> list[TokenOut]:
    """The user's usable tokens, newest first (never the secrets); `current` is
    the caller's own bearer token, marked so that a client can find itself."""
    params = {"user_id": user_id, "now": utcnow()}
    return _token_outs((await s.execute(_USER_TOKENS, params)).all(), current)


async def list_user_tokens_in(db: Database, user_id: str, current: str) -> list[TokenOut]:
    """`list_user_tokens` as a unit of work of its own (one statement:
    `Database.read_rows`)."""
    rows = await db.read_rows(_USER_TOKENS, {"user_id": user_id, "now": utcnow()})
    return _token_outs(rows, current)


def _token_outs(rows: Sequence[Any], current: str) -> list[TokenOut]:
    digest = hash_token(current)
    return [
        TokenOut(
            id=r.id,
            name=r.name,
            created_at=r.created_at,
            expires_at=r.expires_at,
            current=r.token_hash == digest,
        )
        for r in rows
    ]


async def revoke_user_token(s: AsyncSession, who: Principal, token_id: str) -> None:
    """Revoke one of the caller's own tokens; anyone else's is NotFound (not Forbidden: ids
    of other people's tokens are not confirmed)."""
    result = await s.execute(
        update(UserTokenRow)
        .where(
            UserTokenRow.id == token_id,
            UserTokenRow.user_id == who.id,
            active(UserTokenRow.revoked_at, UserTokenRow.expires_at, utcnow()),
        )
        .values(revoked_at=utcnow())
    )
    if result.rowcount == 0:  # type: ignore[attr-defined]
        raise not_found(f"token '{token_id}'")
    # After the commit, the user's open streams re-check their tokens.
    s.info.setdefault("recheck", set()).add(who.key)


async def revoke_current_token(s: AsyncSession, who: Principal, token: str) -> None:
    """Revoke `token`, the one `who` came with (the web UI's "Log out"); its open
    streams end too."""
    for t in await list_user_tokens(s, who.id, token):
        if t.current:
            await revoke_user_token(s, who, t.id)


async def authenticate(s: AsyncSession, token: str) -> Principal | None:
    """The principal a bearer token belongs to, or None (unknown, revoked or expired)."""
    found = await authenticate_until(s, token)
    return None if found is None else found[0]


async def authenticate_until(
    s: AsyncSession, token: str
) -> tuple[Principal, datetime | None] | None:
    """The principal and the time its token stops working (None: until revoked)."""
    found = _token_lookup(token)
    if found is None:
        return None
    statement, params = found
    return _principal_of(token, (await s.execute(statement, params)).first())


# The token cache of a SQLite gateway (`Database.token_cache`): digest ->
# (auth epoch, principal, expires_at, read at). An entry serves while the epoch
# is the one it was read under — the epoch changes after any commit, by any
# process, that wrote users, user_tokens, agents or agent_keys
# (db/auth_epoch.py) — while its token has not expired (checked on every use),
# and for at most TOKEN_CACHE_MAX_AGE_S (the safety net for a write that
# bypassed this package, e.g. the sqlite3 shell). Only tokens that work are
# kept; an unknown token is read every time.
TOKEN_CACHE_MAX_AGE_S = 5.0
TOKEN_CACHE_MAX = 10_000  # entries per database before starting over


async def authenticate_in(db: Database, token: str) -> tuple[Principal, datetime | None] | None:
    """`authenticate_until` as a unit of work of its own: one statement on the
    reader (db/engine.py, `Database.read_rows`).

    On SQLite the answer is kept in `db.token_cache` (above) and stays right at
    the very next request after any change: every process that writes the
    database through db/engine.py bumps its auth epoch after committing (a
    write from outside, e.g. the sqlite3 shell, within TOKEN_CACHE_MAX_AGE_S).
    On PostgreSQL it is read at
    the moment of every call — replicas on other machines share no epoch, so a
    revocation committed by any of them is seen by the next request only if
    nobody caches."""
    found = _token_lookup(token)
    if found is None:
        return None
    statement, params = found
    cache, epoch = db.token_cache, db.auth_epoch
    if cache is None or epoch is None:
        rows = await db.read_rows(statement, params)
        return _principal_of(token, rows[0] if rows else None)
    digest, now = params["digest"], params["now"]
    current = epoch.value()
    hit = cache.get(digest)
    if hit is not None:
        at, who, until, read_at = hit
        if (
            at == current
            and (until is None or until > now)
            and time.monotonic() - read_at < TOKEN_CACHE_MAX_AGE_S
        ):
            return who, until
        cache.pop(digest, None)
    read_at = time.monotonic()  # before the read, as `current` is
    rows = await db.read_rows(statement, params)
    answer = _principal_of(token, rows[0] if rows else None)
    if answer is not None:
        if len(cache) >= TOKEN_CACHE_MAX:
            cache.clear()
        cache[digest] = (current, answer[0], answer[1], read_at)
    return answer


def _token_lookup(token: str) -> tuple[Select[Any], dict[str, Any]] | None:
    if token.startswith(AGENT_KEY_PREFIX):
        statement = _AGENT_BY_KEY
    elif token.startswith(USER_TOKEN_PREFIX):
        statement = _USER_BY_TOKEN
    else:
        return None
    return statement, {"digest": hash_token(token), "now": utcnow()}


def _principal_of(token: str, row: Any) -> tuple[Principal, datetime | None] | None:
    if row is None:
        return None
    if token.startswith(AGENT_KEY_PREFIX):
        return Principal("agent", row.id, row.name), row.expires_at
    return Principal("user", row.id, row.username, row.is_admin), row.expires_at


async def tokens_until(s: AsyncSession, tokens: Iterable[str]) -> dict[str, datetime | None]:
    """Of these bearer tokens, the ones that still work (as `authenticate_until`
    would say), each with the time it stops working: a few queries for all of
    them, however many (the hub re-checks every open stream's token at once)."""
    now, tokens = utcnow(), list(tokens)  # read once per kind below
    kinds = (
        (AGENT_KEY_PREFIX, AgentKeyRow.key_hash, AgentKeyRow, AgentRow, AgentKeyRow.agent_id),
        (USER_TOKEN_PREFIX, UserTokenRow.token_hash, UserTokenRow, UserRow, UserTokenRow.user_id),
    )
    out: dict[str, datetime | None] = {}
    for prefix, digest_col, row, owner, owner_id in kinds:
        by_digest = {hash_token(t): t for t in tokens if t.startswith(prefix)}
        digests = list(by_digest)
        for start in range(0, len(digests), 500):  # well within SQLite's variable limit
            query = (
                select(digest_col, row.expires_at)
                .join(owner, owner_id == owner.id)
                .where(
                    digest_col.in_(digests[start : start + 500]),
                    active(row.revoked_at, row.expires_at, now),
                )
            )
            for digest, until in (await s.execute(query)).all():
                out[by_digest[digest]] = until
    return out


# name -> "user" | "agent", per database engine. Names are never deleted nor
# change kind (users and agents are only ever added), so a name once found keeps
# its answer; a name not found is not remembered (it may be created later).
_KNOWN_KINDS: weakref.WeakKeyDictionary[Engine | Connection, dict[str, str]] = (
    weakref.WeakKeyDictionary()
)
KNOWN_KINDS_MAX = 100_000  # names remembered per engine before starting over


def remembered_kinds(bind: Engine, names: Iterable[str]) -> dict[str, str] | None:
    """`kinds_of` from memory alone: every name's kind if each was found before on
    `bind` (the engine a reader session is bound to), else None (a query is due).
    A send whose recipients are all known opens no read session for them."""
    known = _KNOWN_KINDS.get(bind)
    if known is None:
        return None
    try:
        return {n: known[n] for n in names}
    except KeyError:
        return None


async def kinds_of(s: AsyncSession, names: Iterable[str]) -> dict[str, str]:
    """ "user" or "agent" for each of `names` that exists: from memory for names
    seen before, else in one query whatever their number (a mail to 100
    recipients once made 200 lookups)."""
    wanted = sorted(set(names))
    if not wanted:
        return {}
    known = _KNOWN_KINDS.setdefault(s.get_bind(), {})
    kinds = {n: known[n] for n in wanted if n in known}
    missing = [n for n in wanted if n not in kinds]
    if missing:
        rows = await s.execute(
            union_all(
                select(AgentRow.name, literal("agent")).where(AgentRow.name.in_(missing)),
                select(UserRow.username, literal("user")).where(UserRow.username.in_(missing)),
            )
        )
        found: dict[str, str] = {}
        for name, kind in rows:
            if kind == "user" or name not in found:  # as before: a user wins
                found[name] = kind
        if len(known) + len(found) > KNOWN_KINDS_MAX:
            known.clear()
        known.update(found)
        kinds.update(found)
    return kinds


async def kind_of(s: AsyncSession, name: str) -> str | None:
    """ "user", "agent" or None for a name."""
    if await s.scalar(select(UserRow.id).where(UserRow.username == name)):
        return "user"
    if await s.scalar(select(AgentRow.id).where(AgentRow.name == name)):
        return "agent"
    return None


async def ensure_admin(s: AsyncSession, hasher: PasswordHasher, password: str | None) -> str | None:
    """On an empty database create user `admin`. Returns a generated password, once."""
    if await s.scalar(select(UserRow.id).limit(1)) is not None:
        return None
    generated = None
    if not password:
        generated = password = secrets.token_urlsafe(18)
    await create_user(s, hasher, "admin", password, is_admin=True)
    return generated


def name_warnings(similar: list[str]) -> list[NameWarning]:
    """Created anyway (look-alikes can be real names), but the admin is told."""
    if not similar:
        return []
    listed = ", ".join(f"'{n}'" for n in similar)
    return [
        NameWarning(
            code="confusable",
            message=f"this name looks like {listed}; people may mistake one for the other",
            similar_to=similar,
        )
    ]


def user_out(row: UserRow) -> UserOut:
    return UserOut(username=row.username, is_admin=row.is_admin, created_at=row.created_at)


async def list_users(s: AsyncSession) -> list[UserOut]:
    """Every user, by name."""
    return [user_out(r) for r in (await s.scalars(select(UserRow).order_by(UserRow.username)))]
