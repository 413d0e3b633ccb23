"""What every scripted model server shares, whatever protocol it speaks.

The Anthropic server (:mod:`tests.fakes.model_server`) came first; the OpenAI
Responses (:mod:`tests.fakes.responses_server`) and Gemini
(:mod:`tests.fakes.gemini_server`) servers reuse its :class:`Reply` and the
same script structure, over a protocol-neutral view of each request
(:class:`Seen`): the results of the tool calls that the *last* message
carries (empty when the last message is not a tool result) and the tools
offered. The CLIs are stateless towards the model — every resumed turn resends
the whole history — so a script only ever looks at one request.

- :func:`shell_then_answer` — "run X in the shell tool, then answer Y (quoting
  what the tool said, so a test sees what the model was told)".
- :func:`answer`, :func:`fail_with`, :func:`hang` — as in model_server.

The server itself is :class:`tests.fakes.http_fake.HttpFake`: a real HTTP server
on 127.0.0.1, port chosen by the OS, in a thread, logging every request.
"""

from __future__ import annotations

import json
from abc import abstractmethod
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

from tests.fakes.http_fake import HttpFake, Reply, Sse

__all__ = [
    "Reply",
    "ScriptedServer",
    "Seen",
    "Sse",
    "answer",
    "fail_with",
    "hang",
    "shell_then_answer",
]


@dataclass(frozen=True)
class Seen:
    """One request, read the same way for every protocol."""

    body: dict[str, Any]
    tool_results: list[str]  # what the tools said, when the last message is tool results
    tools: dict[str, dict[str, Any]]  # offered tool name -> its JSON-schema parameters


SeenScript = Callable[[Seen], Reply]

#: Shell tools by the names the CLIs give them (Codex, Gemini CLI, Claude-shaped).
SHELL_TOOLS = ("exec_command", "shell", "run_shell_command", "Bash", "bash")


def shell_call(tools: dict[str, dict[str, Any]], command: str) -> tuple[str, dict[str, Any]] | None:
    """A call of the first shell tool offered, its argument named as its schema says."""
    for name in SHELL_TOOLS:
        if name not in tools:
            continue
        properties = tools[name].get("properties") or {}
        key = "cmd" if "cmd" in properties else "command"
        value: Any = command
        if (properties.get(key) or {}).get("type") == "array":
            value = ["bash", "-lc", command]
        args: dict[str, Any] = {key: value}
        if "description" in properties:
            args["description"] = "write marker file"
        return name, args
    return None


def shell_then_answer(command: str, text: str) -> SeenScript:
    def script(seen: Seen) -> Reply:
        if seen.tool_results:
            return Reply(text=f"{text} [tool said: {' | '.join(seen.tool_results)}]")
        call = shell_call(seen.tools, command)
        if call is not None:
            return Reply(tool=call)
        return Reply(text=text)

    return script


def answer(text: str) -> SeenScript:
    return lambda _seen: Reply(text=text)


def fail_with(status: int, error: dict[str, Any]) -> SeenScript:
    return lambda _seen: Reply(status=status, error=error)


def hang() -> SeenScript:
    return lambda _seen: Reply(hang=True)


class ScriptedServer(HttpFake):
    """Serve ``script`` on 127.0.0.1 in a thread; subclasses speak one protocol."""

    def __init__(self, script: SeenScript) -> None:
        super().__init__()
        self.script = script

    def answer_for(self, seen: Seen) -> Reply:
        return self.script(seen)

    def model_requests(self) -> list[dict[str, Any]]:
        """The requests that asked the model for an answer (the protocol's main route)."""
        return self.requests_where(self.is_model_request)

    @abstractmethod
    def is_model_request(self, path: str) -> bool: ...

    def told(self) -> str:
        """Everything the model was sent, as one string (for `in` checks)."""
        return "\n".join(json.dumps(r["body"]) for r in self.model_requests())
