"""What a finished turn process means: the model's final answer, whether the turn
failed and why (bridge/failures.py classifies), and the mails its processes sent."""

from __future__ import annotations

from pathlib import Path

from mailui4agents.bridge import failures
from mailui4agents.bridge.failures import Failure
from mailui4agents.bridge.process import ProcessResult
from mailui4agents.bridge.runners.base import FinalText, Runner, Text, TurnError, TurnEvent


def read_sent(path: Path) -> list[str]:
    """The mail ids the turn's processes sent (see ``AGENTMAIL_SENT_LOG``)."""
    try:
        return [line for line in path.read_text().split() if line]
    except OSError:
        return []


def final_text(events: list[TurnEvent]) -> str:
    """The platform's final answer, else every text the model said."""
    texts: list[str] = []
    for event in events:
        if isinstance(event, FinalText):
            texts = [event.text]
        elif isinstance(event, Text):
            texts.append(event.text)
    return "\n".join(texts)


def turn_failure(result: ProcessResult, *, resumed: bool, runner: Runner) -> Failure | None:
    """Why the turn failed, or None when it completed."""
    if result.spawn_error is not None:
        return Failure("cli_missing", result.spawn_error)
    if result.timed_out:
        return Failure(
            "timeout", f"stopped after the turn timeout; last stderr:\n{result.stderr_tail}"
        )
    errors = [e.message for e in result.events if isinstance(e, TurnError)]
    if not errors and result.returncode == 0:
        return None
    status = f"{runner.name} exited with status {result.returncode}"
    detail = "\n".join([*errors, status, result.stderr_tail]).strip()
    return failures.classify(detail, resumed=resumed)
