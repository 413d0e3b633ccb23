"""Tests for parsing and formatting addresses (docs/behaviour.md#addresses)."""

from __future__ import annotations

import pytest
from hypothesis import given
from hypothesis import strategies as st

from mailui4agents.domain.addresses import (
    Address,
    AddressError,
    format_address,
    format_parts,
    is_valid_alias,
    parse_address,
)

# --- parsing ---------------------------------------------------------------


@pytest.mark.parametrize(
    ("text", "expected"),
    [
        ("claude@/srv/shop.new", Address("claude", "/srv/shop", "new")),
        (
            "claude@/srv/shop.claude-fix-login",
            Address("claude", "/srv/shop", "claude-fix-login"),
        ),
        ("ana@.", Address("ana", "", None)),
        ("ana@", Address("ana", "", None)),
        ("admin@.sprint-review", Address("admin", "", "sprint-review")),
        ("claude@/srv/shop", Address("claude", "/srv/shop", None)),
        ("claude@/srv/my.app.", Address("claude", "/srv/my.app", None)),
        ("claude@/srv/my.app.fix", Address("claude", "/srv/my.app", "fix")),
        ("pi@/home/李/项目.pi-重构导入路径", Address("pi", "/home/李/项目", "pi-重构导入路径")),
        ("zoë@/home/zoë/café", Address("zoë", "/home/zoë/café", None)),
        ("bot@/srv/a@b.x", Address("bot", "/srv/a@b", "x")),
    ],
)
def test_parse_address_splits_name_path_and_session(text: str, expected: Address) -> None:
    assert parse_address(text) == expected


def test_name_ends_at_the_first_at_sign_and_the_path_may_contain_more() -> None:
    assert parse_address("a@b@c") == Address("a", "b@c", None)


def test_session_is_after_the_last_dot_of_the_path_part() -> None:
    assert parse_address("c@/srv/v1.2.3.rel").session == "rel"
    assert parse_address("c@/srv/v1.2.3.rel").path == "/srv/v1.2.3"


def test_surrounding_whitespace_is_ignored() -> None:
    assert parse_address("  claude@/srv/shop.new \n") == Address("claude", "/srv/shop", "new")


def test_a_name_with_dots_is_kept_whole() -> None:
    assert parse_address("j.doe@/w.s") == Address("j.doe", "/w", "s")


@pytest.mark.parametrize(
    ("text", "fragment"),
    [
        ("claude", "no '@'"),
        ("", "no '@'"),
        ("   ", "no '@'"),
        ("@/srv/shop.new", "empty name"),
        ("  @/srv/shop", "empty name"),
        ("cla ude@/srv/shop", "whitespace"),
        ("cla\tude@/srv", "whitespace"),
    ],
)
def test_malformed_addresses_raise_address_error_with_a_clear_message(
    text: str, fragment: str
) -> None:
    with pytest.raises(AddressError, match=fragment):
        parse_address(text)


def test_address_error_is_a_value_error() -> None:
    with pytest.raises(ValueError):
        parse_address("nobody")


# --- formatting ------------------------------------------------------------


@pytest.mark.parametrize(
    ("addr", "text"),
    [
        (Address("claude", "/srv/shop", "new"), "claude@/srv/shop.new"),
        (Address("claude", "/srv/shop", "claude-fix-login"), "claude@/srv/shop.claude-fix-login"),
        (Address("admin", "", "sprint-review"), "admin@.sprint-review"),
        (Address("claude", "/srv/shop", None), "claude@/srv/shop"),
        (Address("claude", "/srv/my.app", None), "claude@/srv/my.app."),
        (Address("ana", "", None), "ana@"),
        (Address("pi", "/home/李/项目", "pi-重构导入路径"), "pi@/home/李/项目.pi-重构导入路径"),
    ],
)
def test_format_address_writes_the_canonical_form(addr: Address, text: str) -> None:
    assert format_address(addr) == text


def test_format_parts_matches_format_address() -> None:
    assert format_parts("claude", "/srv/my.app", None) == "claude@/srv/my.app."
    assert format_parts("admin", "", "sprint-review") == "admin@.sprint-review"


def test_reply_to_a_session_without_alias_never_writes_new() -> None:
    text = format_parts("claude", "/srv/shop", None)
    assert not text.endswith(".new")
    assert parse_address(text).session is None


def test_path_with_a_dot_and_no_session_gets_a_trailing_dot_so_the_path_stays_whole() -> None:
    addr = Address("claude", "/srv/my.app", None)
    assert format_address(addr).endswith("my.app.")
    assert parse_address(format_address(addr)) == addr


def test_path_ending_in_whitespace_and_no_session_survives_stripping() -> None:
    addr = Address("claude", "/srv/odd ", None)
    assert parse_address(format_address(addr)) == addr


@pytest.mark.parametrize(
    ("name", "session", "fragment"),
    [
        ("", None, "empty name"),
        ("a b", None, "whitespace"),
        ("a@b", None, "'@'"),
        ("claude", "", "empty"),
        ("claude", "a.b", "'.'"),
        ("claude", "fix ", "whitespace"),
    ],
)
def test_format_refuses_parts_that_could_not_round_trip(
    name: str, session: str | None, fragment: str
) -> None:
    with pytest.raises(AddressError, match=fragment):
        format_parts(name, "/srv/shop", session)


# --- aliases ---------------------------------------------------------------


@pytest.mark.parametrize(
    "alias", ["claude-fix-login", "pi-重构导入路径", "a", "x" * 64, "new-feature", "ärger"]
)
def test_valid_aliases_are_accepted(alias: str) -> None:
    assert is_valid_alias(alias)


@pytest.mark.parametrize("alias", ["", "new", "a.b", "a@b", "a b", "tab\there", "x" * 65, "line\n"])
def test_invalid_aliases_are_rejected(alias: str) -> None:
    assert not is_valid_alias(alias)


# --- properties ------------------------------------------------------------

names = st.text(alphabet=st.characters(blacklist_characters="@"), min_size=1).filter(
    lambda s: not any(ch.isspace() for ch in s)
)
paths = st.text() | st.text(alphabet="./@ a.b李\n")
# Every str.isspace() character is in category Z* or Cc.
aliases = st.text(
    alphabet=st.characters(blacklist_categories=("Cs", "Z", "Cc"), blacklist_characters=".@"),
    min_size=1,
    max_size=64,
).filter(is_valid_alias)
sessions = st.none() | st.just("new") | aliases


@given(name=names, path=paths, session=sessions)
def test_parse_of_format_gives_the_address_back(name: str, path: str, session: str | None) -> None:
    addr = Address(name, path, session)
    assert parse_address(format_address(addr)) == addr


@given(name=names, path=paths)
def test_formatting_without_session_never_yields_a_session_part(name: str, path: str) -> None:
    assert parse_address(format_parts(name, path, None)).session is None


@given(text=st.text())
def test_any_parseable_text_formats_to_an_equivalent_address(text: str) -> None:
    try:
        addr = parse_address(text)
    except AddressError:
        return
    assert parse_address(format_address(addr)) == addr
