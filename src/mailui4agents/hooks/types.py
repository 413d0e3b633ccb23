"""The hook's data: a tool call in, a decision out, and the settings from env."""

from __future__ import annotations

import math
import os
from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Literal

from mailui4agents.client.config import ClientConfig

Verdict = Literal["allow", "deny", "ask"]

# The gateway takes request timeouts of 1 s to one day.
MAX_TIMEOUT_S = 86400.0


@dataclass(frozen=True)
class HookDecision:
    """What the hook tells the platform, and why (shown to the model or user).

    ``ask`` means "the platform's own prompt decides"; it is only given where a
    person sits at that prompt (an interactive session).
    """

    verdict: Verdict
    reason: str
    note: str | None = None  # a human's note, so platforms can pass it on to the model
    #: Further text for the model (mail that arrived while it waited), already in ``reason``.
    context: str | None = None


def allow(reason: str, note: str | None = None) -> HookDecision:
    return HookDecision("allow", reason, note)


def deny(reason: str, note: str | None = None) -> HookDecision:
    return HookDecision("deny", reason, note)


def ask(reason: str) -> HookDecision:
    return HookDecision("ask", reason)


@dataclass(frozen=True)
class ToolCall:
    """One tool call as a platform reports it."""

    tool_name: str
    tool_input: dict[str, Any]
    session_id: str | None  # the platform's own session id
    cwd: str
    tool_use_id: str | None


@dataclass(frozen=True)
class HookSettings:
    """Everything the flow reads from the environment, resolved once.

    - ``AGENTMAIL_HOOK_TIMEOUT``: seconds to wait for a human (else the platform's default)
    - ``AGENTMAIL_SESSION_ID``: the mail session of a bridge (mail-driven) turn
    - ``AGENTMAIL_OWNER``: the human asked in an interactive terminal session
    - ``AGENTMAIL_DATA_DIR``: the gateway's data dir, protected (default ./agentmail-data)
    - ``AGENTMAIL_URL`` / ``AGENTMAIL_KEY`` / ``AGENTMAIL_AGENT``: see ClientConfig
    """

    platform: str
    timeout_s: float
    mail_session_id: str | None
    owner: str | None
    data_dir: str
    home: str
    env: Mapping[str, str]
    client: ClientConfig

    @property
    def mail_driven(self) -> bool:
        """A bridge turn: nobody sits at a terminal to answer a local prompt."""
        return self.mail_session_id is not None

    @classmethod
    def from_env(
        cls, platform: str, default_timeout_s: float, call: ToolCall, env: Mapping[str, str]
    ) -> HookSettings:
        home = env.get("HOME") or str(Path.home())
        # Relative to the tool call's cwd, as the gateway would resolve it there.
        data_dir = os.path.join(call.cwd, env.get("AGENTMAIL_DATA_DIR") or "agentmail-data")
        return cls(
            platform=platform,
            timeout_s=hook_timeout(env.get("AGENTMAIL_HOOK_TIMEOUT"), default_timeout_s),
            mail_session_id=env.get("AGENTMAIL_SESSION_ID") or None,
            owner=env.get("AGENTMAIL_OWNER") or None,
            data_dir=os.path.normpath(data_dir),
            home=home,
            env=env,
            client=ClientConfig.load(env),
        )


def hook_timeout(raw: str | None, default: float) -> float:
    """AGENTMAIL_HOOK_TIMEOUT in seconds. A value that is not a positive number
    falls back to the platform default: a typo must not mean "wait forever",
    which would outlast the platform's own timeout (and it fails open)."""
    if raw:
        try:
            value = float(raw)
        except ValueError:
            return default
        if math.isfinite(value) and value > 0:
            return min(value, MAX_TIMEOUT_S)
    return default
