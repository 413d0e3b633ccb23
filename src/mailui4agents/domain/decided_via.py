"""Where a decision came from, in words (docs/remote.md, "First answer wins").

The gateway records `decided_via` {channel, device} on every decided request
(wire/models.py DecidedVia). The push that withdraws a notification, the 409 of
a request decided twice, the hook's reason and `ask_human`'s answer all say it
with `via_text`. Pure and import-free: the hook process imports it on every
tool call.
"""

from __future__ import annotations

_VIA = {
    "web": " from the web",
    "api": " through the API",
    "cli": " from the command line",
    "mcp": " through MCP",
    "email": " by e-mail",
    "terminal": " from the terminal",
}


def via_text(channel: str | None, device: str | None) -> str:
    """ " from Ana's phone", " from the web"…: where a decision came from, to
    follow "approved by ana". The paired device's name when there is one, a
    notification's action without one, the channel otherwise; nothing for the
    gateway's own (grant, system) or an unknown channel."""
    if device:
        return f" from {device}"
    if channel == "push":
        return " from a notification"
    return _VIA.get(channel or "", "")


def actor_text(kind: str, name: str | None, channel: str | None, device: str | None) -> str:
    """Who or what decided, in words, as the audit trail shows it (docs/audit.md):
    "ana (push, Ana's phone)", "rule r-7", "grant 5f…", "mode full", "claude's
    terminal", "timeout", "sandbox"."""
    text = {
        "person": f"{name}",
        "terminal": f"{name}'s terminal",
        "rule": f"rule {name}",
        "grant": f"grant {name}",
        "mode": f"mode {name}" if name else "the mode",
    }.get(kind, kind)
    where = [part for part in (channel, device) if part]
    if kind == "person" and where:
        text += f" ({', '.join(where)})"
    return text
