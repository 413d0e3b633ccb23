"""Mail into a running interactive session (docs/platforms.md, "Interactive sessions").

A person's mail to the mail session of a terminal session reaches the running
agent at its next stop or its next prompt, whichever comes first:

- ``Stop``: the hook answers ``{"decision": "block", "reason": MAIL}``, so Claude
  Code goes on with the mail as "Stop hook feedback" instead of stopping;
- ``UserPromptSubmit``: the mail is added to the person's prompt as
  ``additionalContext``.

Exactly once: each unread mail is claimed with ``POST /agent/inbox/read``
(``mail_ids`` of one mail), a conditional UPDATE of the agent's unread row;
only the hook that marked it (``marked: 1``) passes it on, so a Stop and a
prompt racing each other never both deliver it. Only people's mail of type
``message`` is passed on (not the agent's own, receipts or requests). Every
failure prints nothing: the agent stops (or takes the prompt) as without the hook.
"""

from __future__ import annotations

import json
from collections.abc import Callable, Mapping
from typing import TYPE_CHECKING, Any

from mailui4agents.hooks.events import NOTHING, event_call, settings_for
from mailui4agents.hooks.platform import Platform
from mailui4agents.hooks.race import interactive

if TYPE_CHECKING:
    from mailui4agents.client.lite import Gateway

#: The hook's whole budget, in seconds (its install timeout is 15 s).
BUDGET_S = 8.0
#: At most this many mails per stop or prompt, each cut at BODY_CHARS.
MAX_MAILS = 10
BODY_CHARS = 4000

Handler = Callable[[dict[str, Any], Mapping[str, str]], "tuple[str, int] | None"]


def take(platform: Platform, data: Mapping[str, Any], env: Mapping[str, str]) -> str:
    """The mail text this hook claimed for the agent ("" when none)."""
    if not interactive(env):
        return ""  # a bridge turn gets its mail from the bridge
    call = event_call(data)
    if not call.session_id:
        return ""
    settings = settings_for(platform, data, env)
    if not settings.coordinates.is_agent or settings.owner is None:
        return ""
    from mailui4agents.client import lite
    from mailui4agents.hooks.gateway import connect, mail_session

    until = lite.clock() + BUDGET_S
    gateway = connect(settings)
    try:
        session_id = mail_session(gateway, call, settings, until)
        if session_id is None:
            return ""
        texts = [render(mail) for mail in claim(gateway, session_id, until)]
    finally:
        gateway.abort()
    if not texts:
        return ""
    return (
        "\n\n".join(texts)
        + "\n\nThis came by mail (agentmail) while you worked. Answer the sender with the "
        "agentmail `send_mail` tool (in this session, replying to the mail id above), "
        "then carry on."
    )


def claim(gateway: Gateway, session_id: str, until: float) -> list[dict[str, Any]]:
    """The unread mail of people in ``session_id`` that this caller claimed (at
    most MAX_MAILS, bodies cut at BODY_CHARS), oldest first: each one marked read
    with the conditional ``POST /agent/inbox/read``, kept only when this call
    marked it (``marked: 1``). Every claimant of mail for a running session (these
    hooks, and the Claude Code channel of mcp/channel.py) claims here, so one mail
    is handed over once. Raises ApiError / TimeoutError when the inbox cannot be read."""
    from mailui4agents.client import ApiError
    from mailui4agents.client.lite import quote

    page = gateway.call_object(
        "GET",
        f"/agent/inbox?status=unread&session_id={quote(session_id)}"
        f"&limit={MAX_MAILS}&body_limit={BODY_CHARS}",
        until=until,
    )
    claimed = []
    for mail in page.get("items") or []:
        if not isinstance(mail, dict) or not _for_the_agent(mail):
            continue
        try:
            marked = gateway.call_object(
                "POST", "/agent/inbox/read", {"mail_ids": [mail["id"]]}, until=until
            )
        except (ApiError, TimeoutError):
            break  # what was claimed so far is handed over; the rest stays unread
        if marked.get("marked") == 1:  # this caller marked it: hand it over once
            claimed.append(mail)
    return claimed


def _for_the_agent(mail: Mapping[str, Any]) -> bool:
    return bool(mail.get("from_human")) and mail.get("type") == "message" and "id" in mail


def render(mail: Mapping[str, Any]) -> str:
    body = str(mail.get("body") or "")
    cut = (
        " [cut: read the whole mail with the agentmail tools]" if mail.get("body_truncated") else ""
    )
    return (
        f"Mail from {mail.get('from')} (mail id {mail.get('id')}), "
        f"subject {mail.get('subject')!r}:\n{body}{cut}"
    )


def stop(platform: Platform) -> Handler:
    """``Stop``: keep the agent going with the mail that arrived, if any."""

    def handle(data: dict[str, Any], env: Mapping[str, str]) -> tuple[str, int] | None:
        text = take(platform, data, env)
        if not text:
            return NOTHING
        return json.dumps({"decision": "block", "reason": text}, ensure_ascii=False), 0

    return handle


def prompt(platform: Platform) -> Handler:
    """``UserPromptSubmit``: the mail that arrived goes along with the prompt."""

    def handle(data: dict[str, Any], env: Mapping[str, str]) -> tuple[str, int] | None:
        text = take(platform, data, env)
        if not text:
            return NOTHING
        output = {"hookEventName": "UserPromptSubmit", "additionalContext": text}
        return json.dumps({"hookSpecificOutput": output}, ensure_ascii=False), 0

    return handle
