"""Tests for where the client finds its gateway and credentials."""

from __future__ import annotations

import json
import stat
from pathlib import Path

import pytest

from mailui4agents.client.config import (
    DEFAULT_URL,
    ClientConfig,
    config_path,
    read_config_file,
    write_config_file,
)


def mode_of(path: Path) -> int:
    return stat.S_IMODE(path.stat().st_mode)


def test_the_config_file_lives_under_xdg_config_home_or_dot_config() -> None:
    assert config_path({"XDG_CONFIG_HOME": "/x"}) == Path("/x/agentmail/config.json")
    assert config_path({}) == Path.home() / ".config" / "agentmail" / "config.json"


def test_nothing_configured_means_the_local_gateway_and_no_credential(tmp_path: Path) -> None:
    config = ClientConfig.load(env={}, path=tmp_path / "missing.json")
    assert config == ClientConfig(url=DEFAULT_URL)
    assert config.credential is None


def test_the_environment_wins_over_the_file(tmp_path: Path) -> None:
    path = write_config_file({"url": "http://file:1", "token": "am_user_file"}, tmp_path / "c.json")
    env = {"AGENTMAIL_URL": "http://env:2/", "AGENTMAIL_TOKEN": "am_user_env"}
    config = ClientConfig.load(env=env, path=path)
    assert config.url == "http://env:2"
    assert config.token == "am_user_env"


def test_an_agent_key_in_the_environment_replaces_the_stored_token(tmp_path: Path) -> None:
    path = write_config_file({"token": "am_user_file"}, tmp_path / "c.json")
    env = {"AGENTMAIL_KEY": "am_agent_env", "AGENTMAIL_AGENT": "claude"}
    config = ClientConfig.load(env=env, path=path)
    assert (config.key, config.token, config.agent_name) == ("am_agent_env", None, "claude")
    assert config.is_agent


def test_the_stored_token_is_used_when_the_environment_has_none(tmp_path: Path) -> None:
    path = write_config_file({"url": "http://file:1", "token": "am_user_file"}, tmp_path / "c.json")
    config = ClientConfig.load(env={}, path=path)
    assert (config.url, config.credential, config.is_agent) == (
        "http://file:1",
        "am_user_file",
        False,
    )


def test_the_config_file_is_created_readable_by_its_owner_only(tmp_path: Path) -> None:
    path = write_config_file({"token": "am_user_secret"}, tmp_path / "agentmail" / "config.json")
    assert mode_of(path) == 0o600
    assert mode_of(path.parent) == 0o700
    assert json.loads(path.read_text()) == {"token": "am_user_secret"}


def test_rewriting_a_world_readable_config_file_makes_it_private(tmp_path: Path) -> None:
    path = tmp_path / "config.json"
    path.write_text('{"url": "http://old"}')
    path.chmod(0o644)
    write_config_file({"token": "am_user_secret"}, path)
    assert mode_of(path) == 0o600
    assert read_config_file(path) == {"url": "http://old", "token": "am_user_secret"}
    assert [p.name for p in tmp_path.iterdir()] == ["config.json"]  # no temporary left


def test_a_broken_config_file_is_reported_with_its_path(tmp_path: Path) -> None:
    path = tmp_path / "config.json"
    path.write_text("{not json")
    with pytest.raises(ValueError, match=r"config\.json"):
        read_config_file(path)
