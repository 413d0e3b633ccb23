"""Use cases. All SQL lives here."""
