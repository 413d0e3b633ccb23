"""The terminal and the phone together: the first answer wins
(docs/platforms.md, "Interactive sessions"; docs/remote.md, "Answered in the terminal").

``agentmail install-hook claude-code --interactive`` installs the hook on
these events (Codex 0.171.0 runs ``PermissionRequest`` before its dialog, so
it has no race and no interactive install: docs/platforms.md), with
``AGENTMAIL_INTERACTIVE=1``:

- ``PreToolUse``: only the checks that never ask (a protected path is denied);
  otherwise no opinion, so the platform's own permission rules and dialog go on.
- ``PermissionRequest``: the platform shows its dialog *and* runs this hook at
  the same time. The hook asks the session's deciders remotely and waits; a
  remote answer closes the dialog (allow, or deny with the human's note for the
  model). When the remote side cannot answer (no owner, the gateway is down,
  nobody decided in time) the hook prints nothing and the dialog decides.
- ``PostToolUse`` / ``PostToolUseFailure``: the tool ran, so if the person
  answered "Yes" in the terminal first, the remote request still pending for
  this very call is withdrawn at once ("answered in the terminal"). The platform
  does not stop the orphaned ``PermissionRequest`` hook in that case (it runs
  on and its answer is ignored); the withdrawal also ends its wait.
- An answer of "No" (or Esc) in the terminal aborts the turn, and the platform
  sends the waiting hook SIGTERM: the hook withdraws its request before it exits.

The request and the later event are matched by a relay key prefix: a digest of
the platform, its session id, the tool name and the tool input (the
``PermissionRequest`` input carries no tool-use id), plus a random tail per
request. When the Claude Code channel (``agentmail mcp --channel``) is also
installed, Claude Code asks both about one dialog: whichever claims the dialog
first (hooks/claims.py) asks; a hook that lost the claim opens no request and
waits only to withdraw the channel's on SIGTERM. Only the standard library
until a human must be asked.
"""

from __future__ import annotations

import hashlib
import json
import signal
import sys
import time
from collections.abc import Callable, Mapping
from typing import TYPE_CHECKING, Any

from mailui4agents.domain.policy import classify_tool
from mailui4agents.hooks.events import NOTHING, event_call, settings_for
from mailui4agents.hooks.platform import Platform, reason_text
from mailui4agents.hooks.types import HookDecision, HookSettings, ToolCall

if TYPE_CHECKING:
    from mailui4agents.client import lite

#: Seconds the withdrawal may take: the platform kills a hook that ignores
#: SIGTERM about 1.5 s later, and PostToolUse should not hold the agent up.
WITHDRAW_S = 1.0

PREFIX = "race:"
#: Seconds a dialog claim outlives the wait it covers (hooks/claims.py).
CLAIM_MARGIN_S = 5.0


def relay_key_prefix(platform: str, session_id: str, tool_name: str, tool_input: Any) -> str:
    """The relay key prefix of one tool call's remote request: the same for the
    ``PermissionRequest`` that asks and the ``PostToolUse`` that withdraws."""
    canonical = json.dumps(
        [platform, session_id, tool_name, tool_input],
        sort_keys=True,
        ensure_ascii=False,
        separators=(",", ":"),
    )
    digest = hashlib.sha256(canonical.encode("utf-8", "surrogatepass")).hexdigest()
    return f"{PREFIX}{digest[:40]}:"


def interactive(env: Mapping[str, str]) -> bool:
    return env.get("AGENTMAIL_INTERACTIVE") == "1" and not env.get("AGENTMAIL_SESSION_ID")


def pre_tool_use(
    platform: Platform, render_deny: Callable[[HookDecision], str]
) -> Callable[[dict[str, Any], Mapping[str, str]], tuple[str, int] | None]:
    """The ``PreToolUse`` handler of an interactive install: a protected path is
    denied (``render_deny``); anything else is left to the platform's own rules
    and dialog. Outside an interactive install (no ``AGENTMAIL_INTERACTIVE``, or
    a bridge turn) it leaves the call to the tool gate (hooks/core.py)."""

    def handle(data: dict[str, Any], env: Mapping[str, str]) -> tuple[str, int] | None:
        if not interactive(env):
            return None
        from mailui4agents.hooks.core import protected_hit
        from mailui4agents.hooks.types import deny

        call = event_call(data)
        try:
            settings = settings_for(platform, data, env)
        except (OSError, ValueError) as exc:
            return render_deny(deny(f"the agentmail hook could not load its settings: {exc}")), 0
        hit = protected_hit(call, settings)
        if hit is None:
            return NOTHING
        return render_deny(
            deny(
                f"{call.tool_name} would touch the protected path {hit}; protected paths are "
                "refused whatever the mode or grant, before anyone is asked"
            )
        ), 0

    return handle


def render_permission(decision: HookDecision) -> str:
    """Claude Code's (and Codex's) ``PermissionRequest`` answer; nothing for
    ``ask``, which leaves the dialog to decide."""
    if decision.verdict == "ask":
        return ""
    body: dict[str, Any] = {"behavior": decision.verdict}
    if decision.verdict == "deny":
        # Passed to the model word for word as the tool's error.
        body["message"] = reason_text(decision)
    output = {"hookEventName": "PermissionRequest", "decision": body}
    return json.dumps({"hookSpecificOutput": output}, ensure_ascii=False, separators=(",", ":"))


class _Stopped(Exception):
    """The platform sent SIGTERM: the terminal answered "No" (or Esc)."""


def _on_term(_signum: int, _frame: object) -> None:
    raise _Stopped


def permission_request(
    platform: Platform,
) -> Callable[[dict[str, Any], Mapping[str, str]], tuple[str, int]]:
    """The ``PermissionRequest`` handler: ask remotely while the dialog is up."""

    def handle(data: dict[str, Any], env: Mapping[str, str]) -> tuple[str, int]:
        call = event_call(data)
        try:
            settings = settings_for(platform, data, env)
        except (OSError, ValueError):
            return NOTHING  # the dialog decides
        return render_permission(_race(call, settings)), 0

    return handle


def _race(call: ToolCall, settings: HookSettings) -> HookDecision:
    from mailui4agents.hooks.core import precheck
    from mailui4agents.hooks.types import ask

    decided = precheck(call, settings)
    if decided is not None:
        return decided
    if not call.session_id:
        return ask("no platform session id")
    prefix = relay_key_prefix(settings.platform, call.session_id, call.tool_name, call.tool_input)
    from mailui4agents.hooks import claims
    from mailui4agents.hooks.gateway import connect

    try:
        claim = claims.take(settings.env, prefix, settings.timeout_s + CLAIM_MARGIN_S)
    except OSError as exc:
        sys.stderr.write(f"agentmail: no dialog claim ({exc}); asking anyway\n")
        claim = ""
    gateway = connect(settings)
    previous = signal.signal(signal.SIGTERM, _on_term)
    try:
        if claim is None:
            # The Claude Code channel (mcp/channel.py) asks about this dialog:
            # open no second request; stay only to withdraw it if the terminal
            # answers "No" (SIGTERM), since the channel is never told.
            path = claims.claim_path(settings.env, prefix)
            sys.stderr.write("agentmail: the Claude Code channel asks about this dialog\n")
            sys.stderr.flush()
            claims.wait_released(path, time.monotonic() + settings.timeout_s)
            return ask("asked through the Claude Code channel")
        decision = ask_remotely(call, settings, gateway, prefix)
    except _Stopped:
        signal.signal(signal.SIGTERM, signal.SIG_IGN)
        gateway.abort()
        withdraw(settings, prefix)
        return ask("the terminal answered first")
    finally:
        if signal.getsignal(signal.SIGTERM) is _on_term:
            signal.signal(signal.SIGTERM, previous)
        if claim:
            claims.release(claim)
    return decision


def ask_remotely(
    call: ToolCall, settings: HookSettings, gateway: lite.Gateway, prefix: str
) -> HookDecision:
    """Ask the session's deciders about ``call`` (relay key ``prefix`` + a random
    tail) while the terminal's dialog is up, and wait. ``ask`` when the remote
    side cannot answer, so the dialog decides. Shared by the ``PermissionRequest``
    hook and the Claude Code channel (mcp/channel.py)."""
    from mailui4agents.client import lite
    from mailui4agents.hooks.gateway import ask_gateway
    from mailui4agents.hooks.outcomes import REFUSED
    from mailui4agents.hooks.types import ask

    decision = ask_gateway(
        call, settings, gateway, lite.clock() + settings.timeout_s, key_prefix=prefix
    )
    if decision.verdict == "deny" and decision.reason.startswith(("timed out", REFUSED)):
        # Nobody answered remotely in time, or the gateway would not take the
        # request (say, the owner is not one of the agent's): the dialog is
        # still up, and the person at the terminal can still answer it.
        sys.stderr.write(f"agentmail: not asked remotely: {decision.reason}\n")
        return ask(decision.reason)
    return decision


def withdraw(settings: HookSettings, prefix: str) -> list[str]:
    from mailui4agents.client import ApiError, lite
    from mailui4agents.hooks.gateway import connect

    gateway = connect(settings)
    try:
        return gateway.withdraw(prefix, until=lite.clock() + WITHDRAW_S)
    except (ApiError, TimeoutError, OSError):
        return []  # the request expires on its own; nothing runs from it
    finally:
        gateway.abort()


def post_tool_use(
    platform: Platform,
) -> Callable[[dict[str, Any], Mapping[str, str]], tuple[str, int] | None]:
    """The ``PostToolUse`` handler: the tool ran, so a remote request still
    pending for it was answered in the terminal; withdraw it. Prints nothing."""

    def handle(data: dict[str, Any], env: Mapping[str, str]) -> tuple[str, int] | None:
        if not interactive(env):
            return NOTHING
        call = event_call(data)
        if not call.session_id or classify_tool(call.tool_name) != "guarded":
            return NOTHING
        settings = settings_for(platform, data, env)
        if not settings.coordinates.is_agent:
            return NOTHING
        withdraw(
            settings,
            relay_key_prefix(settings.platform, call.session_id, call.tool_name, call.tool_input),
        )
        return NOTHING

    return handle
