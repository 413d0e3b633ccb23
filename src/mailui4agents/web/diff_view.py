"""A `work` mail as a diff (docs/review.md, "Reading and commenting in the web UI").

The bridge attaches two files to a `work` mail: `work.json` (the turn's branch,
commit range and file list) and `turn.diff` (the unified patch of `git diff -M`,
absent when the patch was past the bridge's cap). Both are untrusted: this module
parses them strictly (`parse_work`, `parse_patch`) and anything malformed raises
`BadWork`, on which the thread shows the mail as ordinary mail with its
attachments. No part of a patch ever becomes markup: every path and line reaches
the page either escaped by Jinja or as Pygments' output, which escapes the text
of every token itself.

Pure: no I/O, no database; the thread page reads the attachments (web/work_page.py).
"""

from __future__ import annotations

import json
import re
from dataclasses import dataclass, field
from functools import lru_cache
from typing import Annotated, Literal

from markupsafe import Markup, escape
from pydantic import BaseModel, ConfigDict, Field, StringConstraints, ValidationError
from pygments import highlight
from pygments.formatters import HtmlFormatter
from pygments.lexer import Lexer
from pygments.lexers import get_lexer_for_filename
from pygments.util import ClassNotFound

# Limits (docs/review.md): what one page shows of one turn.
WORK_JSON_MAX_BYTES = 1024 * 1024  # the contract's size of work.json
MAX_WORK_FILES = 5000  # entries of work.json's "files"
PATCH_READ_MAX_BYTES = 8 * 1024 * 1024  # a larger turn.diff is named, not parsed
COLLAPSE_LINES = 200  # a file with more diff lines than this starts collapsed
MAX_OPEN_FILES = 50  # a turn with more files than this shows every file collapsed
HIGHLIGHT_MAX_LINES = 2000  # a file with more diff lines than this is not highlighted
HIGHLIGHT_MAX_LINE_CHARS = 1000  # …nor one with a line longer than this
FILE_MAX_LINES = 5000  # a file with more diff lines than this is named, not shown
LINE_MAX_CHARS = 5000  # a line longer than this is cut (with "…")
PAGE_MAX_LINES = 6000  # lines shown over the whole mail (about 3 MB of page); later files named

HEX40 = r"^[0-9a-f]{40}$"
Hex40 = Annotated[str, StringConstraints(pattern=HEX40)]
PathText = Annotated[str, StringConstraints(min_length=1, max_length=4096, pattern=r"^[^\x00]*$")]


class BadWork(ValueError):
    """work.json or turn.diff is not what a bridge writes: the mail is shown as
    ordinary mail with its attachments."""


class WorkFile(BaseModel):
    model_config = ConfigDict(extra="forbid", strict=True, frozen=True)

    path: PathText
    old_path: PathText | None
    status: Literal["added", "modified", "deleted", "renamed"]
    added: Annotated[int, Field(ge=0)] | None
    deleted: Annotated[int, Field(ge=0)] | None
    binary: bool


class WorkJson(BaseModel):
    """work.json, exactly (docs/review.md)."""

    model_config = ConfigDict(extra="forbid", strict=True, frozen=True)

    version: Literal[1]
    branch: Annotated[str, StringConstraints(min_length=1, max_length=255)]
    path: PathText
    base_branch: Annotated[str, StringConstraints(min_length=1, max_length=255)] | None
    from_commit: Hex40
    to_commit: Hex40
    capped: bool
    patch_bytes: Annotated[int, Field(ge=0)]
    files: Annotated[list[WorkFile], Field(max_length=MAX_WORK_FILES)]
    files_truncated: bool = False


def parse_work(raw: bytes) -> WorkJson:
    """work.json, or BadWork naming what is wrong."""
    if len(raw) > WORK_JSON_MAX_BYTES:
        raise BadWork(f"work.json is larger than {WORK_JSON_MAX_BYTES} bytes")
    try:
        doc = json.loads(raw.decode("utf-8"))
        work = WorkJson.model_validate(doc)
    except (UnicodeDecodeError, json.JSONDecodeError, ValidationError, RecursionError) as err:
        raise BadWork(f"work.json: {str(err)[:300]}") from None
    for f in work.files:
        if f.binary != (f.added is None) or (f.added is None) != (f.deleted is None):
            raise BadWork(f"work.json: {f.path!r}: added/deleted are null exactly for binary")
        if f.status == "renamed" and f.old_path is None:
            raise BadWork(f"work.json: {f.path!r}: a renamed file has an old_path")
    return work


# --- the patch ------------------------------------------------------------------


@dataclass
class Line:
    kind: Literal["ctx", "del", "add"]
    old: int | None
    new: int | None
    text: str
    html: Markup = field(default_factory=Markup)

    @property
    def side(self) -> Literal["old", "new"]:
        """The side a comment on this line is on (a deleted line exists only on the old)."""
        return "old" if self.kind == "del" else "new"

    @property
    def number(self) -> int:
        n = self.old if self.kind == "del" else self.new
        assert n is not None
        return n


@dataclass
class Row:
    """One row of the side-by-side view: a context line (both sides), or a
    deleted line beside an added one (either may be missing)."""

    old: Line | None
    new: Line | None

    @property
    def context(self) -> bool:
        return self.old is not None and self.old.kind == "ctx"


@dataclass
class Block:
    """Context rows, or one change: its deletions and additions paired as rows
    (unified view: every deletion, then every addition; static/app.css)."""

    change: bool
    rows: list[Row]


@dataclass
class Hunk:
    header: str
    lines: list[Line]
    blocks: list[Block] = field(default_factory=list)


@dataclass
class Section:
    """One file's part of the patch."""

    path: str | None
    old_path: str | None
    binary: bool = False
    hunks: list[Hunk] = field(default_factory=list)

    @property
    def line_count(self) -> int:
        return sum(len(h.lines) for h in self.hunks)


_HUNK = re.compile(r"^@@ -(\d+)(?:,(\d+))? \+(\d+)(?:,(\d+))? @@(.*)$")
_ESCAPES = {"a": 7, "b": 8, "t": 9, "n": 10, "v": 11, "f": 12, "r": 13, '"': 34, "\\": 92}


def _unquote(text: str) -> str:
    """A path as git prints it: C-quoted ("a/\\303\\251.txt") when it has special
    characters (core.quotePath)."""
    if not (len(text) >= 2 and text.startswith('"') and text.endswith('"')):
        return text
    body, out, i = text[1:-1], bytearray(), 0
    while i < len(body):
        c = body[i]
        if c != "\\":
            out += c.encode("utf-8")
            i += 1
            continue
        nxt = body[i + 1 : i + 2]
        if nxt in _ESCAPES:
            out.append(_ESCAPES[nxt])
            i += 2
        elif re.fullmatch(r"[0-7]{3}", body[i + 1 : i + 4]):
            out.append(int(body[i + 1 : i + 4], 8) & 0xFF)
            i += 4
        else:
            raise BadWork(f"turn.diff: a bad escape in the path {text[:200]!r}")
    return out.decode("utf-8", errors="replace")


def _side_path(text: str, prefix: str) -> str | None:
    """The path of a `--- a/x` / `+++ b/x` line (None for /dev/null)."""
    # git ends the name with a tab when it has a space ("+++ b/a b\t").
    text = _unquote(text.rstrip("\t") if text.startswith('"') else text.split("\t", 1)[0])
    if text == "/dev/null":
        return None
    return text[len(prefix) :] if text.startswith(prefix) else text


def _git_header_path(rest: str) -> str | None:
    """The path of `diff --git a/X b/X` when both halves are the same file (a
    mode change or binary file has no ---/+++ lines)."""
    if rest.startswith('"'):
        m = re.match(r'^("(?:[^"\\]|\\.)*") ', rest)
        return _side_path(m.group(1), "a/") if m else None
    half = (len(rest) - 1) // 2
    a, b = rest[:half], rest[half + 1 :]
    if a.startswith("a/") and b.startswith("b/") and a[2:] == b[2:]:
        return a[2:]
    return None


def parse_patch(text: str) -> list[Section]:
    """The sections of a `git diff` patch; BadWork on a malformed hunk."""
    sections: list[Section] = []
    lines = text.split("\n")
    if lines and lines[-1] == "":
        lines.pop()
    i = 0
    current: Section | None = None
    while i < len(lines):
        line = lines[i]
        if line.startswith("diff --git "):
            current = Section(path=_git_header_path(line[len("diff --git ") :]), old_path=None)
            sections.append(current)
            i += 1
            continue
        if current is None:
            i += 1  # text before the first file (a stat, a note): not part of a file
            continue
        if line.startswith("rename from "):
            current.old_path = _unquote(line[len("rename from ") :])
        elif line.startswith("rename to "):
            current.path = _unquote(line[len("rename to ") :])
        elif line.startswith("--- "):
            old = _side_path(line[4:], "a/")
            if old is not None:
                current.old_path = current.old_path or old
        elif line.startswith("+++ "):
            new = _side_path(line[4:], "b/")
            if new is not None:
                current.path = new
            elif current.path is None:
                current.path = current.old_path
        elif line.startswith("Binary files ") or line == "GIT binary patch":
            current.binary = True
        elif line.startswith("@@"):
            hunk, i = _parse_hunk(lines, i)
            current.hunks.append(hunk)
            continue
        i += 1
    for s in sections:
        if s.path is None:
            s.path = s.old_path
        if s.old_path == s.path:
            s.old_path = None
    return sections


def _parse_hunk(lines: list[str], i: int) -> tuple[Hunk, int]:
    m = _HUNK.match(lines[i])
    if m is None:
        raise BadWork(f"turn.diff: a malformed hunk header {lines[i][:200]!r}")
    old_no, new_no = int(m.group(1)), int(m.group(3))
    old_left = int(m.group(2)) if m.group(2) is not None else 1
    new_left = int(m.group(4)) if m.group(4) is not None else 1
    hunk = Hunk(header=lines[i][:LINE_MAX_CHARS], lines=[])
    i += 1
    while old_left > 0 or new_left > 0:
        if i >= len(lines):
            raise BadWork("turn.diff: a hunk ends before its lines do")
        line = lines[i]
        tag, text = line[:1], line[1:]
        if tag in (" ", "") and old_left > 0 and new_left > 0:
            hunk.lines.append(Line("ctx", old_no, new_no, text))
            old_no, new_no, old_left, new_left = old_no + 1, new_no + 1, old_left - 1, new_left - 1
        elif tag == "-" and old_left > 0:
            hunk.lines.append(Line("del", old_no, None, text))
            old_no, old_left = old_no + 1, old_left - 1
        elif tag == "+" and new_left > 0:
            hunk.lines.append(Line("add", None, new_no, text))
            new_no, new_left = new_no + 1, new_left - 1
        elif tag == "\\":
            pass  # "\ No newline at end of file"
        else:
            raise BadWork(f"turn.diff: a line that does not fit its hunk {line[:200]!r}")
        i += 1
    while i < len(lines) and lines[i].startswith("\\"):
        i += 1
    return hunk, i


def _blocks(lines: list[Line]) -> list[Block]:
    blocks: list[Block] = []
    i = 0
    while i < len(lines):
        if lines[i].kind == "ctx":
            rows = []
            while i < len(lines) and lines[i].kind == "ctx":
                rows.append(Row(lines[i], lines[i]))
                i += 1
            blocks.append(Block(change=False, rows=rows))
            continue
        dels: list[Line] = []
        adds: list[Line] = []
        while i < len(lines) and lines[i].kind != "ctx":
            (dels if lines[i].kind == "del" else adds).append(lines[i])
            i += 1
        pairs = [
            Row(dels[k] if k < len(dels) else None, adds[k] if k < len(adds) else None)
            for k in range(max(len(dels), len(adds)))
        ]
        blocks.append(Block(change=True, rows=pairs))
    return blocks


# --- highlighting -----------------------------------------------------------------

# Token classes prefixed ("pg-k"), so no token shares a class with the diff's own
# parts (static/app.css: .c, .o, .n, .cm …).
CLASS_PREFIX = "pg-"
_FORMATTER = HtmlFormatter(nowrap=True, classprefix=CLASS_PREFIX)


def _lexer(path: str) -> Lexer | None:
    """The lexer a file's name calls for (None: plain text). Looked up by the
    name's extension ("x.py" → "*.py"), so a turn of many files asks Pygments
    once per kind; a name without one (Makefile, Dockerfile) by itself."""
    name = path.rsplit("/", 1)[-1]
    stem, dot, ext = name.rpartition(".")
    return _lexer_for(f"file.{ext}" if dot and stem else name)


@lru_cache(maxsize=256)
def _lexer_for(name: str) -> Lexer | None:
    try:
        return get_lexer_for_filename(name, stripnl=False, stripall=False, ensurenl=True)
    except (ClassNotFound, ValueError):
        return None


def _clean(text: str) -> str:
    """A line as shown: cut past LINE_MAX_CHARS; a carriage return (a CRLF file)
    dropped at the end and made visible inside, so one line stays one line."""
    text = text.removesuffix("\r").replace("\r", "␍")
    return text if len(text) <= LINE_MAX_CHARS else text[: LINE_MAX_CHARS - 1] + "…"


def _highlight_side(lexer: Lexer, lines: list[Line]) -> list[Markup] | None:
    if not lines:
        return []
    source = "\n".join(_clean(ln.text) for ln in lines) + "\n"
    out = highlight(source, lexer, _FORMATTER).split("\n")
    if out and out[-1] == "":
        out.pop()
    if len(out) != len(lines):
        return None  # the lexer saw the lines differently: plain text instead
    return [Markup(h) for h in out]  # Pygments escaped every token's text


def _fill_html(path: str, hunks: list[Hunk], highlighted: bool) -> bool:
    """Each line's HTML: highlighted per hunk and side (old: context and
    deletions; new: context and additions), else escaped. True if highlighted."""
    lexer = _lexer(path) if highlighted else None
    done = lexer is not None
    for hunk in hunks:
        old = [ln for ln in hunk.lines if ln.kind != "add"]
        new = [ln for ln in hunk.lines if ln.kind != "del"]
        old_html = _highlight_side(lexer, old) if lexer else None
        new_html = _highlight_side(lexer, new) if lexer else None
        if old_html is None or new_html is None:
            done = False
            for ln in hunk.lines:
                ln.html = escape(_clean(ln.text))
            continue
        for ln, h in zip(old, old_html, strict=True):
            ln.html = h
        for ln, h in zip(new, new_html, strict=True):
            if ln.kind == "add":
                ln.html = h
        hunk.blocks = _blocks(hunk.lines)
    for hunk in hunks:
        if not hunk.blocks:
            hunk.blocks = _blocks(hunk.lines)
    return done


# --- the view ----------------------------------------------------------------------


@dataclass
class FileView:
    index: int
    path: str
    old_path: str | None
    status: str
    added: int | None
    deleted: int | None
    binary: bool
    hunks: list[Hunk] = field(default_factory=list)
    # Why the file's lines are not shown (None: they are): binary, huge, …
    not_shown: str | None = None
    open: bool = True
    highlighted: bool = False
    listed: bool = True  # in work.json (a comment names such a file)
    line_count: int = 0


@dataclass
class WorkView:
    work: WorkJson
    files: list[FileView]
    added: int
    deleted: int
    capped: bool
    note: str | None  # why the lines are not shown at all (capped, too large)
    all_collapsed: bool

    def places(self) -> set[tuple[str, str, int]]:
        """(path, side, line) of every line shown: where a comment can sit."""
        out: set[tuple[str, str, int]] = set()
        for f in self.files:
            for h in f.hunks:
                for ln in h.lines:
                    if ln.old is not None and ln.kind != "add":
                        out.add((f.path, "old", ln.old))
                    if ln.new is not None and ln.kind != "del":
                        out.add((f.path, "new", ln.new))
        return out

    @property
    def from7(self) -> str:
        return self.work.from_commit[:7]

    @property
    def to7(self) -> str:
        return self.work.to_commit[:7]


def build(work_raw: bytes, patch_raw: bytes | None, patch_size: int | None = None) -> WorkView:
    """The view of a `work` mail from its two attachments (`patch_raw` None when
    the mail has no turn.diff, or it was not read because `patch_size` is past
    PATCH_READ_MAX_BYTES). BadWork when either is malformed."""
    work = parse_work(work_raw)
    note: str | None = None
    sections: list[Section] = []
    if work.capped:
        note = (
            f"The patch ({work.patch_bytes} bytes) was past the bridge's limit: "
            "only the summary of the files is here."
        )
    elif patch_raw is None and patch_size is not None and patch_size > PATCH_READ_MAX_BYTES:
        note = (
            f"The patch ({patch_size} bytes) is too large to show on a page: "
            "download turn.diff to read it."
        )
    elif patch_raw is None:
        note = "The mail has no turn.diff: only the summary of the files is here."
    else:
        sections = parse_patch(patch_raw.decode("utf-8", errors="replace"))
    by_path: dict[str, Section] = {}
    for s in sections:
        if s.path is not None:
            by_path.setdefault(s.path, s)
    files: list[FileView] = []
    used: set[int] = set()
    for i, f in enumerate(work.files):
        section = by_path.get(f.path)
        if section is not None:
            used.add(id(section))
        files.append(_file(i, f.path, f.old_path, f.status, f.added, f.deleted, f.binary, section))
    for s in sections:  # in the patch, not in work.json: shown, not commentable
        if id(s) in used or s.path is None:
            continue
        added = sum(1 for h in s.hunks for ln in h.lines if ln.kind == "add")
        deleted = sum(1 for h in s.hunks for ln in h.lines if ln.kind == "del")
        status = "renamed" if s.old_path else "modified"
        fv = _file(len(files), s.path, s.old_path, status, added, deleted, s.binary, s)
        fv.listed = False
        files.append(fv)
    all_collapsed = len(files) > MAX_OPEN_FILES
    budget = PAGE_MAX_LINES
    for fv in files:
        if fv.not_shown is None and fv.line_count > budget:
            fv.hunks, fv.not_shown = [], "not shown: the page shows at most "
            fv.not_shown += f"{PAGE_MAX_LINES} lines of a turn (download turn.diff)"
        if fv.not_shown is None:
            budget -= fv.line_count
            fv.highlighted = _fill_html(
                fv.path, fv.hunks, fv.line_count <= HIGHLIGHT_MAX_LINES and _short(fv.hunks)
            )
        fv.open = not all_collapsed and fv.not_shown is None and fv.line_count <= COLLAPSE_LINES
    return WorkView(
        work=work,
        files=files,
        added=sum(f.added or 0 for f in files),
        deleted=sum(f.deleted or 0 for f in files),
        capped=work.capped,
        note=note,
        all_collapsed=all_collapsed,
    )


def _short(hunks: list[Hunk]) -> bool:
    return all(len(ln.text) <= HIGHLIGHT_MAX_LINE_CHARS for h in hunks for ln in h.lines)


def _file(
    index: int,
    path: str,
    old_path: str | None,
    status: str,
    added: int | None,
    deleted: int | None,
    binary: bool,
    section: Section | None,
) -> FileView:
    fv = FileView(index, path, old_path, status, added, deleted, binary)
    if binary or (section is not None and section.binary):
        fv.binary, fv.not_shown = True, "binary file: not shown"
    elif section is None:
        fv.not_shown = None if status == "renamed" else "not in the attached patch"
    else:
        fv.line_count = section.line_count
        if fv.line_count > FILE_MAX_LINES:
            fv.not_shown = f"{fv.line_count} lines changed: too large to show (download turn.diff)"
        else:
            fv.hunks = section.hunks
    return fv


# The backgrounds a token is shown on (static/app.css: the page, a deleted and an
# added line), light and dark: highlight_css makes every token colour readable on
# each of them (WCAG AA, 4.5:1).
LIGHT_BACKGROUNDS = ("#ffffff", "#ffebe9", "#dafbe1", "#f9fafb")
DARK_BACKGROUNDS = ("#0b1120", "#3d1418", "#12361f", "#111827")
MIN_CONTRAST = 4.6  # a margin over 4.5 for rounding


def _luminance(hex_color: str) -> float:
    h = hex_color.lstrip("#")
    if len(h) == 3:
        h = "".join(c * 2 for c in h)
    channels = [int(h[i : i + 2], 16) / 255 for i in (0, 2, 4)]
    lin = [c / 12.92 if c <= 0.03928 else ((c + 0.055) / 1.055) ** 2.4 for c in channels]
    return 0.2126 * lin[0] + 0.7152 * lin[1] + 0.0722 * lin[2]


def contrast(a: str, b: str) -> float:
    la, lb = sorted((_luminance(a), _luminance(b)), reverse=True)
    return (la + 0.05) / (lb + 0.05)


def _readable(color: str, backgrounds: tuple[str, ...], dark: bool) -> str:
    """`color`, darkened (light theme) or lightened (dark) in small steps until it
    has MIN_CONTRAST against every background."""
    h = color.lstrip("#")
    if len(h) == 3:
        h = "".join(c * 2 for c in h)
    rgb = [int(h[i : i + 2], 16) for i in (0, 2, 4)]
    for _ in range(100):
        now = "#" + "".join(f"{c:02x}" for c in rgb)
        if all(contrast(now, bg) >= MIN_CONTRAST for bg in backgrounds):
            return now if now != "#" + h.lower() else color
        rgb = [min(255, c + 8) if dark else max(0, c - 8) for c in rgb]
    return "#ffffff" if dark else "#000000"


def _fix_colors(css: str, backgrounds: tuple[str, ...], dark: bool) -> str:
    return re.sub(
        r"(?<![-\w])color: (#[0-9A-Fa-f]{3,6})\b",
        lambda m: f"color: {_readable(m.group(1), backgrounds, dark)}",
        css,
    )


def highlight_css() -> str:
    """The Pygments classes' colours, light and dark, each readable on every
    background of a diff's line (static/diff.css is this; tests/web/test_diff_view.py
    checks it is current)."""
    light = HtmlFormatter(style="default", classprefix=CLASS_PREFIX).get_style_defs(".diff .code")
    dark = HtmlFormatter(style="monokai", classprefix=CLASS_PREFIX).get_style_defs(".diff .code")
    return (
        "/* Generated by mailui4agents.web.diff_view.highlight_css(): do not edit. */\n"
        + _fix_colors(_no_backgrounds(light), LIGHT_BACKGROUNDS, dark=False)
        + "\n@media (prefers-color-scheme: dark) {\n"
        + _fix_colors(_no_backgrounds(dark), DARK_BACKGROUNDS, dark=True)
        + "\n}\n"
    )


def _no_backgrounds(css: str) -> str:
    """Only the token colours: the diff's own rows give the background (added,
    deleted), and the line numbers' rule (.hll, .linenos) is not used."""
    kept = []
    for rule in css.splitlines():
        if rule.startswith(("pre ", "td.", "span.", ".diff .code .hll", ".diff .code  {")):
            continue
        if rule.startswith(".diff .code {") or ("background" in rule and "{" in rule):
            rule = re.sub(r"background(-color)?:\s*[^;}]+;?", "", rule)
        kept.append(rule)
    return "\n".join(kept)
