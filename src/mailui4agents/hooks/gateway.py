"""The part of the hook flow that talks to the gateway (imported only when a
call needs a human: see :mod:`mailui4agents.hooks.core`)."""

from __future__ import annotations

import os
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager

import anyio

from mailui4agents.client import ApiError, AsyncClient
from mailui4agents.domain.relay_keys import hook_relay_key
from mailui4agents.hooks.outcomes import from_error
from mailui4agents.hooks.types import HookDecision, HookSettings, ToolCall, ask, deny
from mailui4agents.hooks.waiting import FINAL_CHECK_S, ask_human


async def ask_gateway(
    call: ToolCall, settings: HookSettings, client: AsyncClient | None, deadline: float
) -> HookDecision:
    """Find the mail session, ask a human there, and wait for the answer."""
    # A hard stop a little after the wait deadline, for calls that would hang
    # before the wait starts (the session lookup); the wait keeps its own deadline.
    with anyio.move_on_after(settings.timeout_s + FINAL_CHECK_S + 1.0):
        async with _client(settings, client) as gateway:
            try:
                session_id = await _mail_session(gateway, call, settings)
            except ApiError as exc:
                return from_error(exc, mail_driven=settings.mail_driven)
            if session_id is None:
                return ask(
                    f"{settings.platform} gave no session id to bind a mail session to: "
                    "the platform's own prompt decides"
                )
            key = hook_relay_key(settings.platform, call.session_id or session_id, call.tool_use_id)
            return await ask_human(
                gateway, call, settings, session_id=session_id, key=key, deadline=deadline
            )
    return deny(f"timed out: no answer from the gateway within {settings.timeout_s:g} s")


async def _mail_session(gateway: AsyncClient, call: ToolCall, settings: HookSettings) -> str | None:
    if settings.mail_session_id is not None:
        return settings.mail_session_id
    if not call.session_id or settings.owner is None:
        return None
    folder = os.path.basename(call.cwd.rstrip("/")) or "terminal"
    session = await gateway.interactive_session(
        platform_id=f"{settings.platform}:{call.session_id}",
        owner=settings.owner,
        cwd=call.cwd,
        title=f"{folder} ({settings.platform})",
    )
    return session.id


@asynccontextmanager
async def _client(settings: HookSettings, given: AsyncClient | None) -> AsyncIterator[AsyncClient]:
    """The caller's client (tests pass one in), or a fresh one closed on exit."""
    if given is not None:
        yield given
        return
    async with AsyncClient(settings.client) as fresh:
        yield fresh
