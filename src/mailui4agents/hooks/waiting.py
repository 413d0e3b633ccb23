"""Ask a human about one tool call and wait for the decision
(docs/behaviour.md#rules-on-the-waiting-side).

The asking itself — stream first, then the post, only this request's decision,
read back on reconnect and at the deadline — is the one protocol of
client/asking.py, shared with the MCP server; the hook runs it with the blocking
standard-library driver of client/lite.py. Here its outcomes become hook
decisions, fail-closed: only an explicit approval allows (hooks/outcomes.py),
and while the hook waits it tells a bridge it is parked (hooks/parking.py).
"""

from __future__ import annotations

import hashlib
import os

from mailui4agents.client import asking, lite
from mailui4agents.hooks.outcomes import duplicate, from_decision, from_error
from mailui4agents.hooks.parking import parked
from mailui4agents.hooks.types import HookDecision, HookSettings, ToolCall, deny

__all__ = ["ask_human"]


RULES_FILE = os.path.join(".agentmail", "rules.toml")
RULES_FILE_MAX = 64 * 1024  # domain/rules_file.MAX_FILE_BYTES; not imported: the hook stays light


def rules_file_sha256(cwd: str) -> str | None:
    """The SHA-256 of the workspace's `.agentmail/rules.toml` as it is now, or
    None without one (docs/rules.md, "The rule file"): the gateway applies the
    allow rules of the content a person accepted only while this is its hash."""
    try:
        with open(os.path.join(cwd, RULES_FILE), "rb") as f:
            data = f.read(RULES_FILE_MAX + 1)
    except OSError:
        return None
    return hashlib.sha256(data).hexdigest()


def ask_human(
    gateway: lite.Gateway,
    call: ToolCall,
    settings: HookSettings,
    *,
    session_id: str,
    key: str,
    deadline: float,
) -> HookDecision:
    """Post the request for ``call`` and wait until ``deadline`` (lite.clock)."""
    file_hash = rules_file_sha256(call.cwd)

    def post(seconds_left: float) -> dict[str, object]:
        return gateway.request_permission(
            session_id,
            key,
            until=lite.clock() + seconds_left,
            kind="approval",
            tool_name=call.tool_name,
            tool_input=call.tool_input,
            summary=_summary(call),
            # Rounded down: the gateway expires the request before this hook gives
            # up, so a human cannot approve a request nobody waits for any more.
            timeout_s=max(1, int(seconds_left)),
            rules_file_sha256=file_hash,
            # Set by the bridge only for a boundary it proved (bridge/sandbox.py).
            sandbox="proven" if settings.env.get("AGENTMAIL_SANDBOX") == "proven" else None,
        )

    mail_driven = settings.mail_driven
    news = ""
    with lite.Asker(gateway) as asker:
        left = max(deadline - lite.clock(), 0.0)
        refused = asker.opened(min(asking.CONNECT_TIMEOUT_S, left))
        if refused is not None:
            return from_error(refused.error, mail_driven=mail_driven)
        timeout_s = max(1, int(max(deadline - lite.clock(), 0.0)))
        result = asker.post(post, key, deadline)
        if isinstance(result, asking.Pending):
            with parked(settings.env, result.request_id) as parking:  # clock paused
                result = asker.wait(result, deadline)
                # Mail that reached the session while the agent waited goes to the
                # model with the decision; the bridge also delivers it next.
                news = parking.news()
    decision = _decision(result, timeout_s, mail_driven)
    if news:
        decision = decision.replace(reason=f"{decision.reason}\n\n{news}", context=news)
    return decision


def _decision(result: asking.Outcome, timeout_s: int, mail_driven: bool) -> HookDecision:
    if isinstance(result, asking.Decided):
        return from_decision(result.decision, timeout_s=timeout_s)
    if isinstance(result, asking.Duplicate):
        return duplicate()
    if isinstance(result, asking.Failed):
        return from_error(result.error, mail_driven=mail_driven)
    if result.stage == "post":
        return deny(f"timed out: the gateway did not take the request within {timeout_s} s")
    if result.failure is not None:
        # The gateway is gone at the deadline: say so, and in an interactive session
        # let the person at the terminal decide (a transient failure).
        fallback = from_error(result.failure, mail_driven=mail_driven)
        return fallback.replace(reason=f"timed out after {timeout_s} s; {fallback.reason}")
    return deny(f"timed out: nobody decided within {timeout_s} s")


def _summary(call: ToolCall) -> str | None:
    """The file a file tool writes, for the mail subject. Never the command: the
    gateway masks secrets in ``tool_input`` (and builds the subject from its
    masked command) but shows ``summary`` as given."""
    for name in ("file_path", "notebook_path", "path"):
        value = call.tool_input.get(name)
        if isinstance(value, str) and value.strip():
            return f"{call.tool_name} {value.strip().splitlines()[0]}"
    return None
