"""The little Markdown the doc tests read: sections by heading, and pipe tables."""

from __future__ import annotations

import re
from dataclasses import dataclass
from pathlib import Path

REPO = Path(__file__).resolve().parents[2]
DOCS = REPO / "docs"
API_MD = DOCS / "api.md"

_HEADING = re.compile(r"^(#{1,6})\s+(.*?)\s*$")
_SEPARATOR = re.compile(r"^\|?\s*:?-{3,}:?\s*(\|\s*:?-{3,}:?\s*)*\|?\s*$")
CODE = re.compile(r"`([^`]+)`")


@dataclass(frozen=True)
class Row:
    """One body row of a pipe table: its cells by header name, in order."""

    line: int  # 1-based, in the file
    section: str  # the nearest heading above it
    top: str  # the level-2 heading (`## …`) it is under
    header: tuple[str, ...]
    cells: tuple[str, ...]

    def get(self, name: str) -> str:
        return self.cells[self.header.index(name)] if name in self.header else ""

    @property
    def where(self) -> str:
        return f"docs/api.md:{self.line} ({self.section})"


def split_cells(line: str) -> tuple[str, ...]:
    """A table line's cells; `\\|` is a pipe inside a cell (GitHub's rule, also
    inside code spans), and comes back as `|`."""
    body = line.strip()
    if body.startswith("|"):
        body = body[1:]
    if body.endswith("|") and not body.endswith("\\|"):
        body = body[:-1]
    return tuple(c.strip().replace("\\|", "|") for c in re.split(r"(?<!\\)\|", body))


def rows(text: str) -> list[Row]:
    """Every body row of every pipe table, with the section it is in."""
    lines = text.splitlines()
    out: list[Row] = []
    section = top = ""
    in_code = False
    header: tuple[str, ...] | None = None
    for i, line in enumerate(lines):
        if line.lstrip().startswith("```"):
            in_code = not in_code
            header = None
            continue
        if in_code:
            continue
        m = _HEADING.match(line)
        if m:
            section = m.group(2)
            if len(m.group(1)) == 2:
                top = section
            header = None
            continue
        if not line.lstrip().startswith("|"):
            header = None
            continue
        if header is None:
            nxt = lines[i + 1] if i + 1 < len(lines) else ""
            if _SEPARATOR.match(nxt.strip()):
                header = tuple(c.lower() for c in split_cells(line))
            continue
        if _SEPARATOR.match(line.strip()):
            continue
        out.append(Row(i + 1, section, top, header, split_cells(line)))
    return out


def rows_under(text: str, top: str) -> list[Row]:
    """The table rows under the level-2 heading `## top` (line numbers of the file)."""
    found = [r for r in rows(text) if r.top == top]
    assert found, f"docs/api.md has no table under '## {top}'"
    return found


def section(text: str, title: str) -> str:
    """The text under the level-2 heading `## title`, up to the next one."""
    m = re.search(rf"^## {re.escape(title)}\s*$", text, re.M)
    assert m, f"docs/api.md has no section '## {title}'"
    end = re.search(r"^## ", text[m.end() :], re.M)
    return text[m.end() : m.end() + end.start()] if end else text[m.end() :]


def line_of(text: str, index: int) -> int:
    return text.count("\n", 0, index) + 1
