"""Where the client finds the gateway and its credentials.

Environment variables win over the config file that ``agentmail login`` writes:

- ``AGENTMAIL_URL``   gateway base URL (default ``http://127.0.0.1:8025``)
- ``AGENTMAIL_KEY``   an agent key (``am_agent_…``)
- ``AGENTMAIL_TOKEN`` a human API token (``am_user_…``)
- ``AGENTMAIL_AGENT`` the agent name, sent as ``X-Agent-Name``

Credentials are taken as a pair: when the environment names a key or a token,
the file's credentials are ignored, so an exported agent key never gets mixed
with a token stored by an earlier login.
"""

from __future__ import annotations

import json
import os
from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from mailui4agents.client.config_file import (
    DEFAULT_URL,
    Coordinates,
    Credentials,
    config_file_path,
)
from mailui4agents.client.config_file import read_config_file as read_config_file
from mailui4agents.private_files import private_dir

__all__ = ["DEFAULT_URL", "ClientConfig", "config_path", "read_config_file", "write_config_file"]


@dataclass(frozen=True, slots=True)
class ClientConfig(Credentials):
    """Gateway URL plus one credential: an agent ``key`` or a human ``token``."""

    url: str = DEFAULT_URL
    key: str | None = None
    token: str | None = None
    agent_name: str | None = None

    @classmethod
    def load(cls, env: Mapping[str, str] | None = None, path: Path | None = None) -> ClientConfig:
        """Build a config from ``env`` (default ``os.environ``) and the config file."""
        environ = os.environ if env is None else env
        return cls.from_stored(
            environ, read_config_file(path if path is not None else config_path(environ))
        )

    @classmethod
    def from_stored(cls, environ: Mapping[str, str], stored: Mapping[str, Any]) -> ClientConfig:
        """Build a config from ``environ`` and the config file's already-read contents."""
        found = Coordinates.resolve(environ, stored)
        return cls(url=found.url, key=found.key, token=found.token, agent_name=found.agent_name)


def config_path(env: Mapping[str, str] | None = None) -> Path:
    """``$XDG_CONFIG_HOME/agentmail/config.json``, default ``~/.config/agentmail/config.json``."""
    return Path(config_file_path(os.environ if env is None else env))


def write_config_file(
    values: Mapping[str, Any], path: Path | None = None, *, merge: bool = True
) -> Path:
    """Write ``values`` (merged into what is stored, unless ``merge`` is False), mode 0600.

    The file holds a token, so it is never world-readable, not even briefly: a
    temporary file is created with mode 0600 and renamed over the old one.
    """
    target = path if path is not None else config_path()
    private_dir(target.parent)  # missing parents too: mkdir(parents=True) gave them 0777
    merged = {**read_config_file(target), **values} if merge else dict(values)
    temporary = target.with_name(f".{target.name}.{os.getpid()}.tmp")
    fd = os.open(temporary, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o600)
    try:
        with os.fdopen(fd, "w", encoding="utf-8") as handle:
            os.fchmod(handle.fileno(), 0o600)  # O_CREAT's mode skips a leftover file
            json.dump(merged, handle, indent=2, sort_keys=True)
            handle.write("\n")
    except BaseException:
        temporary.unlink(missing_ok=True)
        raise
    os.replace(temporary, target)
    return target
