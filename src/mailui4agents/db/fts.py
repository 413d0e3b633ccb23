"""Names of the hand-made full-text search objects (not described by models)."""

from __future__ import annotations


def include_name(name: str | None, type_: str, parent_names: object) -> bool:
    """The FTS5 table and its shadow tables (SQLite) and the tsvector index
    (PostgreSQL) are managed by hand, not by models."""
    if type_ == "index" and name == PG_INDEX:
        return False
    return not (type_ == "table" and name is not None and name.startswith("mail_fts"))


# SQLite: an external-content FTS5 table over mails(subject, body), kept in step
# by triggers. Any migration that rebuilds `mails` (SQLite's batch mode copies the
# table) drops these triggers and must call `sqlite_triggers()` again.
SQLITE_TABLE = (
    "CREATE VIRTUAL TABLE mail_fts USING fts5("
    "subject, body, content='mails', content_rowid='seq', tokenize='unicode61')"
)
SQLITE_TRIGGERS = [
    "CREATE TRIGGER IF NOT EXISTS mails_fts_insert AFTER INSERT ON mails BEGIN "
    "INSERT INTO mail_fts(rowid, subject, body) VALUES (new.seq, new.subject, new.body); END",
    "CREATE TRIGGER IF NOT EXISTS mails_fts_delete AFTER DELETE ON mails BEGIN "
    "INSERT INTO mail_fts(mail_fts, rowid, subject, body) "
    "VALUES ('delete', old.seq, old.subject, old.body); END",
    "CREATE TRIGGER IF NOT EXISTS mails_fts_update AFTER UPDATE ON mails BEGIN "
    "INSERT INTO mail_fts(mail_fts, rowid, subject, body) "
    "VALUES ('delete', old.seq, old.subject, old.body); "
    "INSERT INTO mail_fts(rowid, subject, body) VALUES (new.seq, new.subject, new.body); END",
]
SQLITE_REBUILD = "INSERT INTO mail_fts(mail_fts) VALUES ('rebuild')"

# PostgreSQL: a GIN index over the same document as an expression (migration
# 0009), so `mails` keeps the same columns on both databases. Queries must use
# this exact expression for the planner to use the index. The text search
# configuration is `simple` (no stemming, any language) plus `unaccent`, so case
# and accents fold as with FTS5's unicode61 (café = CAFE).
PG_CONFIG = "agentmail_search"
PG_DOCUMENT = f"to_tsvector('{PG_CONFIG}'::regconfig, mails.subject || ' ' || mails.body)"
PG_INDEX = "ix_mails_fts"
PG_CREATE = [
    # unaccent ships with PostgreSQL (contrib) and is a trusted extension: the
    # database's owner may create it.
    "CREATE EXTENSION IF NOT EXISTS unaccent",
    f"CREATE TEXT SEARCH CONFIGURATION {PG_CONFIG} (COPY = pg_catalog.simple)",
    f"ALTER TEXT SEARCH CONFIGURATION {PG_CONFIG} "
    "ALTER MAPPING FOR asciiword, asciihword, hword_asciipart, word, hword, hword_part "
    "WITH unaccent, simple",
    f"CREATE INDEX {PG_INDEX} ON mails USING gin "
    f"((to_tsvector('{PG_CONFIG}'::regconfig, subject || ' ' || body)))",
]
PG_DROP = [
    f"DROP INDEX IF EXISTS {PG_INDEX}",
    f"DROP TEXT SEARCH CONFIGURATION IF EXISTS {PG_CONFIG}",
]
