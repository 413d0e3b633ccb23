"""Files the documents name exist.

A path in README, CONTRIBUTING or docs/ whose first part is a folder of the
repository (`tests/…`, `scripts/…`, `bench/…`, `src/…`, `docs/…`) or of the
package (`services/…`, `hooks/…`, written from `src/mailui4agents/`) must be a
file or folder there. Paths with a placeholder in capitals (`DIR/.mcp.json`,
`results/MAIL_ID.json`, `00NN_what.py`) and paths on the user's machine
(`~/.claude/…`) are not checked. Pure Python (fast tier).
"""

from __future__ import annotations

import re
from pathlib import Path

import pytest

import mailui4agents
from tests.docs.markdown import DOCS, REPO

PACKAGE = Path(mailui4agents.__file__).parent
ROOTS = {"tests", "scripts", "bench", "src", "docs"}
PACKAGE_DIRS = {p.name for p in PACKAGE.iterdir() if p.is_dir() and p.name != "__pycache__"}
DOCUMENTS = sorted([*DOCS.rglob("*.md"), REPO / "README.md", REPO / "CONTRIBUTING.md"])

_PATH = re.compile(r"(?<![\w./~$@-])((?:[\w.-]+/)+[\w.-]*\w)")


def named_paths(text: str) -> list[tuple[int, str]]:
    out = []
    for m in _PATH.finditer(text):
        path = m.group(1).rstrip(".")
        first = path.split("/", 1)[0]
        if first not in ROOTS and first not in PACKAGE_DIRS:
            continue
        if re.search(r"[A-Z]{2,}|<|\*", path) or "…" in path:
            continue  # a placeholder or a glob, not a file
        out.append((text.count("\n", 0, m.start()) + 1, path))
    return out


def exists(path: str) -> bool:
    """A file or folder; or `module.name` (`services/reading.page_of`): the
    module exists and defines or assigns that name."""
    base = REPO if path.split("/", 1)[0] in ROOTS else PACKAGE
    if (base / path).exists():
        return True
    folder, _, last = path.rpartition("/")
    module, dot, name = last.partition(".")
    source = base / folder / f"{module}.py"
    if not dot or not source.is_file():
        return False
    text = source.read_text(encoding="utf-8")
    return re.search(rf"^\s*(async def |def |class )?{re.escape(name)}\b", text, re.M) is not None


@pytest.mark.parametrize("doc", DOCUMENTS, ids=lambda p: str(p.relative_to(REPO)))
def test_paths_named_in_the_documents_exist(doc: Path) -> None:
    where = doc.relative_to(REPO)
    missing = [
        f"{where}:{line}: {path}"
        for line, path in named_paths(doc.read_text(encoding="utf-8"))
        if not exists(path)
    ]
    assert not missing, f"{where} names files that do not exist:\n  " + "\n  ".join(missing)


def test_the_path_finder_sees_both_kinds() -> None:
    text = (
        "see `tests/api/test_nope.py` and services/nope.py, not DIR/.mcp.json, ~/.x/y "
        "or postgresql://u@db/agentmail"
    )
    assert named_paths(text) == [(1, "tests/api/test_nope.py"), (1, "services/nope.py")]
    assert not exists("tests/api/test_nope.py") and exists("services/mail.py")
    assert exists("services/reading.page_of") and not exists("services/reading.no_such")
