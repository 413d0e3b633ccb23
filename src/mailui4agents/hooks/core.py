"""The one hook flow every platform shares (docs/behaviour.md#approval-round-trip,
docs/behaviour.md#rules-on-the-waiting-side, docs/behaviour.md#hooks).

For one tool call, in this order:

1. the platform adapter has parsed its stdin into a :class:`ToolCall`;
2. a call that touches a protected path is refused before anyone is asked,
   whatever the mode or grant;
3. read and mail tools are allowed without contacting the gateway;
4. the mail session is the bridge's ``AGENTMAIL_SESSION_ID`` (mail-driven), or
   — with ``AGENTMAIL_OWNER`` — the session bound to this interactive platform
   session; with neither, the platform's own prompt decides (``ask``);
5. a human is asked and the hook waits (:mod:`mailui4agents.hooks.waiting`).

Nothing here may crash: Claude Code treats a hook that exits 1 as "proceed",
so :func:`decide` turns every unexpected error into a deny.

Rules 2-4 (:func:`precheck`) need only the standard library: a read-only call
is decided without importing the gateway code, which only loads for rule 5.
Rule 5 too runs on the standard library alone (blocking sockets,
client/lite.py): no httpx, pydantic, anyio or asyncio in a hook process
(tests/hooks/test_fast_path.py; bench/README.md has timings).
"""

from __future__ import annotations

import os
from typing import TYPE_CHECKING

import mailui4agents
from mailui4agents.domain.policy import classify_tool
from mailui4agents.domain.protected import protected_paths, touches_protected
from mailui4agents.domain.relay_keys import hook_relay_key as relay_key
from mailui4agents.hooks.types import (
    HookDecision,
    HookSettings,
    ToolCall,
    Verdict,
    allow,
    ask,
    deny,
)

if TYPE_CHECKING:
    from mailui4agents.client.lite import Gateway

__all__ = [
    "HookDecision",
    "HookSettings",
    "ToolCall",
    "Verdict",
    "decide",
    "evaluate",
    "precheck",
    "relay_key",
]


def protected_hit(call: ToolCall, settings: HookSettings) -> str | None:
    """The protected path (or name) this call would touch, or None."""
    package_dir = os.path.dirname(os.path.abspath(mailui4agents.__file__))
    protected = protected_paths(
        settings.data_dir, [], home=settings.home, env=settings.env, package_dir=package_dir
    )
    return touches_protected(
        call.tool_name, call.tool_input, protected, call.cwd, home=settings.home
    )


def precheck(call: ToolCall, settings: HookSettings) -> HookDecision | None:
    """Rules 2-4 of the module docstring, without I/O: the decision, or None when
    a human must be asked (rule 5)."""
    hit = protected_hit(call, settings)
    if hit is not None:
        return deny(
            f"{call.tool_name} would touch the protected path {hit}; protected paths are "
            "refused whatever the mode or grant, before anyone is asked"
        )
    kind = classify_tool(call.tool_name)
    if kind != "guarded":
        return allow(f"{call.tool_name} is a {kind} tool; it runs in every mode")
    if settings.mail_session_id is None and settings.owner is None:
        return ask(
            "no mail session (AGENTMAIL_SESSION_ID) and no owner to ask by mail "
            "(AGENTMAIL_OWNER): the platform's own prompt decides"
        )
    if not settings.coordinates.is_agent:
        return deny("the hook needs an agent key in AGENTMAIL_KEY to ask the gateway")
    return None


async def evaluate(call: ToolCall, settings: HookSettings) -> HookDecision:
    """Decide one call in an event loop (the bridge's in-process gate,
    bridge/drivers/gate.py): the blocking ask (:func:`_ask`) runs in a worker
    thread, aborted at once when the caller is cancelled."""
    decided = precheck(call, settings)
    if decided is not None:
        return decided
    import anyio.to_thread

    from mailui4agents.hooks.gateway import connect

    gateway = connect(settings)
    try:
        return await anyio.to_thread.run_sync(_ask, call, settings, gateway, abandon_on_cancel=True)
    finally:
        gateway.abort()  # a no-op once it returned; else the thread ends now


def _ask(call: ToolCall, settings: HookSettings, gateway: Gateway) -> HookDecision:
    from mailui4agents.client import lite
    from mailui4agents.hooks.gateway import ask_gateway

    # The wait's deadline starts once the ask path is imported (seconds on a
    # loaded machine), so a short AGENTMAIL_HOOK_TIMEOUT is not spent on imports.
    deadline = lite.clock() + settings.timeout_s
    return ask_gateway(call, settings, gateway, deadline)


def decide(call: ToolCall, settings: HookSettings) -> HookDecision:
    """Decide one call: :func:`precheck` first, then — only when a human must be
    asked — the blocking ask on the standard library (hooks/gateway.py), with
    no event loop. Any unexpected error denies."""
    try:
        decided = precheck(call, settings)
        if decided is not None:
            return decided
        # Imported here, not at the top: calls that precheck decides never load it.
        from mailui4agents.hooks.gateway import connect

        return _ask(call, settings, connect(settings))
    except Exception as exc:  # never crash: exit 1 means "proceed" to Claude Code
        return deny(f"the agentmail hook failed ({type(exc).__name__}: {exc}); denied to be safe")
