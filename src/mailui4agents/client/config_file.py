"""Where ``agentmail login`` stores its settings, and reading them back.

Standard library only (``os``, ``json``): the hook's read-only fast path reads
the file on every tool call (mailui4agents/hooks/types.py), so this module
avoids pathlib and dataclasses; mailui4agents/client/config.py builds on it.
"""

from __future__ import annotations

import json
import os
from collections.abc import Mapping
from typing import Any


def config_file_path(env: Mapping[str, str]) -> str:
    """``$XDG_CONFIG_HOME/agentmail/config.json``, default ``~/.config/agentmail/config.json``."""
    base = env.get("XDG_CONFIG_HOME") or os.path.join(os.path.expanduser("~"), ".config")
    return os.path.join(base, "agentmail", "config.json")


def read_config_file(path: str | os.PathLike[str]) -> dict[str, Any]:
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
