"""Pure domain rules: addresses, aliases (no I/O)."""
