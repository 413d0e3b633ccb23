"""No document cites what a reader of the repository cannot see: the project's
own issue numbers, a commit hash, or a path outside the repository (`../shared`).
A public issue elsewhere is cited by its full URL.

CHANGELOG.md is read by users who see only the repository: it is checked too.
"""

from __future__ import annotations

import re
from pathlib import Path

import pytest

from tests.docs.markdown import DOCS, REPO

DOCUMENTS = sorted(
    [
        *DOCS.rglob("*.md"),
        REPO / "README.md",
        *[p for p in [REPO / "CONTRIBUTING.md", REPO / "CHANGELOG.md"] if p.exists()],
    ]
)

UNSEEN = [
    (re.compile(r"\bissues?\s+#?\d+", re.I), "an issue number of a tracker the reader cannot see"),
    (re.compile(r"(?<![\w/.:])[\w.-]+/[\w.-]+#\d+"), "an issue by its short name: give its URL"),
    (re.compile(r"(?<![\w/#])#\d{2,}\b"), "an issue or pull request number"),
    (re.compile(r"\bcommit\s+`?[0-9a-f]{7,40}\b", re.I), "a commit hash"),
    (re.compile(r"`(?=[0-9a-f]*\d)(?=[0-9a-f]*[a-f])[0-9a-f]{7,40}`"), "a commit hash"),
    (re.compile(r"\.\./shared|/work/shared|/work/notes"), "a path outside the repository"),
]


def citations(text: str) -> list[tuple[int, str, str]]:
    found = []
    for pattern, what in UNSEEN:
        for m in pattern.finditer(text):
            line = text.count("\n", 0, m.start()) + 1
            found.append((line, m.group(0), what))
    return sorted(found)


@pytest.mark.parametrize("path", DOCUMENTS, ids=lambda p: str(p.relative_to(REPO)))
def test_documents_cite_only_what_a_reader_can_see(path: Path) -> None:
    found = citations(path.read_text(encoding="utf-8"))
    where = path.relative_to(REPO)
    assert not found, "\n  ".join(
        [f"{where} cites what a reader cannot see (say what it is instead):"]
        + [f"{where}:{line}: {hit!r}: {what}" for line, hit, what in found]
    )


@pytest.mark.parametrize(
    "text",
    [
        "Issue 10 tracks the fix.",
        "expected (issue #22).",
        "reported (anomalyco/opencode#25509).",
        "fixed in #1234.",
        "written against commit 23d45b2.",
        "as of `23d45b2`.",
        "the contract in ../shared/API.md",
    ],
)
def test_the_patterns_catch_each_kind(text: str) -> None:
    assert citations(text), text


def test_the_patterns_let_visible_things_be() -> None:
    fine = (
        "reported (https://github.com/anomalyco/opencode/issues/25509); "
        "`deadbeef` has no digit; ids in commit order; migration 0013; "
        "docs/api.md#hook-contracts; a URL fragment: /x#12"
    )
    assert citations(fine) == []
