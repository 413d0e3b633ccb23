"""The server's environment: scope, ask timeout, and placeholders a platform left unexpanded."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from mailui4agents.mcp.runtime import DEFAULT_ASK_TIMEOUT_S, Runtime, ask_timeout, is_placeholder


@pytest.mark.parametrize(
    "value", ["$AGENTMAIL_KEY", "${AGENTMAIL_KEY}", "${AGENTMAIL_SESSION_ID:-}", "${X:-default}"]
)
def test_unexpanded_platform_placeholders_are_recognised(value: str) -> None:
    assert is_placeholder(value)


@pytest.mark.parametrize("value", ["am_agent_abc$def", "http://h:1/$x", "plain", "$", "${}"])
def test_real_values_are_not_mistaken_for_placeholders(value: str) -> None:
    assert not is_placeholder(value)


def test_placeholders_and_blanks_count_as_unset_so_the_stored_config_is_used(
    tmp_path: Path,
) -> None:
    stored = tmp_path / "agentmail" / "config.json"
    stored.parent.mkdir()
    stored.write_text(json.dumps({"url": "http://stored:8025", "key": "am_agent_stored"}))
    runtime = Runtime.from_env(
        {
            "XDG_CONFIG_HOME": str(tmp_path),
            "AGENTMAIL_URL": "${AGENTMAIL_URL:-}",
            "AGENTMAIL_KEY": "$AGENTMAIL_KEY",
            "AGENTMAIL_SESSION_ID": "  ",
        }
    )
    assert runtime.config.url == "http://stored:8025"
    assert runtime.config.key == "am_agent_stored"
    assert runtime.session_id is None
    assert runtime.env_overrides == ()
    assert runtime.config_file == stored


def test_the_environment_names_the_gateway_key_and_session(tmp_path: Path) -> None:
    runtime = Runtime.from_env(
        {
            "XDG_CONFIG_HOME": str(tmp_path),
            "AGENTMAIL_URL": "http://gw:9000/",
            "AGENTMAIL_KEY": "am_agent_env",
            "AGENTMAIL_SESSION_ID": "5d1e2a3b-1111-4c2d-8e9f-aa00bb11cc22",
            "AGENTMAIL_ASK_TIMEOUT": "120",
        }
    )
    assert (runtime.config.url, runtime.config.key) == ("http://gw:9000", "am_agent_env")
    assert runtime.session_id == "5d1e2a3b-1111-4c2d-8e9f-aa00bb11cc22"
    assert runtime.ask_timeout_s == 120
    assert runtime.env_overrides == ("AGENTMAIL_URL", "AGENTMAIL_KEY")


def test_a_broken_config_file_does_not_stop_the_server_from_starting(tmp_path: Path) -> None:
    broken = tmp_path / "agentmail" / "config.json"
    broken.parent.mkdir()
    broken.write_text("{not json")
    runtime = Runtime.from_env({"XDG_CONFIG_HOME": str(tmp_path)})
    assert not runtime.config.is_agent  # tools say how to connect; connect_to_server repairs it


@pytest.mark.parametrize(
    ("raw", "expected"),
    [
        (None, DEFAULT_ASK_TIMEOUT_S),
        ("", DEFAULT_ASK_TIMEOUT_S),
        ("90", 90.0),
        ("2.5", 2.5),
        ("0", DEFAULT_ASK_TIMEOUT_S),
        ("-5", DEFAULT_ASK_TIMEOUT_S),
        ("soon", DEFAULT_ASK_TIMEOUT_S),
        ("nan", DEFAULT_ASK_TIMEOUT_S),
        ("1e9", 86400.0),
    ],
)
def test_the_ask_timeout_falls_back_to_the_default_for_values_that_are_not_a_duration(
    raw: str | None, expected: float
) -> None:
    env = {} if raw is None else {"AGENTMAIL_ASK_TIMEOUT": raw}
    assert ask_timeout(env) == expected
