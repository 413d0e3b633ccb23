"""Alembic environment: run against the connection the gateway hands us."""

from __future__ import annotations

from alembic import context

from mailui4agents.db.fts import include_name
from mailui4agents.db.schema import metadata

connection = context.config.attributes.get("connection")
if connection is None:  # pragma: no cover - only for `alembic` run by hand
    raise RuntimeError("run migrations through mailui4agents.db.migrate")


context.configure(
    connection=connection,
    target_metadata=metadata,
    include_name=include_name,
    render_as_batch=connection.dialect.name == "sqlite",
)
with context.begin_transaction():
    context.run_migrations()
