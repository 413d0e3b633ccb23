"""Every `agentmail …` command line the documents show runs as written: the
command exists and takes each option given.

Command lines are read from fenced code blocks (continuation lines joined) and
from code spans in README, CONTRIBUTING and docs/. The words after `agentmail`
are followed down click's command tree (cli/main.py, through LazyGroup); the
first word that is no subcommand ends the command, and every `-x`/`--xyz` after
it, up to `--`, must be one of that command's options. Pure Python (fast tier).
"""

from __future__ import annotations

import re
from collections.abc import Iterator
from pathlib import Path

import click
import pytest

from mailui4agents.cli.main import main as cli_main
from tests.docs.markdown import DOCS, REPO

DOCUMENTS = sorted([*DOCS.rglob("*.md"), REPO / "README.md", REPO / "CONTRIBUTING.md"])
_ENDS = ("|", "||", "&&", ";", ")", "#")


def snippets(text: str) -> Iterator[tuple[int, str]]:
    """(line, text) of each code-block line and each code span."""
    for m in re.finditer(r"```[^\n]*\n(.*?)```", text, re.S):
        first = text.count("\n", 0, m.start()) + 2
        for i, line in enumerate(re.sub(r"\\\n\s*", " ", m.group(1)).splitlines()):
            yield first + i, line
    prose = re.sub(r"```.*?```", lambda m: "\n" * m.group(0).count("\n"), text, flags=re.S)
    for m in re.finditer(r"`([^`\n]+)`", prose):
        yield prose.count("\n", 0, m.start()) + 1, m.group(1)


def problems_in(line: str) -> list[str]:
    ctx = click.Context(cli_main)
    out: list[str] = []
    for m in re.finditer(r"(?:^|[\s;&|(])agentmail((?:\s+\S+)*)", line):
        words: list[str] = []
        for word in m.group(1).split():
            if word in _ENDS or word.startswith(("#", ">", "2>")):
                break
            words.append(word)
        cmd: click.Command | None = cli_main
        path: list[str] = []
        i = 0
        while i < len(words) and isinstance(cmd, click.Group):
            word = words[i]
            if not re.fullmatch(r"[a-z][a-z0-9-]*", word):
                break  # an option or a PLACEHOLDER: the command ends here
            sub = cmd.get_command(ctx, word)
            if sub is None:
                out.append(f"`agentmail {' '.join([*path, word])}` is no command")
            cmd, path, i = sub, [*path, word], i + 1
        if cmd is None:
            continue
        known = {"-h", "--help"} | {
            o
            for p in cmd.params
            if isinstance(p, click.Option)
            for o in (*p.opts, *p.secondary_opts)
        }
        for word in words[i:]:
            if word == "--":
                break
            flag = re.match(r"\[?(--?[a-zA-Z][\w-]*)", word)
            if flag and flag.group(1) not in known:
                out.append(f"`agentmail {' '.join(path)}` has no option {flag.group(1)}")
    return out


@pytest.mark.parametrize("doc", DOCUMENTS, ids=lambda p: str(p.relative_to(REPO)))
def test_command_lines_in_the_documents_run_as_written(doc: Path) -> None:
    where = doc.relative_to(REPO)
    found = [
        f"{where}:{line}: {problem}    ({text.strip()[:80]})"
        for line, text in snippets(doc.read_text(encoding="utf-8"))
        for problem in problems_in(text)
    ]
    assert not found, f"{where} shows commands that do not run:\n  " + "\n  ".join(found)


def test_the_checker_sees_a_wrong_command_and_a_wrong_option() -> None:
    assert problems_in("agentmail send --to a --subjct s") == [
        "`agentmail send` has no option --subjct"
    ]
    assert problems_in("export X=1; agentmail agent sett claude") == [
        "`agentmail agent sett` is no command"
    ]
    assert problems_in("agentmail bridge --agent c --runner command -- ./x --weird") == []
    assert problems_in("agentmail install-hook claude-code --project /srv/shop") == []
