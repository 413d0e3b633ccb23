"""Tests for automatic session aliases (docs/behaviour.md#sessions-and-aliases)."""

from __future__ import annotations

import pytest
from hypothesis import given
from hypothesis import strategies as st

from mailui4agents.domain.addresses import is_valid_alias
from mailui4agents.domain.aliases import (
    alias_candidates,
    auto_alias,
    close_matches,
    slugify,
)

SESSION_ID = "3f2a9c1e-7b4d-4e8a-9c0f-1234567890ab"

# --- slugify ---------------------------------------------------------------


@pytest.mark.parametrize(
    ("text", "slug"),
    [
        ("Fix login bug", "fix-login-bug"),
        ("  --Hello,   World!!  ", "hello-world"),
        ("a___b...c", "a-b-c"),
        ("Ärger im Büro", "ärger-im-büro"),
        ("重构导入路径", "重构导入路径"),
        ("ΣΟΦΙΑ", "σοφια"),
        ("v2.0 release", "v2-0-release"),
        ("!!!", ""),
        ("", ""),
    ],
)
def test_slugify_examples(text: str, slug: str) -> None:
    assert slugify(text) == slug


def test_slugify_folds_every_run_of_other_characters_to_one_dash() -> None:
    assert slugify("a \t/\\:;~ b") == "a-b"


def test_slugify_trims_dashes_at_both_ends() -> None:
    assert slugify("-- x --") == "x"


def test_slugify_lowercases_unicode_letters_where_the_script_has_case() -> None:
    assert slugify("Ärger") == "ärger"
    assert slugify("ÇA VA") == "ça-va"


def test_slugify_keeps_decomposed_accents_with_their_letter() -> None:
    assert slugify("Cafe\u0301 Noir") == "café-noir"


def test_slugify_keeps_combining_vowel_signs_of_indic_scripts() -> None:
    assert slugify("हिन्दी पाठ") == "हिन्दी-पाठ"


def test_slugify_bounds_the_length_and_trims_a_trailing_dash_after_cutting() -> None:
    assert slugify("abcd efgh", max_len=5) == "abcd"
    assert len(slugify("x" * 100)) == 48
    assert slugify("x" * 100, max_len=10) == "x" * 10


@given(text=st.text(), max_len=st.integers(min_value=0, max_value=80))
def test_slugs_are_bounded_and_have_no_edge_or_double_dashes(text: str, max_len: int) -> None:
    slug = slugify(text, max_len)
    assert len(slug) <= max_len
    assert not slug.startswith("-")
    assert not slug.endswith("-")
    assert "--" not in slug
    assert not any(ch.isspace() or ch in ".@" for ch in slug)


# --- auto_alias ------------------------------------------------------------


@pytest.mark.parametrize(
    ("name", "subject", "alias"),
    [
        ("claude", "Fix login bug", "claude-fix-login-bug"),
        ("pi", "重构导入路径", "pi-重构导入路径"),
        ("claude", "", "claude"),
        ("Codex", "Re: [URGENT] tests fail!", "codex-re-urgent-tests-fail"),
    ],
)
def test_auto_alias_combines_name_and_subject(name: str, subject: str, alias: str) -> None:
    assert auto_alias(name, subject) == alias


def test_auto_alias_never_returns_the_reserved_word_new() -> None:
    assert auto_alias("new", "") == ""
    assert auto_alias("NEW", "!!") == ""


def test_auto_alias_returns_empty_when_nothing_is_left() -> None:
    assert auto_alias("", "???") == ""


def test_auto_alias_respects_max_len() -> None:
    alias = auto_alias("claude", "a very long subject " * 10, max_len=20)
    assert len(alias) <= 20
    assert not alias.endswith("-")


@given(name=st.text(), subject=st.text())
def test_auto_aliases_are_valid_aliases_or_empty(name: str, subject: str) -> None:
    alias = auto_alias(name, subject)
    assert alias == "" or is_valid_alias(alias)


# --- alias_candidates ------------------------------------------------------


def test_candidates_start_with_the_base_then_numbered_suffixes_then_the_fallback() -> None:
    candidates = alias_candidates("claude-fix", SESSION_ID, attempts=4)
    assert candidates == [
        "claude-fix",
        "claude-fix-2",
        "claude-fix-3",
        "claude-fix-4",
        "session-3f2a9c1e",
    ]


def test_default_candidates_go_up_to_twenty() -> None:
    candidates = alias_candidates("x", SESSION_ID)
    assert candidates[0] == "x"
    assert candidates[-2] == "x-20"
    assert len(candidates) == 21


def test_fallback_uses_the_first_eight_hex_chars_without_dashes() -> None:
    assert alias_candidates("", "ab-cd-ef-01-23-45") == ["session-abcdef01"]


def test_empty_base_gives_only_the_fallback() -> None:
    assert alias_candidates("", SESSION_ID) == ["session-3f2a9c1e"]


def test_suffixed_candidates_cut_the_base_and_strip_its_trailing_dash() -> None:
    candidates = alias_candidates("abc-defgh", SESSION_ID, max_len=7, attempts=10)
    assert candidates[0] == "abc-def"
    assert candidates[1] == "abc-d-2"
    assert candidates[-2] == "abc-10"  # cut to "abc-", trailing dash stripped


@given(
    base=st.text(alphabet="ab-重", max_size=70),
    max_len=st.integers(min_value=4, max_value=64),
    attempts=st.integers(min_value=1, max_value=30),
)
def test_every_candidate_fits_max_len_and_they_are_distinct(
    base: str, max_len: int, attempts: int
) -> None:
    candidates = alias_candidates(base, SESSION_ID, max_len=max_len, attempts=attempts)
    assert candidates[-1] == "session-3f2a9c1e"
    assert len(set(candidates)) == len(candidates)
    for candidate in candidates[:-1]:
        assert 0 < len(candidate) <= max_len
        assert not candidate.endswith("-")


# --- close_matches ---------------------------------------------------------

KNOWN = ["claude-fix-login-bug", "claude-fix-logout", "pi-重构导入路径", "codex-tests", "sprint"]


def test_close_matches_finds_typos() -> None:
    assert close_matches("claude-fix-logn-bug", KNOWN)[0] == "claude-fix-login-bug"


def test_close_matches_includes_prefix_and_substring_matches_prefix_first() -> None:
    matches = close_matches("fix", [*KNOWN, "fix-ci"])
    assert matches[0] == "fix-ci"
    assert set(matches[1:]) == {"claude-fix-login-bug", "claude-fix-logout"}
    assert close_matches("tests", KNOWN) == ["codex-tests"]


def test_close_matches_is_deduplicated_and_bounded() -> None:
    matches = close_matches("claude", [*KNOWN, "claude-fix-logout"], n=5)
    assert len(matches) == len(set(matches))
    assert len(close_matches("c", KNOWN, n=2)) == 2


def test_close_matches_returns_nothing_for_unrelated_words() -> None:
    assert close_matches("zzzzzz", KNOWN) == []
    assert close_matches("", KNOWN) == []
