"""A comment or docstring that cites a section of a document finds it there:
`docs/x.md#anchor` is an anchor of docs/x.md (GitHub's rule, test_doc_links),
and `docs/x.md, "Heading"` (or `docs/x.md ("Heading")`) names a heading of that
file exactly (its leading number and code marks left out: "Behind Caddy with a
real certificate" for "## 1. Behind Caddy with a real certificate"). A file that
does not exist is caught too. Pure Python (fast tier)."""

from __future__ import annotations

import re
from pathlib import Path

import pytest

from tests.docs.markdown import REPO
from tests.docs.test_doc_links import anchors

SOURCES = sorted(
    p
    for folder in ("src", "tests", "bench", "scripts")
    for p in (REPO / folder).rglob("*")
    if p.suffix in {".py", ".sh", ".js", ".html"}
    and "__pycache__" not in p.parts
    and p != Path(__file__).resolve()  # its examples are wrong on purpose
)
CITE = re.compile(r"\b(docs/[\w./-]+?\.md)(?:#([\w-]+)|,? \(?\"([^\"\n]+)\")")


def headings(path: Path) -> list[str]:
    text = re.sub(r"```.*?```", "", path.read_text(encoding="utf-8"), flags=re.S)
    return [
        re.sub(r"^\d+\.\s+", "", m.group(1).replace("`", ""))
        for m in re.finditer(r"^#{1,6}\s+(.*?)\s*$", text, re.M)
    ]


def finds(cited: str, heading: str) -> bool:
    return heading == cited.replace("`", "")


def broken(text: str) -> list[str]:
    out = []
    for m in CITE.finditer(text):
        doc, anchor, title = m.groups()
        path = REPO / doc
        if not path.is_file():
            out.append(f"{m.group(0)}: no such file")
        elif anchor is not None and anchor not in anchors(path):
            out.append(f"{m.group(0)}: no such anchor")
        elif title is not None and not any(finds(title, h) for h in headings(path)):
            out.append(f"{m.group(0)}: no such heading")
    return out


def test_every_cited_section_exists() -> None:
    found = {
        str(p.relative_to(REPO)): hits
        for p in SOURCES
        if (hits := broken(p.read_text(encoding="utf-8", errors="replace")))
    }
    assert found == {}


@pytest.mark.parametrize(
    "text",
    [
        'docs/remote.md, "Behind Caddies"',
        "docs/remote.md#no-such-place",
        'docs/nowhere.md, "Push"',
        'docs/bridge.md ("Crash")',
        'docs/remote.md, "Behind Caddy"',
    ],
)
def test_a_wrong_citation_is_caught(text: str) -> None:
    assert broken(text), text


def test_a_right_citation_passes() -> None:
    assert (
        broken(
            'docs/remote.md, "Behind Caddy with a real certificate"; docs/remote.md ("Push"); '
            'docs/behaviour.md#hooks; docs/remote.md, "`tailscale serve`"'
        )
        == []
    )
