"""Names of the hand-made full-text search objects (not described by models)."""

from __future__ import annotations


def include_name(name: str | None, type_: str, parent_names: object) -> bool:
    """The FTS5 table and its shadow tables are managed by hand, not by models."""
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
