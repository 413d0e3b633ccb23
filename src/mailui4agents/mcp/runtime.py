"""What the MCP server holds while it runs: the gateway client, the session it
works in, and how long ``ask_human`` may wait.

Environment:

- ``AGENTMAIL_URL``, ``AGENTMAIL_KEY`` (an agent key), ``AGENTMAIL_AGENT`` — or,
  when unset, what the config file holds (``connect_to_server`` writes it).
- ``AGENTMAIL_SESSION_ID`` — the mail session this agent works in. Every read is
  scoped to it and every send names it as ``from_session_id``; the model never
  chooses another scope (docs/access.md).
- ``AGENTMAIL_ASK_TIMEOUT`` — seconds ``ask_human`` waits (default 50, below the
  common 60 s client tool timeout; raise it together with the client's timeout).

Agent platforms expand ``${VAR}`` in their MCP configs, some only when the
variable is set: a value still reading ``$VAR`` or ``${VAR:-x}`` was never
expanded and counts as unset (with a warning), so a placeholder is never used
as a key or as a session id.
"""

from __future__ import annotations

import logging
import math
import os
import re
from collections.abc import Mapping
from pathlib import Path
from urllib.parse import urlsplit

import httpx
from mcp.server.fastmcp.exceptions import ToolError

from mailui4agents.client import ApiError, AsyncClient, ClientConfig
from mailui4agents.client.config import (
    DEFAULT_URL,
    config_path,
    read_config_file,
    write_config_file,
)

log = logging.getLogger("mailui4agents.mcp")

SESSION_VAR = "AGENTMAIL_SESSION_ID"
ASK_TIMEOUT_VAR = "AGENTMAIL_ASK_TIMEOUT"
DEFAULT_ASK_TIMEOUT_S = 50.0
MAX_ASK_TIMEOUT_S = 86400.0  # the gateway's limit on a request's lifetime
_PLACEHOLDER = re.compile(
    r"^\$(\{[A-Za-z_][A-Za-z0-9_]*(:?[-=?+][^}]*)?\}|[A-Za-z_][A-Za-z0-9_]*)$"
)

NO_KEY = (
    "not connected: this MCP server has no agent key. Set AGENTMAIL_KEY (and "
    "AGENTMAIL_URL) in the MCP server's environment, or call connect_to_server(url, key)."
)


def is_placeholder(value: str) -> bool:
    """True for ``$VAR``, ``${VAR}`` or ``${VAR:-default}`` left unexpanded."""
    return _PLACEHOLDER.match(value.strip()) is not None


def clean_environment(env: Mapping[str, str]) -> dict[str, str]:
    """``env`` without AGENTMAIL_* values that are blank or unexpanded placeholders."""
    cleaned: dict[str, str] = {}
    for name, value in env.items():
        if name.startswith("AGENTMAIL_"):
            if not value.strip():
                continue
            if is_placeholder(value):
                log.warning("%s=%r was never expanded by the agent platform; ignored", name, value)
                continue
        cleaned[name] = value
    return cleaned


def ask_timeout(env: Mapping[str, str]) -> float:
    """``AGENTMAIL_ASK_TIMEOUT`` in seconds; a bad value falls back to the default, loudly."""
    raw = env.get(ASK_TIMEOUT_VAR, "").strip()
    if not raw:
        return DEFAULT_ASK_TIMEOUT_S
    try:
        value = float(raw)
    except ValueError:
        value = math.nan
    if not math.isfinite(value) or value <= 0:
        log.warning(
            "%s=%r is not a positive number of seconds; using %g",
            ASK_TIMEOUT_VAR, raw, DEFAULT_ASK_TIMEOUT_S,
        )  # fmt: skip
        return DEFAULT_ASK_TIMEOUT_S
    return min(value, MAX_ASK_TIMEOUT_S)


class Runtime:
    """The client the tools use, switchable at run time by ``connect_to_server``."""

    def __init__(
        self,
        config: ClientConfig,
        *,
        session_id: str | None = None,
        ask_timeout_s: float = DEFAULT_ASK_TIMEOUT_S,
        config_file: Path | None = None,
        env_overrides: tuple[str, ...] = (),
        transport: httpx.AsyncBaseTransport | None = None,
    ) -> None:
        self.config = config
        self.session_id = session_id
        self.ask_timeout_s = ask_timeout_s
        self.config_file = config_file if config_file is not None else config_path()
        #: AGENTMAIL_URL/AGENTMAIL_KEY set in the environment: they win over the file.
        self.env_overrides = env_overrides
        self._transport = transport
        self._client: AsyncClient | None = None
        self._retired: list[AsyncClient] = []

    @classmethod
    def from_env(
        cls,
        env: Mapping[str, str] | None = None,
        *,
        transport: httpx.AsyncBaseTransport | None = None,
    ) -> Runtime:
        environ = clean_environment(os.environ if env is None else env)
        file = config_path(environ)
        try:
            config = ClientConfig.load(environ, file)
        except ValueError as error:  # a broken file: start anyway, connect_to_server repairs it
            log.warning("cannot read %s (%s); starting without stored settings", file, error)
            config = ClientConfig(
                url=(environ.get("AGENTMAIL_URL") or DEFAULT_URL).rstrip("/"),
                key=environ.get("AGENTMAIL_KEY"),
                token=environ.get("AGENTMAIL_TOKEN"),
                agent_name=environ.get("AGENTMAIL_AGENT"),
            )
        return cls(
            config,
            session_id=environ.get(SESSION_VAR),
            ask_timeout_s=ask_timeout(environ),
            config_file=file,
            env_overrides=tuple(v for v in ("AGENTMAIL_URL", "AGENTMAIL_KEY") if v in environ),
            transport=transport,
        )

    def client(self) -> AsyncClient:
        """The agent client; a ToolError when there is no agent key to speak with."""
        if not self.config.is_agent:
            if self.config.token:
                raise ToolError(
                    NO_KEY + " (A person's token is configured instead, e.g. AGENTMAIL_TOKEN; "
                    "these tools speak for an agent.)"
                )
            raise ToolError(NO_KEY)
        if self._client is None:
            self._client = self._make(self.config)
        return self._client

    def _make(self, config: ClientConfig) -> AsyncClient:
        return AsyncClient(config, transport=self._transport)

    async def connect(self, url: str, key: str) -> list[str]:
        """Verify ``url`` + ``key`` with a heartbeat, save them, switch to them.

        Nothing is saved or switched unless the gateway accepted the key. Returns
        notes for the model (where it was saved, what still overrides it).
        """
        url, key = url.strip().rstrip("/"), key.strip()
        parts = urlsplit(url)
        if parts.scheme not in ("http", "https") or not parts.netloc:
            raise ToolError(f"not a gateway URL: {url!r} (expected http://host:port)")
        if not key:
            raise ToolError("the key is empty")
        candidate = ClientConfig(url=url, key=key)
        client = self._make(candidate)
        try:
            await client.heartbeat()
        except ApiError as error:
            await client.aclose()
            raise ToolError(
                f"not connected, nothing saved: the gateway at {url} refused: {error.message}"
            ) from error
        try:
            stored = read_config_file(self.config_file)
        except ValueError:
            stored = {}  # unreadable: replaced by what was just verified
        previous_key = stored.get("key")
        stored.update(url=url, key=key)
        if previous_key != key:
            stored.pop("agent_name", None)  # it named the agent of the old key
        try:
            write_config_file(stored, self.config_file, merge=False)
        except OSError as error:
            await client.aclose()
            raise ToolError(
                f"the gateway accepted the key, but saving {self.config_file} failed "
                f"({error}); still using {self.config.url}"
            ) from error
        if self._client is not None:
            # A call still running (ask_human) keeps its client until shutdown.
            self._retired.append(self._client)
        self._client, self.config = client, candidate
        notes = [f"saved to {self.config_file}"]
        if self.env_overrides:
            names = " and ".join(self.env_overrides)
            notes.append(
                f"{names} set in this MCP server's environment take precedence over the "
                "saved file when the server starts again: update them too"
            )
        if stored.get("token"):
            notes.append(
                "that file also holds a person's login token; `agentmail` CLI commands run "
                "there now act as this agent unless AGENTMAIL_TOKEN is set"
            )
        return notes

    async def aclose(self) -> None:
        for client in [*self._retired, *([self._client] if self._client else [])]:
            await client.aclose()
        self._retired.clear()
        self._client = None
