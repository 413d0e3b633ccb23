"""The web UI: server-rendered pages served by the gateway (docs/web.md)."""
