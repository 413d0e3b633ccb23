"""Tests for clamping relay keys to the gateway's size limit."""

from __future__ import annotations

import hashlib

import pytest
from hypothesis import assume, given
from hypothesis import strategies as st

from mailui4agents.domain.relay_keys import RELAY_KEY_MAX_BYTES, clamp_relay_key

long_text = st.text(min_size=RELAY_KEY_MAX_BYTES + 1)


def test_the_limit_is_160_bytes() -> None:
    assert RELAY_KEY_MAX_BYTES == 160


@given(st.text())
def test_every_clamped_key_is_valid_utf8_within_the_limit(key: str) -> None:
    clamped = clamp_relay_key(key)
    encoded = clamped.encode("utf-8")  # raises if not encodable
    assert len(encoded) <= RELAY_KEY_MAX_BYTES
    assert encoded.decode("utf-8") == clamped


@given(st.text())
def test_a_key_that_fits_is_returned_unchanged(key: str) -> None:
    assume(len(key.encode()) <= RELAY_KEY_MAX_BYTES)
    assert clamp_relay_key(key) == key


@given(st.text())
def test_clamping_a_clamped_key_leaves_it_unchanged(key: str) -> None:
    once = clamp_relay_key(key)
    assert clamp_relay_key(once) == once


@given(st.text())
def test_clamping_is_deterministic(key: str) -> None:
    assert clamp_relay_key(key) == clamp_relay_key(key)


@given(prefix=st.text(min_size=200), a=st.text(), b=st.text())
def test_two_long_keys_sharing_a_long_prefix_stay_different(prefix: str, a: str, b: str) -> None:
    assume(a != b)
    assert clamp_relay_key(prefix + a) != clamp_relay_key(prefix + b)


@given(long_text)
def test_a_long_key_keeps_a_readable_prefix_and_the_hash_of_the_whole_key(key: str) -> None:
    assume(len(key.encode()) > RELAY_KEY_MAX_BYTES)
    clamped = clamp_relay_key(key)
    prefix, mark, digest = clamped.rpartition(":sha256:")
    assert mark == ":sha256:"
    assert digest == hashlib.sha256(key.encode()).hexdigest()
    assert key.startswith(prefix)
    # The prefix uses the room it has: at most 3 bytes of a cut character are lost.
    assert len(prefix.encode()) > RELAY_KEY_MAX_BYTES - 72 - 4


def test_a_multibyte_character_is_never_cut_in_half() -> None:
    key = "é" * 200  # two bytes each; the 88-byte prefix budget holds exactly 44
    clamped = clamp_relay_key(key)
    assert clamped.startswith("é" * 44 + ":sha256:")
    key = "ab" + "€" * 100  # 2 + 3n bytes: the budget of 88 ends inside the 29th "€"
    clamped = clamp_relay_key(key)
    assert clamped.startswith("ab" + "€" * 28 + ":sha256:")
    assert len(clamped.encode()) <= RELAY_KEY_MAX_BYTES


def test_a_key_of_exactly_the_limit_is_kept_and_one_byte_more_is_clamped() -> None:
    assert clamp_relay_key("k" * 160) == "k" * 160
    assert clamp_relay_key("k" * 161) != "k" * 161


@given(st.text(), st.integers(min_value=72, max_value=400))
def test_a_smaller_or_larger_limit_is_honoured(key: str, limit: int) -> None:
    assert len(clamp_relay_key(key, limit).encode()) <= limit


def test_a_limit_too_small_for_the_hash_is_a_programming_error() -> None:
    with pytest.raises(ValueError):
        clamp_relay_key("x" * 500, 71)


@given(st.text(alphabet=st.characters(min_codepoint=0xD800, max_codepoint=0xDFFF), min_size=1))
def test_a_key_with_lone_surrogates_becomes_valid_utf8(key: str) -> None:
    clamped = clamp_relay_key(key)
    assert len(clamped.encode("utf-8")) <= RELAY_KEY_MAX_BYTES
    assert clamp_relay_key(clamped) == clamped


def test_different_keys_with_lone_surrogates_stay_different() -> None:
    assert clamp_relay_key("a\ud800") != clamp_relay_key("a\udc00")
