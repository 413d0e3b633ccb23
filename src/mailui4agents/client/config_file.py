"""Where ``agentmail login`` stores its settings, and reading them back.

Standard library only (``os``, ``json``): the hook reads the file on every tool
call (mailui4agents/hooks/types.py), so this module avoids pathlib and
dataclasses; mailui4agents/client/config.py builds on it.
"""

from __future__ import annotations

import json
import os
from collections.abc import Mapping
from typing import Any

from mailui4agents.domain.json_types import JsonObject
from mailui4agents.domain.values import Value

DEFAULT_URL = "http://127.0.0.1:8025"


def config_file_path(env: Mapping[str, str]) -> str:
    """``$XDG_CONFIG_HOME/agentmail/config.json``, default ``~/.config/agentmail/config.json``."""
    base = env.get("XDG_CONFIG_HOME") or os.path.join(os.path.expanduser("~"), ".config")
    return os.path.join(base, "agentmail", "config.json")


def read_config_file(path: str | os.PathLike[str]) -> JsonObject:
    """The stored settings, or ``{}`` when the file does not exist."""
    try:
        with open(path, encoding="utf-8") as handle:
            raw = handle.read()
    except FileNotFoundError:
        return {}
    try:
        data = json.loads(raw)
    except json.JSONDecodeError as exc:
        raise ValueError(f"{path}: not valid JSON ({exc})") from exc
    if not isinstance(data, dict):
        raise ValueError(f"{path}: expected a JSON object")
    return data


class Credentials:
    """What `key` and `token` mean, for Coordinates and client/config.ClientConfig."""

    __slots__ = ()
    key: str | None
    token: str | None

    @property
    def is_agent(self) -> bool:
        """True when the client speaks for an agent (uses the ``/agent`` routes)."""
        return self.key is not None

    @property
    def credential(self) -> str | None:
        """The bearer credential to send; the agent key wins when both are set."""
        return self.key if self.key is not None else self.token


class Coordinates(Value, Credentials):
    """Where the gateway is and one credential, resolved from the environment and
    the config file (the rules are in client/config.py's docstring; ClientConfig
    is built from this)."""

    __slots__ = ("agent_name", "key", "token", "url")
    url: str
    key: str | None
    token: str | None
    agent_name: str | None

    def __init__(
        self, url: str, key: str | None, token: str | None, agent_name: str | None
    ) -> None:
        self._init(url=url, key=key, token=token, agent_name=agent_name)

    @classmethod
    def resolve(cls, environ: Mapping[str, str], stored: Mapping[str, Any]) -> Coordinates:
        """Environment variables win; credentials are taken as a pair."""
        env_key = environ.get("AGENTMAIL_KEY") or None
        env_token = environ.get("AGENTMAIL_TOKEN") or None
        if env_key or env_token:
            key, token = env_key, env_token
        else:
            key, token = _str_or_none(stored.get("key")), _str_or_none(stored.get("token"))
        url = environ.get("AGENTMAIL_URL") or _str_or_none(stored.get("url")) or DEFAULT_URL
        agent = environ.get("AGENTMAIL_AGENT") or _str_or_none(stored.get("agent_name"))
        return cls(url.rstrip("/"), key, token, agent)


def _str_or_none(value: object) -> str | None:
    return value if isinstance(value, str) and value else None
