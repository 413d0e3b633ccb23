"""Links between the documents land: the file exists and, for `file.md#anchor`,
a heading of that file has that anchor (GitHub's rule: lower case, punctuation
dropped, spaces to hyphens, `-1`, `-2` for repeats). Pure Python (fast tier)."""

from __future__ import annotations

import re
from pathlib import Path

import pytest

from tests.docs.markdown import DOCS, REPO

DOCUMENTS = sorted([*DOCS.rglob("*.md"), REPO / "README.md", REPO / "CONTRIBUTING.md"])


def slug(heading: str) -> str:
    text = re.sub(r"[^\w\- ]", "", heading.strip().lower())
    return text.replace(" ", "-")


def anchors(path: Path) -> set[str]:
    text = re.sub(r"```.*?```", "", path.read_text(encoding="utf-8"), flags=re.S)
    seen: dict[str, int] = {}
    out = set()
    for m in re.finditer(r"^#{1,6}\s+(.*?)\s*$", text, re.M):
        base = slug(m.group(1))
        n = seen.get(base, 0)
        seen[base] = n + 1
        out.add(base if n == 0 else f"{base}-{n}")
    return out


def broken_links(doc: Path) -> list[str]:
    text = doc.read_text(encoding="utf-8")
    prose = re.sub(r"```.*?```", lambda m: "\n" * m.group(0).count("\n"), text, flags=re.S)
    out = []
    for m in re.finditer(r"\]\(([^)\s]+)\)", prose):
        target = m.group(1)
        if re.match(r"[a-z]+:", target):
            continue  # https:, mailto:
        path, _, fragment = target.partition("#")
        file = (doc.parent / path).resolve() if path else doc
        line = prose.count("\n", 0, m.start()) + 1
        if not file.exists():
            out.append(f"{doc.relative_to(REPO)}:{line}: {target}: no such file")
        elif fragment and file.suffix == ".md" and fragment not in anchors(file):
            out.append(f"{doc.relative_to(REPO)}:{line}: {target}: no such heading")
    return out


@pytest.mark.parametrize("doc", DOCUMENTS, ids=lambda p: str(p.relative_to(REPO)))
def test_links_between_the_documents_land(doc: Path) -> None:
    broken = broken_links(doc)
    assert not broken, "links that go nowhere:\n  " + "\n  ".join(broken)


def test_the_slug_is_githubs() -> None:
    assert slug("Events (SSE)") == "events-sse"
    assert slug("Mail, strict input, inbox") == "mail-strict-input-inbox"
    assert slug("Who sees a request's input") == "who-sees-a-requests-input"
    assert (
        slug("1. Behind Caddy with a real certificate") == "1-behind-caddy-with-a-real-certificate"
    )
