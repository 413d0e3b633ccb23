"""Running a gateway for months: backup and restore (docs/backup.md), systemd
units (docs/service.md). Used by the CLI only, never by the gateway itself."""
