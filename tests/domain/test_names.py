"""Names refuse invisible and bidi characters and are NFC; look-alikes are found;
workspace paths have one spelling per directory."""

from __future__ import annotations

import pytest
from hypothesis import given
from hypothesis import strategies as st

from mailui4agents.domain.names import NameRefused, clean_name, look_alikes, skeleton
from mailui4agents.domain.workspaces import (
    MAX_WORKSPACE_BYTES,
    WorkspaceError,
    normalise_workspace,
)


@pytest.mark.parametrize(
    "bad",
    ["an\u200ba", "ana\u202e", "\u2066ana", "a\x00", "a\x1b[31m", "a\u2028b", "a\u2029",
     "a\ue000", "a\u00a0b", "a\u0378", "\ufeffana"],
)  # fmt: skip
def test_a_name_with_a_control_format_or_separator_character_is_refused(bad: str) -> None:
    with pytest.raises(NameRefused, match=r"U\+[0-9A-F]{4}"):
        clean_name(bad)


@pytest.mark.parametrize("good", ["ana", "José", "李雷", "claude-code_2", "Ölaf", "аня"])
def test_ordinary_names_in_any_script_are_kept(good: str) -> None:
    assert clean_name(good) == good


def test_a_decomposed_name_is_stored_composed() -> None:
    assert clean_name("jose\u0301") == "jos\u00e9"


@pytest.mark.parametrize(
    ("a", "b"),
    [("ana", "\u0430na"), ("ana", "Ana"), ("admin1", "adminl"), ("paypal", "pаypаl"),
     ("modern", "modem"), ("bob", "b\u03bfb"), ("Ian", "lan"), ("jose", "josé")],
)  # fmt: skip
def test_look_alike_names_share_a_skeleton(a: str, b: str) -> None:
    assert skeleton(a) == skeleton(b)
    assert look_alikes(b, [a, "someone"]) == [a]


@pytest.mark.parametrize(("a", "b"), [("ana", "anna"), ("bob", "rob"), ("claude", "codex")])
def test_different_names_do_not(a: str, b: str) -> None:
    assert skeleton(a) != skeleton(b)
    assert look_alikes(b, [a]) == []


def test_a_name_is_not_its_own_look_alike() -> None:
    assert look_alikes("ana", ["ana"]) == []


@pytest.mark.parametrize(
    ("raw", "norm"),
    [
        ("/srv/shop", "/srv/shop"),
        ("/srv//shop/", "/srv/shop"),
        ("/srv/x/../shop", "/srv/shop"),
        ("/srv/./shop/.", "/srv/shop"),
        ("//srv", "/srv"),
        ("///srv", "/srv"),
        ("/../..", "/"),
        ("/", "/"),
        ("", ""),
        ("/srv/my shop", "/srv/my shop"),
        ("C:\\work\\..\\repo\\", "C:\\repo"),
        ("C:/work//repo", "C:\\work\\repo"),
    ],
)
def test_a_workspace_path_is_normalised(raw: str, norm: str) -> None:
    assert normalise_workspace(raw) == norm


@pytest.mark.parametrize(
    "bad", ["/srv/\x00shop", "/srv/\nshop", "/srv/\u202eshop", "/srv/\u200b", "/" + "a" * 1024]
)
def test_a_workspace_with_control_characters_or_too_long_is_refused(bad: str) -> None:
    with pytest.raises(WorkspaceError):
        normalise_workspace(bad)


def test_the_longest_workspace_is_accepted() -> None:
    path = "/" + "a" * (MAX_WORKSPACE_BYTES - 1)
    assert normalise_workspace(path) == path


@given(st.lists(st.sampled_from(["srv", "a", ".", "..", "", "x y", "é"]), max_size=8))
def test_normalising_twice_changes_nothing(parts: list[str]) -> None:
    once = normalise_workspace("/" + "/".join(parts))
    assert normalise_workspace(once) == once
    assert once.startswith("/") and "//" not in once
    assert once == "/" or not once.endswith("/")
