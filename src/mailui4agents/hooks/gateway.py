"""The part of the hook flow that talks to the gateway (imported only when a
call needs a human: see :mod:`mailui4agents.hooks.core`).

Blocking, on the standard library's sockets (client/lite.py): no event loop, no
httpx, no pydantic, so that a hook asking a human starts almost as fast as one
that does not (bench/README.md). The bridge's in-process gate runs it in a
worker thread and aborts it when cancelled (hooks/core.py ``evaluate``).
"""

from __future__ import annotations

import os

from mailui4agents.client import ApiError, lite
from mailui4agents.client.asking import FINAL_CHECK_S
from mailui4agents.domain.relay_keys import hook_relay_key
from mailui4agents.hooks.outcomes import from_error
from mailui4agents.hooks.types import HookDecision, HookSettings, ToolCall, ask, deny
from mailui4agents.hooks.waiting import ask_human


def connect(settings: HookSettings) -> lite.Gateway:
    """The gateway of the hook's settings (raises ValueError for a bad URL)."""
    found = settings.coordinates
    return lite.Gateway(found.url, found.credential, found.agent_name)


def ask_gateway(
    call: ToolCall,
    settings: HookSettings,
    gateway: lite.Gateway,
    deadline: float,
    key_prefix: str | None = None,
) -> HookDecision:
    """Find the mail session, ask a human there, and wait for the answer.
    ``key_prefix``: the relay key starts with it (and ends with a random id),
    so that the terminal's answer can withdraw it (hooks/race.py)."""
    # A hard stop a little after the wait deadline, for calls that would hang
    # before the wait starts (the session lookup); the wait keeps its own deadline.
    hard_stop = lite.clock() + settings.timeout_s + FINAL_CHECK_S + 1.0
    try:
        try:
            session_id = mail_session(gateway, call, settings, hard_stop)
        except ApiError as exc:
            return from_error(exc, mail_driven=settings.mail_driven)
        if session_id is None:
            return ask(
                f"{settings.platform} gave no session id to bind a mail session to: "
                "the platform's own prompt decides"
            )
        if key_prefix is not None:
            import uuid

            key = f"{key_prefix}{uuid.uuid4().hex}"
        else:
            key = hook_relay_key(settings.platform, call.session_id or session_id, call.tool_use_id)
        return ask_human(gateway, call, settings, session_id=session_id, key=key, deadline=deadline)
    except TimeoutError:
        pass
    return deny(f"timed out: no answer from the gateway within {settings.timeout_s:g} s")


def mail_session(
    gateway: lite.Gateway, call: ToolCall, settings: HookSettings, until: float
) -> str | None:
    if settings.mail_session_id is not None:
        return settings.mail_session_id
    if not call.session_id or settings.owner is None:
        return None
    folder = os.path.basename(call.cwd.rstrip("/")) or "terminal"
    return gateway.interactive_session(
        f"{settings.platform}:{call.session_id}",
        settings.owner,
        call.cwd,
        f"{folder} ({settings.platform})",
        until=until,
    )
