"""Reading a unified patch (`git diff` output) far enough to place a review
comment: which lines of which file each hunk shows, on the old and the new side,
and the lines around a comment as text (docs/review.md).

The patch is untrusted (an agent's bridge wrote it): it is only ever split into
lines and numbers, never interpreted further; a line that fits no rule is skipped.
"""

from __future__ import annotations

import itertools
import re
from collections.abc import Iterator
from dataclasses import dataclass, field
from typing import Literal

Side = Literal["new", "old"]

CONTEXT = 3  # lines of the hunk shown around the commented ones
MAX_CODE_CHARS = 8000  # a comment's `code` (docs/limits.md)
MAX_LINE_CHARS = 500  # one line of it; past that it is cut with "…"

_HUNK = re.compile(r"^@@ -(\d+)(?:,(\d+))? \+(\d+)(?:,(\d+))? @@")
_ESCAPES = {"a": 7, "b": 8, "t": 9, "n": 10, "v": 11, "f": 12, "r": 13, '"': 34, "\\": 92}


@dataclass(frozen=True, slots=True)
class PatchLine:
    """One line of a hunk: `kind` " " (context), "+" or "-", its numbers on each
    side (None on the side it is not on) and its text."""

    kind: str
    old: int | None
    new: int | None
    text: str


@dataclass
class FilePatch:
    old_path: str | None
    new_path: str | None
    hunks: list[list[PatchLine]] = field(default_factory=list)

    @property
    def path(self) -> str | None:
        """The name a comment uses: the new path, the old one for a deleted file."""
        return self.new_path if self.new_path is not None else self.old_path


def unquote(raw: str) -> str:
    """A path as git writes it in `---`/`+++` lines: C-quoted ("a/f\\303\\251") when
    it holds special bytes, else as is."""
    if not (len(raw) >= 2 and raw.startswith('"') and raw.endswith('"')):
        return raw
    body, out, i = raw[1:-1], bytearray(), 0
    while i < len(body):
        c = body[i]
        if c == "\\" and i + 1 < len(body):
            nxt = body[i + 1]
            if nxt in "01234567" and re.match(r"[0-7]{3}", body[i + 1 : i + 4]):
                out.append(int(body[i + 1 : i + 4], 8))
                i += 4
                continue
            if nxt in _ESCAPES:
                out.append(_ESCAPES[nxt])
                i += 2
                continue
        out.extend(c.encode("utf-8", "surrogateescape"))
        i += 1
    return out.decode("utf-8", "replace")


def _path_of(rest: str) -> str | None:
    rest = rest.rstrip("\n").split("\t", 1)[0]  # GNU diff may add a tab and a date
    if rest == "/dev/null":
        return None
    path = unquote(rest)
    if path[:2] in ("a/", "b/"):
        path = path[2:]
    return path


def _lines(text: str) -> Iterator[str]:
    """The lines of `text` one at a time (split on "\n" only): never a list of
    them all, which for a patch of 25 MiB was most of the memory a comment took."""
    start, end = 0, len(text)
    while start <= end:
        stop = text.find("\n", start)
        if stop < 0:
            stop = end
        yield text[start:stop]
        start = stop + 1


def parse(
    text: str, only: str | None = None, near: tuple[Side, int] | None = None
) -> list[FilePatch]:
    """The files of a unified patch, with their hunks' lines numbered. With
    `only`, the lines of that file alone are kept, and with `near` (a side and a
    line) only its hunks whose range on that side holds the line: a patch of
    25 MiB is millions of lines, the others are counted, never built."""
    files: list[FilePatch] = []
    current: FilePatch | None = None
    hunk: list[PatchLine] | None = None
    keep = in_file = True
    old_no = new_no = old_left = new_left = 0
    pending_old: str | None = None
    for line in _lines(text):
        if hunk is not None and (old_left > 0 or new_left > 0):
            kind = line[:1]
            if kind in (" ", ""):  # an editor may strip a blank context line's space
                if keep:
                    hunk.append(PatchLine(" ", old_no, new_no, line[1:]))
                old_no, new_no = old_no + 1, new_no + 1
                old_left, new_left = old_left - 1, new_left - 1
                continue
            if kind == "-":
                if keep:
                    hunk.append(PatchLine("-", old_no, None, line[1:]))
                old_no, old_left = old_no + 1, old_left - 1
                continue
            if kind == "+":
                if keep:
                    hunk.append(PatchLine("+", None, new_no, line[1:]))
                new_no, new_left = new_no + 1, new_left - 1
                continue
            if kind == "\\":  # "\ No newline at end of file"
                continue
            hunk = None  # a short hunk: read the line as a header
        if line.startswith("diff --git "):
            current, hunk, pending_old = None, None, None
        elif line.startswith("--- "):  # (a hunk's own lines were consumed above)
            pending_old = line[4:]
        elif line.startswith("+++ ") and pending_old is not None:
            current = FilePatch(_path_of(pending_old), _path_of(line[4:]))
            files.append(current)
            pending_old, hunk = None, None
            keep = in_file = only is None or current.path == only
        elif current is not None and (m := _HUNK.match(line)):
            old_no, new_no = int(m[1]), int(m[3])
            old_left = int(m[2]) if m[2] is not None else 1
            new_left = int(m[4]) if m[4] is not None else 1
            keep = in_file
            if near is not None:
                start, size = (new_no, new_left) if near[0] == "new" else (old_no, old_left)
                keep = in_file and start <= near[1] < start + size
            hunk = []
            if keep:
                current.hunks.append(hunk)
        elif line.startswith("\\"):
            continue
    return files


def find(files: list[FilePatch], path: str) -> FilePatch | None:
    return next((f for f in files if f.path == path), None)


_DIFF_GIT = re.compile(r"^diff --git ", re.MULTILINE)


def file_patch(text: str, path: str, near: tuple[Side, int] | None = None) -> FilePatch | None:
    """The patch of one file, found without reading the others line by line: a
    git patch is cut at its `diff --git` headers (a hunk's lines all start with
    " ", "+" or "-", so such a line is always a header) and only the section
    whose `---`/`+++` name `path` is parsed. A patch without those headers is
    parsed whole. `near`: only the hunks that hold that line (parse)."""
    starts = [m.start() for m in _DIFF_GIT.finditer(text)]
    if not starts:
        return find(parse(text, only=path, near=near), path)
    starts.append(len(text))
    for start, stop in itertools.pairwise(starts):
        head_end = text.find("\n@@", start, stop)
        head = parse(text[start : stop if head_end < 0 else head_end])
        if head and head[0].path == path:
            return find(parse(text[start:stop], only=path, near=near), path)
    return None


def _number(line: PatchLine, side: Side) -> int | None:
    return line.new if side == "new" else line.old


def cut(fp: FilePatch, side: Side, first: int, last: int) -> str | None:
    """The lines `first`..`last` of `side` with up to CONTEXT lines of their hunk
    around them, one per line as `<number> <kind><text>` (the number on `side`,
    blank for a line not on it), at most MAX_CODE_CHARS; None unless every one of
    those lines is in one hunk on that side."""
    for hunk in fp.hunks:
        at = {_number(pl, side): i for i, pl in enumerate(hunk) if _number(pl, side) is not None}
        if not all(n in at for n in range(first, last + 1)):
            continue
        lo, hi = max(0, at[first] - CONTEXT), min(len(hunk), at[last] + CONTEXT + 1)
        width = len(str(max((n for n in at if n is not None), default=last)))
        out: list[str] = []
        size = 0
        for pl in hunk[lo:hi]:
            n = _number(pl, side)
            text = pl.text if len(pl.text) <= MAX_LINE_CHARS else pl.text[:MAX_LINE_CHARS] + "…"
            row = f"{'' if n is None else n:>{width}} {pl.kind}{text}"
            if size + len(row) + 1 > MAX_CODE_CHARS:
                out.append("…")
                break
            out.append(row)
            size += len(row) + 1
        return "\n".join(out)
    return None
