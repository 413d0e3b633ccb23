"""``ask_human``: a question to the deciders of the current mail session, and the
wait for their answer (docs/behaviour.md#questions). The asking itself — stream
first, then the post, only this question's decision, read back on reconnect and
at the deadline — is the one protocol of client/asking.py, run by its anyio
driver (client/waiting.py).

Every way of not getting an answer is an error with its own words: the human
refused (with the note), nobody answered in time ("timed out waiting for an
answer"), the gateway expired or cancelled the question, or refused to ask.
"""

from __future__ import annotations

import math
from collections.abc import Sequence

import anyio
from mcp.server.fastmcp.exceptions import ToolError

from mailui4agents.client import AsyncClient, waiting
from mailui4agents.client.asking import Decision
from mailui4agents.domain.decided_via import via_text
from mailui4agents.domain.relay_keys import ask_relay_key as relay_key
from mailui4agents.wire.models import Duplicate, PermissionOut


async def ask(
    client: AsyncClient,
    *,
    session_id: str,
    question: str,
    options: Sequence[str] | None,
    multi_select: bool,
    timeout_s: float,
) -> str:
    """Post the question and wait at most ``timeout_s`` for the answer text."""
    deadline = anyio.current_time() + timeout_s
    key = relay_key(session_id)

    async def post(seconds_left: float) -> PermissionOut | Duplicate:
        return await client.request_permission(
            session_id,
            key,
            kind="question",
            question=question,
            options=[{"label": label} for label in options] if options else None,
            multi_select=True if options and multi_select else None,
            # The gateway expires the question when this call gives up on it, so
            # nobody answers a question that no one waits for any more.
            timeout_s=max(1, math.ceil(seconds_left)),
        )

    result = await waiting.ask_and_wait(client, post, key, deadline)
    if isinstance(result, waiting.Decided):
        return outcome(result.decision, timeout_s)
    if isinstance(result, waiting.Duplicate):
        raise ToolError("the gateway already has this question (duplicate relay key); not asked")
    if isinstance(result, waiting.TimedOut):
        raise ToolError(_timed_out(timeout_s))
    error = result.error
    if result.stage == "post":
        raise ToolError(f"the gateway did not ask: {error.message}")
    if error.permanent:
        raise ToolError(f"the gateway refused the event stream: {error.message}")
    raise ToolError(f"the gateway is unavailable, nobody was asked: {error.message}")


def outcome(closed: Decision, timeout_s: float) -> str:
    """The answer text of a decided question, saying who answered from where
    ("ana answered from Ana's phone: yes"), or the ToolError that says why there
    is none."""
    decision = closed.decision
    note_text = closed.note.strip() if closed.note is not None else ""
    who = closed.decided_by or "someone"
    via = closed.decided_via
    where = via_text(via.channel, via.device) if via is not None else ""
    if decision == "approve":
        answers = [a for a in closed.answers or () if a.strip()]
        if not answers:
            text = f"{who} accepted{where} without an answer text"
        elif len(answers) == 1:
            text = f"{who} answered{where}: {answers[0]}"
        else:
            text = f"{who} answered{where}:\n" + "\n".join(f"- {a}" for a in answers)
        return f"{text}\nnote: {note_text}" if note_text else text
    if decision == "deny":
        raise ToolError(
            f"the human refused (denied by {who}{where}): {note_text or '(no note given)'}"
        )
    if decision == "expired":
        # The gateway expires the question as this call gives up: the same outcome
        # as our own deadline, in the same words (whichever comes first).
        raise ToolError(_timed_out(timeout_s))
    if decision == "cancelled":
        raise ToolError(
            f"the question was cancelled by {who} (the session was archived or closed); "
            "there is no answer"
        )
    raise ToolError(f"no answer: the gateway reported decision {decision!r}")


def _timed_out(timeout_s: float) -> str:
    return (
        f"timed out waiting for an answer after {timeout_s:g} s "
        "(nobody answered; ask again later or go on without the answer)"
    )
