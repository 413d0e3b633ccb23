"""Database: tables, engines and migrations."""
