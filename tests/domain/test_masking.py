"""Tests for masking secrets in tool input before a human sees it."""

from __future__ import annotations

import json
import time
from typing import Any

import pytest
from hypothesis import given
from hypothesis import strategies as st

from mailui4agents.domain.masking import mask_secrets

# --- secret keys -------------------------------------------------------------------------------


@pytest.mark.parametrize(
    "key",
    [
        "password",
        "PASSWORD",
        "Passwd",
        "secret",
        "client_secret",
        "token",
        "github_token",
        "GITHUB_TOKEN",
        "accessToken",
        "api_key",
        "apiKey",
        "x-api-key",
        "APIKEY",
        "authorization",
        "Authorization",
        "auth",
        "Auth",
        "auth_header",
        "authHeader",
        "private_key",
        "privateKey",
        "access_key",
        "aws_secret_access_key",
        "credential",
        "credentials",
        "passphrase",
    ],
)
def test_the_value_under_a_secret_looking_key_is_masked_whatever_its_type(key: str) -> None:
    for value in ("hunter2", 12345, {"nested": "x"}, ["a", "b"], None):
        assert mask_secrets({key: value, "keep": "visible"}) == {key: "***", "keep": "visible"}


@pytest.mark.parametrize(
    "key", ["author", "authors", "description", "command", "file_path", "path", "user", "keep"]
)
def test_ordinary_keys_are_left_alone(key: str) -> None:
    assert mask_secrets({key: "plain"}) == {key: "plain"}


def test_secret_keys_are_found_at_any_depth() -> None:
    value = {"a": [{"b": {"password": "p"}}, ({"token": "t"},)], "c": "ok"}
    assert mask_secrets(value) == {
        "a": [{"b": {"password": "***"}}, ({"token": "***"},)],
        "c": "ok",
    }


# --- secrets inside strings ----------------------------------------------------------------------


@pytest.mark.parametrize(
    ("text", "secret"),
    [
        ("use am_agent_AbC-123_xyz now", "AbC-123_xyz"),
        ("token am_user_QQQ-zzz", "QQQ-zzz"),
        ('curl -H "Authorization: Bearer eyJhbGciOi.abc.def" https://x', "eyJhbGciOi.abc.def"),
        ("bearer abc123", "abc123"),
        ("key sk-ant-api03-AbCdEf123456 ok", "AbCdEf123456"),
        ("key sk-proj-abcdefgh ok", "abcdefgh"),
        ("git remote add o https://x:ghp_abcdefghijklmnop@github.com", "abcdefghijklmnop"),
        ("gho_abcdefghijkl", "abcdefghijkl"),
        ("github_pat_11ABCDEFG_abcdefgh", "11ABCDEFG_abcdefgh"),
        ("SLACK=xoxb-1234-5678-abcdefgh", "abcdefgh"),
        ("aws AKIAIOSFODNN7EXAMPLE here", "AKIAIOSFODNN7EXAMPLE"),
        ("GITHUB_TOKEN=s3cr3tvalue git push", "s3cr3tvalue"),
        ("export API_KEY='a b c'; make", "a b c"),
        ('PASSWORD="hunter 2" ./run', "hunter 2"),
        ("mysql --password hunter2 -u root", "hunter2"),
        ("tool --token=abc123 --verbose", "abc123"),
        ("tool --api-key abc123", "abc123"),
        ("tool -auth abc123", "abc123"),
        ("psql postgresql://bob:hunter2@db/x", "hunter2"),
        ('curl -d \'{"password": "hunter2"}\' https://x', "hunter2"),
        ("client_secret: abcdef", "abcdef"),
        (
            "-----BEGIN OPENSSH PRIVATE KEY-----\nb3BlbnNzaA\n-----END OPENSSH PRIVATE KEY-----",
            "b3BlbnNzaA",
        ),
    ],
)
def test_secrets_inside_strings_are_masked(text: str, secret: str) -> None:
    masked = mask_secrets({"command": text})
    assert isinstance(masked, dict)
    assert secret not in masked["command"]
    assert "***" in masked["command"]


@pytest.mark.parametrize(
    "text",
    [
        "git status",
        "git commit -m 'fix the auth flow'",
        "PATH=/usr/bin:$PATH make",
        "author: Alice",
        "ls -la /srv/shop",
        "pytest -k token_budget",
        "echo skip-this",
        "https://example.com/path",
    ],
)
def test_ordinary_text_is_left_alone(text: str) -> None:
    assert mask_secrets(text) == text


def test_a_masked_value_keeps_its_quotes_so_json_stays_readable() -> None:
    masked = mask_secrets('{"password": "hunter2", "user": "bob"}')
    assert masked == '{"password": "***", "user": "bob"}'
    assert json.loads(str(masked)) == {"password": "***", "user": "bob"}


def test_our_own_credentials_keep_their_prefix_so_the_reader_knows_what_was_hidden() -> None:
    assert mask_secrets("am_agent_abcdef") == "am_agent_***"
    assert mask_secrets("am_user_abcdef") == "am_user_***"


# --- copying and robustness ---------------------------------------------------------------


def test_the_input_is_not_changed_and_the_result_is_a_copy() -> None:
    original: dict[str, Any] = {"password": "p", "list": [{"command": "TOKEN=x ls"}]}
    masked = mask_secrets(original)
    assert original == {"password": "p", "list": [{"command": "TOKEN=x ls"}]}
    assert isinstance(masked, dict)
    masked["list"].append("new")
    assert len(original["list"]) == 1


@pytest.mark.parametrize("value", [None, True, False, 0, -3, 2.5, "", [], {}, ()])
def test_plain_json_scalars_and_empty_containers_come_back_equal(value: object) -> None:
    assert mask_secrets(value) == value


def test_odd_input_never_raises() -> None:
    class Unprintable:
        def __str__(self) -> str:
            raise RuntimeError("no")

    cyclic: dict[str, object] = {}
    cyclic["self"] = cyclic
    odd: list[object] = [
        Unprintable(),
        object(),
        b"TOKEN=abc",
        bytearray(b"\xff\xfe"),
        {1: "a", (2, 3): "b", None: "c"},
        cyclic,
        float("nan"),
        "\ud800",
        {"password": Unprintable()},
    ]
    for value in odd:
        mask_secrets(value)
    assert mask_secrets(b"TOKEN=abc") == "TOKEN=***"
    assert mask_secrets([Unprintable(), "ok"]) == ["***", "ok"]


def test_a_deep_or_cyclic_structure_is_cut_off_as_masked() -> None:
    deep: list[object] = []
    level = deep
    for _ in range(5000):
        child: list[object] = []
        level.append(child)
        level = child
    level.append("sk-live-secret")
    masked = mask_secrets(deep)  # no RecursionError
    depth = 0
    while isinstance(masked, list):
        [masked] = masked
        depth += 1
    assert masked == "***"  # cut off as masked, not kept
    assert 10 < depth < 5000
    cyclic: dict[str, object] = {"token": "x"}
    cyclic["self"] = cyclic
    out = mask_secrets(cyclic)
    while isinstance(out, dict):
        out = out["self"]
    assert out == "***"


def test_long_unbroken_text_is_masked_in_linear_time() -> None:
    for text in ("a" * 200_000, "a=" * 100_000, "-a " * 60_000, "x.y-z_" * 30_000, "://" * 50_000):
        started = time.monotonic()
        mask_secrets({"content": text})
        assert time.monotonic() - started < 2.0


json_values = st.recursive(
    st.none() | st.booleans() | st.integers() | st.floats(allow_nan=False) | st.text(),
    lambda children: st.lists(children) | st.dictionaries(st.text(), children),
    max_leaves=20,
)


@given(json_values)
def test_any_json_value_is_masked_without_raising_and_stays_json(value: object) -> None:
    masked = mask_secrets(value)
    json.dumps(masked)


@given(st.text(alphabet=st.characters(codec="utf-8"), min_size=8), st.text())
def test_a_value_under_a_secret_key_never_appears_in_the_result(secret: str, other: str) -> None:
    masked = mask_secrets({"api_key": secret, "note": other})
    assert masked == {"api_key": "***", "note": mask_secrets(other)}
