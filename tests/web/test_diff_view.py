"""The `work` mail's diff renderer (web/diff_view.py, templates/_diff.html):
strict parsing of work.json and turn.diff (malformed → BadWork, the thread then
shows plain mail), per-file views (binary, huge, renamed, capped), collapsing,
highlighting, and the XSS corpus inert in paths, old paths and file contents."""

from __future__ import annotations

import json
import re
from html.parser import HTMLParser
from typing import Any

import pytest

from mailui4agents.web import diff_view
from mailui4agents.web.diff_view import BadWork, build, parse_patch
from mailui4agents.web.render import environment
from tests.web.test_browser import XSS

A = "a" * 40
B = "b" * 40

# What `git diff --no-color --no-ext-diff -M` printed for a real repository
# (modified, deleted, binary, renamed with a change, a new file whose name git quotes).
PATCH = "".join(
    line + "\n"
    for line in (
        "diff --git a/app.py b/app.py",
        "index 9cc613f..c9812d6 100644",
        "--- a/app.py",
        "+++ b/app.py",
        "@@ -1,5 +1,6 @@",
        " def f():",
        "-    return 1",
        "+    return 2  # <b>",
        " ",
        " ",
        " print(f())",
        '+print("x")',
        "diff --git a/dead.md b/dead.md",
        "deleted file mode 100644",
        "index 286c5f5..0000000",
        "--- a/dead.md",
        "+++ /dev/null",
        "@@ -1 +0,0 @@",
        "-gone",
        "diff --git a/img.bin b/img.bin",
        "index bdc955b..8835708 100644",
        "Binary files a/img.bin and b/img.bin differ",
        "diff --git a/old.txt b/new.txt",
        "similarity index 85%",
        "rename from old.txt",
        "rename to new.txt",
        "index 2019eda..4d3ab13 100644",
        "--- a/old.txt",
        "+++ b/new.txt",
        "@@ -1,7 +1,7 @@",
        " one",
        " two",
        " three",
        "-four",
        "+FOUR",
        " five",
        " six",
        " seven",
        'diff --git "a/\\303\\251 <x>.txt" "b/\\303\\251 <x>.txt"',
        "new file mode 100644",
        "index 0000000..45b983b",
        "--- /dev/null",
        '+++ "b/\\303\\251 <x>.txt"\t',
        "@@ -0,0 +1 @@",
        "+hi",
    )
)


def entry(path: str, status: str, added: int | None, deleted: int | None, **more: Any) -> Any:
    return {"path": path, "old_path": None, "status": status, "added": added,
            "deleted": deleted, "binary": added is None, **more}  # fmt: skip


FILES: list[dict[str, Any]] = [
    entry("app.py", "modified", 2, 1),
    entry("dead.md", "deleted", 0, 1),
    entry("img.bin", "modified", None, None),
    entry("new.txt", "renamed", 1, 1, old_path="old.txt"),
    entry("é <x>.txt", "added", 1, 0),
]


def work_json(files: list[dict[str, Any]] | None = None, **over: Any) -> bytes:
    doc: dict[str, Any] = {
        "version": 1,
        "branch": "agentmail/fix",
        "path": "/state/worktrees/abc/s1",
        "base_branch": "main",
        "from_commit": A,
        "to_commit": B,
        "capped": False,
        "patch_bytes": len(PATCH),
        "files": FILES if files is None else files,
        **over,
    }
    return json.dumps(doc).encode()


class Mail(dict[str, Any]):
    pass


def render(view: diff_view.WorkView, comments: dict[Any, Any] | None = None) -> str:
    macro = environment().get_template("_diff.html").module.work_diff  # type: ignore[attr-defined]
    return str(macro(view, {"id": "m1"}, comments or {}, "ana"))


class Tags(HTMLParser):
    """Every start tag and attribute name of a page (what a browser would make)."""

    def __init__(self) -> None:
        super().__init__()
        self.tags: list[str] = []
        self.attrs: list[str] = []

    def handle_starttag(self, tag: str, attrs: list[tuple[str, str | None]]) -> None:
        self.tags.append(tag)
        self.attrs += [a for a, _ in attrs]


def tags_of(html: str) -> Tags:
    t = Tags()
    t.feed(html)
    return t


SAFE_TAGS = {"div", "p", "span", "code", "details", "summary", "button"}


# --- parsing ---------------------------------------------------------------------


def test_a_real_git_patch_is_read_file_by_file() -> None:
    sections = {s.path: s for s in parse_patch(PATCH)}
    assert list(sections) == ["app.py", "dead.md", "img.bin", "new.txt", "é <x>.txt"]
    assert sections["img.bin"].binary
    assert sections["new.txt"].old_path == "old.txt"
    [hunk] = sections["app.py"].hunks
    kinds = [(ln.kind, ln.old, ln.new) for ln in hunk.lines]
    assert kinds == [
        ("ctx", 1, 1), ("del", 2, None), ("add", None, 2), ("ctx", 3, 3),
        ("ctx", 4, 4), ("ctx", 5, 5), ("add", None, 6),
    ]  # fmt: skip
    assert sections["dead.md"].hunks[0].lines[0].kind == "del"


def test_the_view_has_every_file_with_its_status_and_counts() -> None:
    view = build(work_json(), PATCH.encode())
    assert [(f.path, f.status, f.added, f.deleted) for f in view.files] == [
        (f["path"], f["status"], f["added"], f["deleted"]) for f in FILES
    ]
    by = {f.path: f for f in view.files}
    assert by["img.bin"].not_shown == "binary file: not shown" and not by["img.bin"].hunks
    assert by["new.txt"].old_path == "old.txt" and by["new.txt"].hunks
    assert all(f.open for f in view.files if not f.binary)
    assert (view.added, view.deleted) == (4, 3)
    html = render(view)
    assert "(from old.txt)" in html
    assert "é &lt;x&gt;.txt" in html
    assert "binary file: not shown" in html
    # A changed line is a row of a change; its number a button for a comment.
    assert 'aria-label="Comment on line 2, added"' in html
    assert 'aria-label="Comment on old line 2, deleted"' in html


def test_python_is_highlighted_and_plain_text_is_escaped() -> None:
    view = build(work_json(), PATCH.encode())
    by = {f.path: f for f in view.files}
    assert by["app.py"].highlighted
    # A name no lexer claims: plain, escaped text.
    files = [{**FILES[0], "path": "notes.zzq", "added": 1, "deleted": 0}]
    patch = "diff --git a/notes.zzq b/notes.zzq\n--- a/notes.zzq\n+++ b/notes.zzq\n"
    patch += "@@ -0,0 +1 @@\n+if <i> return\n"
    plain = build(work_json(files), patch.encode()).files[0]
    assert not plain.highlighted
    assert plain.hunks[0].lines[0].html == "if &lt;i&gt; return"
    added = by["app.py"].hunks[0].lines[2]
    assert '<span class="pg-k">return</span>' in added.html
    assert "&lt;b&gt;" in added.html and "<b>" not in added.html


@pytest.mark.parametrize(
    "doc",
    [
        b"",
        b"not json",
        b"\xff\xfe",
        b"[]",
        work_json(version=2),
        work_json(from_commit="A" * 40),  # not lower-case hex
        work_json(to_commit="b" * 39),
        work_json(capped="no"),
        work_json(extra=1),
        work_json(files=[{**FILES[0], "status": "copied"}]),
        work_json(files=[{**FILES[0], "added": None}]),  # null counts only for binary
        work_json(files=[{**FILES[2], "added": 3, "deleted": 1}]),
        work_json(files=[{**FILES[3], "old_path": None}]),  # a rename names its old path
        work_json(files=[{**FILES[0], "path": ""}]),
        work_json(files=[{**FILES[0], "path": "a\x00b"}]),
        work_json(files=[{**FILES[0], "added": -1}]),
        work_json(files=[{**FILES[0], "added": "2"}]),
        work_json(files=[FILES[0]] * (diff_view.MAX_WORK_FILES + 1)),
        b"[" * 100_000,
        b" " * (diff_view.WORK_JSON_MAX_BYTES + 1),
    ],
)
def test_a_malformed_work_json_is_refused(doc: bytes) -> None:
    with pytest.raises(BadWork):
        build(doc, PATCH.encode())


@pytest.mark.parametrize(
    "patch",
    [
        "diff --git a/x b/x\n--- a/x\n+++ b/x\n@@ -1 +1 @@\n",  # the hunk's lines are missing
        "diff --git a/x b/x\n--- a/x\n+++ b/x\n@@ nonsense @@\n x\n",
        "diff --git a/x b/x\n--- a/x\n+++ b/x\n@@ -1,2 +1,2 @@\n x\n?y\n",
        "diff --git a/x b/x\n--- a/x\n+++ b/x\n@@ -1 +1 @@\n+a\n+b\n",  # more than announced
        'diff --git "a/\\q" "b/\\q"\n--- "a/\\q"\n+++ "b/\\q"\n',  # a bad escape
    ],
)
def test_a_malformed_patch_is_refused(patch: str) -> None:
    files = [{**FILES[0], "path": "x"}]
    with pytest.raises(BadWork):
        build(work_json(files), patch.encode())


def test_a_patch_that_is_not_utf8_is_shown_with_replacement_characters() -> None:
    patch = b"diff --git a/x b/x\n--- a/x\n+++ b/x\n@@ -1 +1 @@\n-caf\xe9\n+caf\xc3\xa9\n"
    view = build(work_json([{**FILES[0], "path": "x", "added": 1}]), patch)
    lines = view.files[0].hunks[0].lines
    assert [ln.text for ln in lines] == ["caf\ufffd", "café"]


# --- limits ------------------------------------------------------------------------


def test_a_capped_turn_shows_the_stat_and_the_note() -> None:
    view = build(work_json(capped=True, patch_bytes=52_428_800), None)
    assert view.note is not None and "52428800 bytes" in view.note
    assert all(not f.hunks for f in view.files)
    html = render(view)
    assert "past the bridge&#39;s limit" in html
    assert "app.py" in html and "+2" in html


def test_a_patch_too_large_to_read_is_named_not_parsed() -> None:
    view = build(work_json(), None, patch_size=diff_view.PATCH_READ_MAX_BYTES + 1)
    assert view.note is not None and "download turn.diff" in view.note


def one_file_patch(path: str, added: int) -> str:
    body = "".join(f"+line {i}\n" for i in range(added))
    return (
        f"diff --git a/{path} b/{path}\n--- a/{path}\n+++ b/{path}\n@@ -0,0 +1,{added} @@\n{body}"
    )


def test_a_long_file_is_collapsed_and_a_huge_one_is_named_only() -> None:
    long_n = diff_view.COLLAPSE_LINES + 1
    huge_n = diff_view.FILE_MAX_LINES + 1
    files = [
        {**FILES[0], "path": "short.py", "added": 3, "deleted": 0},
        {**FILES[0], "path": "long.py", "added": long_n, "deleted": 0},
        {**FILES[0], "path": "huge.py", "added": huge_n, "deleted": 0},
    ]
    patch = one_file_patch("short.py", 3) + one_file_patch("long.py", long_n)
    patch += one_file_patch("huge.py", huge_n)
    view = build(work_json(files), patch.encode())
    short, long_, huge = view.files
    assert short.open and not long_.open and not huge.open
    assert long_.hunks and not huge.hunks
    assert huge.not_shown is not None and "too large to show" in huge.not_shown
    html = render(view)
    assert len(re.findall(r"<details[^>]* open>", html)) == 1


def test_highlighting_is_skipped_for_a_file_past_its_limit() -> None:
    n = diff_view.HIGHLIGHT_MAX_LINES + 1
    files = [{**FILES[0], "path": "big.py", "added": n, "deleted": 0}]
    view = build(work_json(files), one_file_patch("big.py", n).encode())
    assert not view.files[0].highlighted and view.files[0].hunks
    assert view.files[0].hunks[0].lines[0].html == "line 0"


def test_a_thousand_files_are_all_collapsed_and_the_page_stays_small() -> None:
    files = [{**FILES[0], "path": f"src/m{i}.py", "added": 2, "deleted": 0} for i in range(1000)]
    patch = "".join(one_file_patch(f"src/m{i}.py", 2) for i in range(1000))
    view = build(work_json(files), patch.encode())
    assert len(view.files) == 1000 and view.all_collapsed
    assert not any(f.open for f in view.files)
    html = render(view)
    assert " open>" not in html
    assert html.count("<details") == 1000
    assert len(html) < 2_000_000, len(html)  # about 1.5 kB a file of two lines


def test_the_page_stops_showing_lines_past_its_limit() -> None:
    n = diff_view.FILE_MAX_LINES
    count = diff_view.PAGE_MAX_LINES // n + 2
    files = [{**FILES[0], "path": f"f{i}.txt", "added": n, "deleted": 0} for i in range(count)]
    patch = "".join(one_file_patch(f"f{i}.txt", n) for i in range(count))
    view = build(work_json(files), patch.encode())
    shown = sum(f.line_count for f in view.files if f.hunks)
    assert shown <= diff_view.PAGE_MAX_LINES
    assert view.files[-1].not_shown is not None and "at most" in view.files[-1].not_shown


# --- escaping -----------------------------------------------------------------------


def xss_turn() -> tuple[bytes, bytes]:
    files = []
    patch = ""
    for i, bad in enumerate(XSS):
        path = f"{bad}{i}.html"
        old = f"old{bad}{i}.js"
        files.append(entry(path, "renamed", 2, 1, old_path=old))
        patch += (
            f"diff --git a/{old} b/{path}\nrename from {old}\nrename to {path}\n"
            f"--- a/{old}\n+++ b/{path}\n@@ -1 +1,2 @@\n-{bad}\n+{bad}\n+<p>{bad}</p>\n"
        )
    return work_json(files, branch="agentmail/<script>alert(1)</script>"), patch.encode()


def test_the_xss_corpus_in_paths_and_lines_renders_inert() -> None:
    work, patch = xss_turn()
    view = build(work, patch)
    assert [f.path for f in view.files] == [f"{bad}{i}.html" for i, bad in enumerate(XSS)]
    assert all(f.hunks for f in view.files)  # read from the patch, not only listed
    assert any(f.highlighted for f in view.files)  # .html: the HTML lexer ran on them
    comments = {
        (view.files[0].path, "new", 1): [
            {
                "id": "c1",
                "author": "<b>ana</b>",
                "side": "new",
                "line": 1,
                "end_line": None,
                "body": XSS[1],
                "sent_at": None,
            }
        ]
    }
    html = render(view, comments)
    found = tags_of(html)
    assert set(found.tags) <= SAFE_TAGS, set(found.tags) - SAFE_TAGS
    assert not [a for a in found.attrs if a.startswith("on") or a in ("href", "src", "style")]
    for bad in XSS:
        if "<" in bad:
            assert bad not in html  # escaped wherever it is

    assert "&lt;script&gt;" in html


def test_the_stylesheet_of_the_highlighting_is_current() -> None:
    """static/diff.css is diff_view.highlight_css() (regenerate it when Pygments
    or the styles change)."""
    css = (diff_view.__file__.rsplit("/", 1)[0] + "/static/diff.css",)[0]
    with open(css, encoding="utf-8") as f:
        assert f.read() == diff_view.highlight_css()


def test_every_token_colour_is_readable_on_every_line_background() -> None:
    """WCAG AA (4.5:1) for each colour of static/diff.css against a deleted, an
    added and a plain line, light and dark (axe checks the page the same way)."""
    light, dark = diff_view.highlight_css().split("@media (prefers-color-scheme: dark)")
    for css, backgrounds in (
        (light, diff_view.LIGHT_BACKGROUNDS),
        (dark, diff_view.DARK_BACKGROUNDS),
    ):
        colours = re.findall(r"(?<![-\w])color: (#[0-9A-Fa-f]{3,6})\b", css)
        assert len(colours) > 20
        for colour in colours:
            for bg in backgrounds:
                assert diff_view.contrast(colour, bg) >= 4.5, (colour, bg)


def test_every_line_with_a_comment_button_is_one_the_gateway_accepts() -> None:
    """The page's parser (web/diff_view.py) and the gateway's (domain/patch.py,
    which checks a comment's lines) agree: each line the page offers a comment on
    is on that side of that file's hunks for the gateway too; a line next to
    them is not."""
    from mailui4agents.domain import patch as gateway_patch

    for work, raw in ((work_json(), PATCH.encode()), xss_turn()):
        view = build(work, raw)
        files = gateway_patch.parse(raw.decode())
        offered = 0
        for f in view.files:
            fp = gateway_patch.find(files, f.path)
            for h in f.hunks:
                for ln in h.lines:
                    assert fp is not None, f.path
                    assert gateway_patch.cut(fp, ln.side, ln.number, ln.number), (f.path, ln)
                    offered += 1
            if fp is not None and f.hunks:
                last = max(ln.new or 0 for h in f.hunks for ln in h.lines)
                assert gateway_patch.cut(fp, "new", last + 1, last + 1) is None
        assert offered > 10
