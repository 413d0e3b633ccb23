"""Full-text search over subject and body (docs/behaviour.md#mail-strict-input-inbox), scoped like
every read (docs/access.md).

SQLite: the FTS5 table `mail_fts` (migration 0003, kept in step by triggers). The
user's text is never passed to MATCH as FTS syntax: it is split into terms, each
becomes a double-quoted FTS string (inner quotes doubled) and the terms are AND-ed;
a term ending in `*` stays a prefix search.

PostgreSQL: the GIN index over `to_tsvector(…, subject || ' ' || body)` with
`simple` + `unaccent` (migration 0009, db/fts.py). Each term becomes its own
`plainto_tsquery` (plain text, never tsquery syntax) or, ending in `*`, a quoted
lexeme with `:*`; the terms are AND-ed, and `ts_headline` cuts the snippet.

Both databases mark the words of the snippet themselves (FTS5's snippet(),
PostgreSQL's ts_headline). Only a query of unspaced-script terms alone, which no
full-text index can answer, and any other database get a snippet cut in Python
(`make_snippet`).

Scripts written without spaces (Chinese, Japanese, Thai) have no word boundaries
for the `unicode61` tokenizer — a whole run of ideographs is one token — so their
terms match as substrings instead (`导入` must find `重构导入路径`).
"""

from __future__ import annotations

import re
from collections.abc import Sequence
from typing import Any

from sqlalchemy import (
    ColumnElement,
    Integer,
    Text,
    and_,
    func,
    literal_column,
    or_,
    select,
    table,
)
from sqlalchemy.ext.asyncio import AsyncSession

from mailui4agents.db import fts
from mailui4agents.db.tables import MailRow, SessionRow
from mailui4agents.domain.errors import invalid_value
from mailui4agents.services import access, reading, request_input
from mailui4agents.services.wire_shapes import BODY_AT
from mailui4agents.wire.models import JsonObject

MARK = "**"  # around matched words in snippets (bodies are text/markdown)
SNIPPET_TOKENS = 16  # FTS5 snippet() length in tokens
SNIPPET_CHARS = 60  # fallback snippet: characters on each side of the first hit

# Ideographs, kana, Thai, Lao, Khmer, Myanmar: no spaces between words.
_UNSPACED = re.compile(
    "[\u0e00-\u0eff\u1000-\u109f\u1780-\u17ff\u3040-\u30ff\u3400-\u4dbf"
    "\u4e00-\u9fff\uf900-\ufaff\U00020000-\U0003ffff]"
)


class Terms:
    """A query split into terms: FTS terms and substring terms."""

    def __init__(self, q: str) -> None:
        self.fts: list[str] = []  # FTS5 strings, e.g. '"login"', '"log"*'
        self.substrings: list[str] = []  # plain text, matched anywhere
        self.words: list[str] = []  # every term without its '*', for snippets
        for raw in q.split():
            prefix = raw.endswith("*")
            core = raw.rstrip("*")
            if not any(ch.isalnum() for ch in core):
                continue  # only punctuation: no token could ever match it
            self.words.append(core)
            if _UNSPACED.search(core):
                self.substrings.append(core)
            else:
                self.fts.append('"' + core.replace('"', '""') + '"' + ("*" if prefix else ""))

    @property
    def match(self) -> str:
        return " AND ".join(self.fts)


def parse_query(q: str | None) -> Terms:
    """The terms of `q`, or Invalid naming `q` when there is nothing to search for."""
    terms = Terms(q or "")
    if not terms.words:
        raise invalid_value("q", "give at least one word to search for in subject or body")
    return terms


def _substring(term: str, *, insensitive: bool) -> ColumnElement[bool]:
    if insensitive:
        return or_(
            MailRow.subject.icontains(term, autoescape=True),
            MailRow.body.icontains(term, autoescape=True),
        )
    return or_(
        MailRow.subject.contains(term, autoescape=True),
        MailRow.body.contains(term, autoescape=True),
    )


def _pg_query(fts_terms: list[str]) -> ColumnElement[Any]:
    """`q0 && q1 …`: one tsquery per term (db/fts.py's configuration); the user's
    text is a bound value, never tsquery syntax."""
    config: ColumnElement[Any] = literal_column(f"'{fts.PG_CONFIG}'::regconfig")
    parts: list[ColumnElement[Any]] = []
    for term in fts_terms:
        prefix = term.endswith("*")
        core = term.rstrip("*")[1:-1].replace('""', '"')  # undo the FTS5 quoting
        if prefix:
            # A quoted tsquery lexeme: quotes doubled, backslashes escaped.
            lexeme = "'" + core.replace("\\", "\\\\").replace("'", "''") + "':*"
            parts.append(func.to_tsquery(config, lexeme))
        else:
            parts.append(func.plainto_tsquery(config, core))
    query = parts[0]
    for part in parts[1:]:
        query = query.op("&&")(part)
    return query


def _pg_match(query: ColumnElement[Any]) -> ColumnElement[bool]:
    """`document @@ query` over the indexed expression (db/fts.py): the planner
    uses the GIN index only for this exact expression."""
    return literal_column(fts.PG_DOCUMENT).op("@@")(query)


def _pg_snippet(query: ColumnElement[Any]) -> ColumnElement[str]:
    """The body's best fragment of about SNIPPET_TOKENS words with the query's
    words marked, from PostgreSQL (ts_headline) as FTS5's snippet() on SQLite.
    Without a hit in the body (the subject matched), its first words."""
    options = (
        f"StartSel={MARK}, StopSel={MARK}, MaxFragments=1, "
        f"MaxWords={SNIPPET_TOKENS}, MinWords={SNIPPET_TOKENS - 1}"
    )
    config: ColumnElement[Any] = literal_column(f"'{fts.PG_CONFIG}'::regconfig")
    return func.ts_headline(config, MailRow.body, query, options, type_=Text)


def make_snippet(body: str, words: list[str]) -> str:
    """A window of `body` around the first word found, the word marked."""
    hits = [m for w in words if (m := re.search(re.escape(w), body, re.IGNORECASE))]
    if not hits:
        cut = body[: 2 * SNIPPET_CHARS]
        return cut + ("…" if len(body) > len(cut) else "")
    hit = min(hits, key=lambda m: m.start())
    start = max(0, hit.start() - SNIPPET_CHARS)
    end = min(len(body), hit.end() + SNIPPET_CHARS)
    return (
        ("…" if start else "")
        + body[start : hit.start()]
        + MARK
        + hit.group(0)
        + MARK
        + body[hit.end() : end]
        + ("…" if end < len(body) else "")
    )


async def search(
    s: AsyncSession,
    reader: access.Reader,
    q: str | None,
    limit: int,
    cursor: str | None = None,
) -> tuple[list[JsonObject], str | None]:
    """Mails matching every term of `q` in sessions `reader` may read, newest first.

    Who may read what is `access.Reader` (agents: participant, in the workspace of
    their scope session, which search requires). Each result is the JSON of a
    SearchHit: MailOut (built as a page of mail is, services/wire_shapes.page_items)
    + `snippet`. Every returned mail is recorded in the read log (action "search").
    """
    access.require_scope(reader, "searching")
    terms = parse_query(q)
    dialect = s.get_bind().dialect.name

    # Per row, not `IN (readable sessions)`: newest first, the search visits few
    # rows before its limit, and the set of a busy reader's sessions is costly.
    conditions: list[ColumnElement[bool]] = [reader.may_read(MailRow.session_id)]
    # A request mail's input is the deciders' and the asking agent's: for anyone
    # else it never matches (a hit would tell its words), services/request_input.py.
    conditions.append(request_input.visible(reader.principal))
    after = reading.parse_cursor(cursor)
    if after is not None:
        conditions.append(MailRow.seq < after)
    columns = list(reading.page_columns(preview=False))
    fts_snippet: Any = None
    order: Any = MailRow.seq.desc()
    mails: Any = MailRow.__table__
    if dialect == "sqlite":
        if terms.fts:
            # mail_fts drives the query, newest first (FTS5 hands out rowids in
            # descending order itself): the LIMIT stops the scan, and snippet()
            # runs for the returned rows only. Joined to a subquery instead, every
            # match got a snippet and all of them were sorted (a TEMP B-TREE, slow
            # for a common term in a large mailbox: bench/scale.py).
            rowid = literal_column("mail_fts.rowid", Integer)
            fts_snippet = literal_column(
                f"snippet(mail_fts, 1, '{MARK}', '{MARK}', '…', {SNIPPET_TOKENS})", Text
            )
            mails = table("mail_fts").join(MailRow, MailRow.seq == rowid)
            conditions.append(literal_column("mail_fts").bool_op("MATCH")(terms.match))
            if after is not None:
                conditions.append(rowid < after)  # FTS5 bounds its own scan
            order = rowid.desc()
        conditions += [_substring(t, insensitive=False) for t in terms.substrings]
    elif dialect == "postgresql":
        if terms.fts:
            query = _pg_query(terms.fts)
            fts_snippet = _pg_snippet(query)
            conditions.append(_pg_match(query))
        conditions += [_substring(t, insensitive=False) for t in terms.substrings]
    else:  # any other database: a portable substring match
        conditions += [_substring(w, insensitive=True) for w in terms.words]

    if fts_snippet is not None:
        columns.append(fts_snippet)
    stmt = (
        select(*columns)
        .select_from(mails)
        .join(SessionRow, SessionRow.id == MailRow.session_id)
        .where(and_(*conditions))
        .order_by(order)
        .limit(limit + 1)
    )
    found = (await s.execute(stmt)).all()
    rows: list[Sequence[Any]]
    if fts_snippet is not None:  # the database cut it: the last column
        snippets = [r[-1] for r in found[:limit]]
        rows = [r[:-1] for r in found]
    else:
        snippets = [make_snippet(r[BODY_AT], terms.words) for r in found[:limit]]
        rows = list(found)
    items, more = await reading.page_of(
        s, reader.principal, rows, limit,
        scope_session_id=reader.scope_id, action="search", body_limit=None, newest_first=True,
    )  # fmt: skip
    for item, snippet in zip(items, snippets, strict=True):
        item["snippet"] = snippet
    return items, more
