"""Every table: importing this registers all row classes on `metadata`
(migrations/env.py compares it with the migrations, db/copy.py copies by it)."""

from mailui4agents.db import audit_tables, reach_tables, rule_tables, tables, work_tables
from mailui4agents.db.base import Base

__all__ = ["audit_tables", "metadata", "reach_tables", "rule_tables", "tables", "work_tables"]

metadata = Base.metadata
