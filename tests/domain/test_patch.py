"""domain/patch.py: placing a review comment in an untrusted unified patch."""

from __future__ import annotations

import random

from mailui4agents.domain import patch

TWO_HUNKS = "\n".join(
    [
        "diff --git a/m.py b/m.py",
        "--- a/m.py",
        "+++ b/m.py",
        "@@ -1,3 +1,3 @@",
        " a",
        "-b",
        "+B",
        " c",
        "@@ -10,2 +10,3 @@",
        " j",
        "+k",
        " l",
        "\\ No newline at end of file",
        "",
    ]
)


def test_lines_are_numbered_per_side_across_hunks() -> None:
    [fp] = patch.parse(TWO_HUNKS)
    assert fp.path == "m.py" and len(fp.hunks) == 2
    assert [(p.kind, p.old, p.new) for p in fp.hunks[1]] == [
        (" ", 10, 10), ("+", None, 11), (" ", 11, 12)
    ]  # fmt: skip
    assert patch.cut(fp, "new", 11, 11) == "10  j\n11 +k\n12  l"
    assert patch.cut(fp, "old", 2, 2) == "1  a\n2 -b\n  +B\n3  c"


def test_a_range_must_lie_in_one_hunk_and_on_its_side() -> None:
    [fp] = patch.parse(TWO_HUNKS)
    assert patch.cut(fp, "new", 3, 10) is None  # spans the gap between hunks
    assert patch.cut(fp, "new", 4, 4) is None  # not shown
    assert patch.cut(fp, "old", 11, 11) is not None
    assert patch.cut(fp, "old", 12, 12) is None  # 12 is only on the new side


def test_quoted_renamed_added_and_deleted_paths() -> None:
    text = "\n".join(
        [
            'diff --git "a/caf\\303\\251 x.txt" "b/caf\\303\\251 x.txt"',
            '--- "a/caf\\303\\251 x.txt"',
            '+++ "b/caf\\303\\251 x.txt"',
            "@@ -1 +1 @@",
            "-1",
            "+2",
            "diff --git a/old.py b/new.py",
            "similarity index 90%",
            "rename from old.py",
            "rename to new.py",
            "--- a/old.py",
            "+++ b/new.py",
            "@@ -1 +1 @@",
            "--- not a header: a removed line",
            "+++ nor this: an added one",
            "diff --git a/n.txt b/n.txt",
            "new file mode 100644",
            "--- /dev/null",
            "+++ b/n.txt",
            "@@ -0,0 +1,2 @@",
            "+x",
            "+y",
            "diff --git a/d.txt b/d.txt",
            "--- a/d.txt",
            "+++ /dev/null",
            "@@ -1 +0,0 @@",
            "-z",
        ]
    )
    files = patch.parse(text)
    assert [(f.old_path, f.new_path, f.path) for f in files] == [
        ("café x.txt", "café x.txt", "café x.txt"),
        ("old.py", "new.py", "new.py"),
        (None, "n.txt", "n.txt"),
        ("d.txt", None, "d.txt"),
    ]
    renamed = files[1]
    assert [(p.kind, p.text) for p in renamed.hunks[0]] == [
        ("-", "-- not a header: a removed line"),
        ("+", "++ nor this: an added one"),
    ]
    assert patch.cut(files[2], "new", 1, 2) == "1 +x\n2 +y"
    assert patch.cut(files[2], "old", 1, 1) is None
    assert patch.cut(files[3], "old", 1, 1) == "1 -z"


def test_the_code_is_capped() -> None:
    long = "x" * 2000
    body = [f"+{long}" for _ in range(40)]
    text = "\n".join(["--- a/f", "+++ b/f", "@@ -0,0 +1,40 @@", *body])
    [fp] = patch.parse(text)
    code = patch.cut(fp, "new", 1, 40)
    assert code is not None
    assert len(code) <= patch.MAX_CODE_CHARS + 2
    assert code.endswith("…")
    first = code.split("\n")[0]
    assert first == " 1 +" + "x" * patch.MAX_LINE_CHARS + "…"


def test_garbage_is_no_patch_and_no_error() -> None:
    rng = random.Random(7)
    pieces = [
        "--- a/x",
        "+++ b/x",
        "@@ -1,2 +1,2 @@",
        "@@ -a +b @@",
        " ",
        "+",
        "-",
        "\\",
        "\t",
        "\x00",
    ]
    for _ in range(500):
        text = "\n".join(rng.choice(pieces) + rng.choice(["", "y", '"q\\x"']) for _ in range(20))
        for fp in patch.parse(text):
            for side in ("new", "old"):
                patch.cut(fp, side, 1, 3)  # never raises
    assert patch.parse("not a patch at all") == []
    assert patch.unquote('"\\q\\') == '"\\q\\'


def test_one_file_and_one_hunk_are_found_without_the_others() -> None:
    """file_patch cuts a git patch at its headers and keeps only the hunk that
    holds the line: the same answer as the whole parse."""
    sections = []
    for f in range(50):
        sections += [f"diff --git a/f{f} b/f{f}", f"--- a/f{f}", f"+++ b/f{f}"]
        for h in range(5):
            sections += [f"@@ -{1 + h * 20},2 +{1 + h * 20},2 @@", f"-o{f}.{h}", f"+n{f}.{h}", " c"]
    text = "\n".join(sections)
    whole = patch.find(patch.parse(text), "f42")
    one = patch.file_patch(text, "f42", near=("new", 41))
    assert whole is not None and one is not None
    assert len(whole.hunks) == 5 and len(one.hunks) == 1
    assert (
        patch.cut(one, "new", 41, 42)
        == patch.cut(whole, "new", 41, 42)
        == "   -o42.2\n41 +n42.2\n42  c"
    )
    far = patch.file_patch(text, "f42", near=("new", 45))  # in no hunk
    assert far is not None and patch.cut(far, "new", 45, 45) is None
    assert patch.file_patch(text, "nope") is None
    plain = "\n".join(sections[1:]).replace("diff --git", "Index:")  # no git headers
    assert [f.path for f in patch.parse(plain)] == [f"f{f}" for f in range(50)]
    found = patch.file_patch(plain, "f42")
    assert found is not None and patch.cut(found, "new", 41, 41) is not None
