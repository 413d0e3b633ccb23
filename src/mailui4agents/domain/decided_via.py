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
