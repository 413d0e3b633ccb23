"""The hook's data: a tool call in, a decision out, and the settings from env.

Plain slotted classes, not dataclasses: this module is on the hook's read-only
fast path (mailui4agents/hooks/core.py), where importing ``dataclasses`` (and
``inspect`` with it) and ``pathlib`` cost more than the decision itself.
"""

from __future__ import annotations

import math
import os
from collections.abc import Mapping
from typing import Any, Literal

from mailui4agents.client.config_file import Coordinates, config_file_path, read_config_file
from mailui4agents.domain.values import Value

Verdict = Literal["allow", "deny", "ask"]

# The gateway takes request timeouts of 1 s to one day.
MAX_TIMEOUT_S = 86400.0


class HookDecision(Value):
    """What the hook tells the platform, and why (shown to the model or user).

    ``ask`` means "the platform's own prompt decides"; it is only given where a
    person sits at that prompt (an interactive session). ``note`` is a human's
    note, so platforms can pass it on to the model; ``context`` is further text
    for the model (mail that arrived while it waited), already in ``reason``.
    """

    __slots__ = ("context", "note", "reason", "verdict")
    verdict: Verdict
    reason: str
    note: str | None
    context: str | None

    def __init__(
        self, verdict: Verdict, reason: str, note: str | None = None, context: str | None = None
    ) -> None:
        self._init(verdict=verdict, reason=reason, note=note, context=context)

    def replace(self, *, reason: str, context: str | None = None) -> HookDecision:
        """A copy with another reason (and context, when given)."""
        return HookDecision(
            self.verdict, reason, self.note, self.context if context is None else context
        )


def allow(reason: str, note: str | None = None) -> HookDecision:
    return HookDecision("allow", reason, note)


def deny(reason: str, note: str | None = None) -> HookDecision:
    return HookDecision("deny", reason, note)


def ask(reason: str) -> HookDecision:
    return HookDecision("ask", reason)


class ToolCall(Value):
    """One tool call as a platform reports it (``session_id``: the platform's own)."""

    __slots__ = ("cwd", "session_id", "tool_input", "tool_name", "tool_use_id")
    tool_name: str
    tool_input: dict[str, Any]
    session_id: str | None
    cwd: str
    tool_use_id: str | None

    def __init__(
        self,
        tool_name: str,
        tool_input: dict[str, Any],
        session_id: str | None,
        cwd: str,
        tool_use_id: str | None,
    ) -> None:
        self._init(
            tool_name=tool_name,
            tool_input=tool_input,
            session_id=session_id,
            cwd=cwd,
            tool_use_id=tool_use_id,
        )

    def __hash__(self) -> int:  # tool_input is a dict
        return hash((self.tool_name, self.session_id, self.cwd, self.tool_use_id))


class HookSettings(Value):
    """Everything the flow reads from the environment, resolved once.

    - ``AGENTMAIL_HOOK_TIMEOUT``: seconds to wait for a human (else the platform's default)
    - ``AGENTMAIL_SESSION_ID``: the mail session of a bridge (mail-driven) turn
    - ``AGENTMAIL_OWNER``: the human asked in an interactive terminal session
    - ``AGENTMAIL_INTERACTIVE``: ``1`` when the terminal's own dialog races the
      remote ask (``agentmail install-hook claude-code --interactive``); then the
      owner defaults to the person who ran ``agentmail login`` (the config
      file's ``username``), since the terminal can always answer itself
    - ``AGENTMAIL_DATA_DIR``: the gateway's data dir, protected (default ./agentmail-data)
    - ``AGENTMAIL_URL`` / ``AGENTMAIL_KEY`` / ``AGENTMAIL_AGENT``: see client/config.py

    The config file is read (and a broken one refused) in :meth:`from_env`;
    ``coordinates`` resolves the gateway and credential from it (standard
    library only: a call decided without the gateway imports no client).
    """

    __slots__ = (
        "data_dir",
        "env",
        "home",
        "interactive",
        "mail_session_id",
        "owner",
        "platform",
        "stored",
        "timeout_s",
    )
    platform: str
    timeout_s: float
    mail_session_id: str | None
    owner: str | None
    data_dir: str
    home: str
    env: Mapping[str, str]
    stored: Mapping[str, Any]  # the config file's contents
    interactive: bool

    def __init__(
        self,
        *,
        platform: str,
        timeout_s: float,
        mail_session_id: str | None,
        owner: str | None,
        data_dir: str,
        home: str,
        env: Mapping[str, str],
        stored: Mapping[str, Any],
        interactive: bool = False,
    ) -> None:
        self._init(
            platform=platform,
            timeout_s=timeout_s,
            mail_session_id=mail_session_id,
            owner=owner,
            data_dir=data_dir,
            home=home,
            env=env,
            stored=stored,
            interactive=interactive,
        )

    @property
    def coordinates(self) -> Coordinates:
        """The gateway's URL and the credential (environment first, then the
        config file: client/config.py's rules), without importing the client
        package (the hook's ask path, hooks/gateway.py)."""
        return Coordinates.resolve(self.env, self.stored)

    def __hash__(self) -> int:  # env and stored are mappings
        return hash((self.platform, self.timeout_s, self.mail_session_id, self.data_dir))

    @property
    def mail_driven(self) -> bool:
        """A bridge turn: nobody sits at a terminal to answer a local prompt."""
        return self.mail_session_id is not None

    @classmethod
    def from_env(
        cls, platform: str, default_timeout_s: float, call: ToolCall, env: Mapping[str, str]
    ) -> HookSettings:
        """Raises OSError or ValueError for an unreadable config file."""
        home = env.get("HOME") or os.path.expanduser("~")
        # Relative to the tool call's cwd, as the gateway would resolve it there.
        data_dir = os.path.join(call.cwd, env.get("AGENTMAIL_DATA_DIR") or "agentmail-data")
        stored = read_config_file(config_file_path(env))
        interactive = env.get("AGENTMAIL_INTERACTIVE") == "1"
        owner = env.get("AGENTMAIL_OWNER") or None
        if owner is None and interactive:
            # Only where the terminal's dialog stays up: without the race, an
            # owner makes every guarded call wait for a remote answer.
            username = stored.get("username")
            owner = username if isinstance(username, str) and username else None
        return cls(
            platform=platform,
            timeout_s=hook_timeout(env.get("AGENTMAIL_HOOK_TIMEOUT"), default_timeout_s),
            mail_session_id=env.get("AGENTMAIL_SESSION_ID") or None,
            owner=owner,
            data_dir=os.path.normpath(data_dir),
            home=home,
            env=env,
            stored=stored,
            interactive=interactive,
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
