"""Names and types of uploads: pure rules."""

from __future__ import annotations

import pytest
from hypothesis import given
from hypothesis import strategies as st

from mailui4agents.domain.uploads import content_disposition, safe_content_type, safe_filename


@pytest.mark.parametrize(
    ("raw", "safe"),
    [
        ("../../etc/passwd", "passwd"),
        ("a/b\\c", "c"),
        ("dir\\", "attachment"),
        ("ev\x00il\x1b\r\n.txt", "evil.txt"),
        ("\u202etxt.exe", "txt.exe"),
        ("", "attachment"),
        (None, "attachment"),
        ("..", "attachment"),
        ("  ", "attachment"),
        (".bashrc", ".bashrc"),
        ("résumé.pdf", "résumé.pdf"),
    ],
)
def test_names_become_plain_file_names(raw: str | None, safe: str) -> None:
    assert safe_filename(raw) == safe


@given(st.text())
def test_any_name_becomes_a_short_non_empty_name_without_separators_or_controls(raw: str) -> None:
    name = safe_filename(raw)
    assert name and name not in (".", "..")
    assert len(name.encode()) <= 255
    assert not any(c in name for c in "/\\\x00\n\r\x1b")


def test_a_long_name_keeps_its_extension() -> None:
    name = safe_filename("x" * 400 + ".tar.gz")
    assert len(name.encode()) == 255 and name.endswith(".gz")


@pytest.mark.parametrize(
    ("raw", "stored"),
    [
        ("text/plain", "text/plain"),
        ("text/plain; charset=utf-8", "text/plain; charset=utf-8"),
        ("image/svg+xml", "image/svg+xml"),
        (None, "application/octet-stream"),
        ("", "application/octet-stream"),
        ("not a type", "application/octet-stream"),
        ("text/html\r\nX-Evil: 1", "application/octet-stream"),
        ("a/" + "b" * 300, "application/octet-stream"),
    ],
)
def test_content_types_are_kept_only_when_they_look_like_one(raw: str | None, stored: str) -> None:
    assert safe_content_type(raw) == stored


def test_the_disposition_is_attachment_with_an_ascii_fallback_and_the_exact_name() -> None:
    header = content_disposition('r"é\\sumé.pdf')
    assert (
        header
        == "attachment; filename=\"r___sum_.pdf\"; filename*=UTF-8''r%22%C3%A9%5Csum%C3%A9.pdf"
    )
