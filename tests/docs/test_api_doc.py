"""docs/api.md is true: what it names exists, and what exists it names.

Checked both ways against the code itself, not against a list kept here:

- **routes**: every (method, path) the app built by `create_app` serves — the
  API, the OpenAPI document and the web UI's pages and form posts — against the
  table rows of docs/api.md whose first cell is a method and whose second names
  the path (`{id}` matches any path parameter). The web UI's routes are rows of
  docs/api.md's "Web UI" table rather than of docs/web.md: one file lists every
  route a client can call, so one test reads one place; docs/web.md tells what
  each page shows, in people's words, and names no methods. Prose in docs/api.md
  that names `METHOD /path` or `/api/v1/…` must name a route that exists, too.
- **CLI**: click's command tree from `cli/main.py` (through `LazyGroup`, so every
  lazily imported command), each command's options and the values of its choice
  parameters, against the rows of the "CLI" table.
- **environment**: every `AGENTMAIL_*` name the sources use (a string of its
  own, a keyword of an environment mapping, a click `envvar`), and
  `AGENTMAIL_<FIELD>` for every field of `Settings` (`Settings.from_env`),
  against the first cells of the "Environment" tables; every variable those
  tables name is read somewhere in src/.
- **settings**: the gateway table names each `Settings` field with its variable
  and its default; a setting named in prose is a field.

Pure Python: builds the app without starting it, imports the commands without
running them (fast tier).
"""

from __future__ import annotations

import ast
import functools
import re
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import click
import pytest
from fastapi import FastAPI
from fastapi.routing import APIRoute
from pydantic import BaseModel

import mailui4agents
from mailui4agents.app import create_app
from mailui4agents.cli.main import main as cli_main
from mailui4agents.settings import Settings
from tests.docs.markdown import API_MD, CODE, Row, line_of, rows, rows_under

METHODS = ("GET", "POST", "PUT", "PATCH", "DELETE")
SRC = Path(mailui4agents.__file__).parent


def _doc() -> str:
    return API_MD.read_text(encoding="utf-8")


def norm(path: str) -> str:
    """`/api/v1/mail/{mail_id}` and `/api/v1/mail/{id}` are one route."""
    return re.sub(r"\{[^}]*\}", "{}", path.split("?", 1)[0])


# --- routes -------------------------------------------------------------------------


def served_routes(app: FastAPI) -> dict[tuple[str, str], str]:
    """(method, normalised path) -> the path as the code writes it."""
    try:  # FastAPI ≥ 0.13x keeps included routers whole; this walks into them
        from fastapi.routing import iter_route_contexts

        contexts: list[Any] = list(iter_route_contexts(app.routes))
    except ImportError:
        contexts = list(app.routes)
    out: dict[tuple[str, str], str] = {}
    for route in contexts:
        path = getattr(route, "path", None)
        methods = getattr(route, "methods", None)
        if path is None or not methods:
            continue
        for method in methods:
            if method in METHODS:
                out[(method, norm(path))] = path
    return out


def documented_routes(text: str) -> dict[tuple[str, str], tuple[Row, str]]:
    """(method, normalised path) -> the row and the path as written there."""
    out: dict[tuple[str, str], tuple[Row, str]] = {}
    for row in rows(text):
        if len(row.cells) < 2:
            continue
        methods = re.findall(r"[A-Z]+", row.cells[0])
        if not methods or not set(methods) <= set(METHODS):
            continue
        paths = [p for p in CODE.findall(row.cells[1]) if p.startswith("/")]
        assert paths, f"{row.where}: a {row.cells[0]} row names no `/path` in its second cell"
        for method in methods:
            for path in paths:
                out[(method, norm(path))] = (row, path)
    return out


@pytest.fixture(scope="module")
def served(tmp_path_factory: pytest.TempPathFactory) -> dict[tuple[str, str], str]:
    return served_routes(create_app(Settings(data_dir=tmp_path_factory.mktemp("docs"))))


def _section_for(path: str) -> str:
    if path.startswith("/api/v1/agent/"):
        return "## Agents"
    if path.startswith("/api/") or path in ("/healthz", "/readyz"):
        return "## Humans (or ## Health)"
    return "## Web UI"


def test_every_served_route_has_a_row_in_api_md(served: dict[tuple[str, str], str]) -> None:
    documented = documented_routes(_doc())
    missing = [
        f"{m} {served[(m, p)]}: add a row `| {m} | `{served[(m, p)]}` | … |` "
        f"under {_section_for(p)}"
        for m, p in sorted(served)
        if (m, p) not in documented
    ]
    assert not missing, "served, but docs/api.md has no table row for:\n  " + "\n  ".join(missing)


def test_every_route_row_of_api_md_is_served(served: dict[tuple[str, str], str]) -> None:
    stale = [
        f"{row.where}: {m} {written} — no such route"
        for (m, p), (row, written) in sorted(documented_routes(_doc()).items())
        if (m, p) not in served
    ]
    assert not stale, "docs/api.md documents routes the app does not serve:\n  " + "\n  ".join(
        stale
    )


def prose_routes(text: str) -> Iterator[tuple[int, str | None, str]]:
    """`METHOD /path` and bare `/api/…` paths named in running text and code spans."""
    for m in re.finditer(r"\b(GET|POST|PUT|PATCH|DELETE) +`?(/[^\s`,;)]*)", text):
        yield line_of(text, m.start()), m.group(1), m.group(2)
    for m in CODE.finditer(text):
        span = m.group(1)
        if re.fullmatch(r"/(api/\S*|healthz|readyz)", span) and not span.endswith("/"):
            yield line_of(text, m.start()), None, span


def test_routes_named_in_api_md_prose_exist(served: dict[tuple[str, str], str]) -> None:
    paths = {p for _, p in served}
    stale = []
    for line, method, path in prose_routes(_doc()):
        p = norm(path.rstrip(".:"))
        # A bare path may name a prefix ("everything lives under `/api/v1`").
        ok = (
            (method, p) in served if method else any(q == p or q.startswith(p + "/") for q in paths)
        )
        if not ok:
            stale.append(f"docs/api.md:{line}: {method or 'any method'} {path}")
    assert not stale, "docs/api.md names routes that do not exist:\n  " + "\n  ".join(stale)


# Documents that name the gateway's routes in prose, often without the `/api/v1`
# prefix (`POST /auth/login`). docs/platforms.md is left out: it names the agent
# CLIs' own HTTP routes (opencode's `POST /session`). docs/web.md and
# docs/remote.md are checked too, for what they name exists.
PROSE_DOCS = [
    "README.md",
    "CONTRIBUTING.md",
    "docs/behaviour.md",
    "docs/design.md",
    "docs/limits.md",
    "docs/bridge.md",
    "docs/mcp.md",
    "docs/postgres.md",
    "docs/access.md",
    "docs/web.md",
    "docs/remote.md",
]


@pytest.mark.parametrize("name", PROSE_DOCS)
def test_routes_named_in_the_other_docs_exist(
    name: str, served: dict[tuple[str, str], str]
) -> None:
    path = API_MD.parents[1] / name
    assert path.exists(), f"{name} is gone: drop it from PROSE_DOCS"
    paths = {p for _, p in served}
    stale = []
    for line, method, written in prose_routes(path.read_text(encoding="utf-8")):
        bare = written.rstrip(".:…")
        candidates = [norm(bare), norm("/api/v1" + bare)]
        if method:
            ok = any((method, c) in served for c in candidates)
        else:
            ok = any(q == c or q.startswith(c.rstrip("/") + "/") for c in candidates for q in paths)
        if not ok:
            stale.append(f"{name}:{line}: {method or 'any method'} {written}")
    assert not stale, f"{name} names routes that do not exist:\n  " + "\n  ".join(stale)


# --- CLI ----------------------------------------------------------------------------


def commands() -> Iterator[tuple[tuple[str, ...], click.Command]]:
    """Every command of `agentmail`, the root () included, through LazyGroup."""
    ctx = click.Context(cli_main)

    def walk(cmd: click.Command, path: tuple[str, ...]) -> Iterator[Any]:
        yield path, cmd
        if isinstance(cmd, click.Group):
            for name in cmd.list_commands(ctx):
                sub = cmd.get_command(ctx, name)
                assert sub is not None, f"`agentmail {' '.join((*path, name))}` does not load"
                if not sub.hidden:
                    yield from walk(sub, (*path, name))

    yield from walk(cli_main, ())


def options_of(cmd: click.Command) -> list[click.Option]:
    return [p for p in cmd.params if isinstance(p, click.Option) and not p.hidden]


def _cli_rows() -> list[Row]:
    return [r for r in rows_under(_doc(), "CLI") if r.header[:1] == ("command",)]


def documented_commands() -> tuple[dict[tuple[str, ...], Row], list[str]]:
    """Command path -> its row; and the rows naming a command that does not exist."""
    ctx = click.Context(cli_main)
    found: dict[tuple[str, ...], Row] = {}
    bad: list[str] = []
    for row in _cli_rows():
        spans = CODE.findall(row.cells[0])
        words = spans[0].split() if spans else []
        if words[:1] != ["agentmail"]:
            bad.append(f"{row.where}: {row.cells[0]!r}: the first cell must be `agentmail …`")
            continue
        paths: list[tuple[tuple[str, ...], click.Command]] = [((), cli_main)]
        for word in words[1:]:
            if not re.fullmatch(r"[a-z][a-z0-9-]*(\|[a-z][a-z0-9-]*)*", word):
                break  # an option or a PLACEHOLDER: the command ends here
            if not all(isinstance(c, click.Group) for _, c in paths):
                break  # a leaf command's argument (e.g. a platform)
            nxt = []
            for path, group in paths:
                assert isinstance(group, click.Group)
                for alt in word.split("|"):
                    sub = group.get_command(ctx, alt)
                    if sub is None:
                        bad.append(
                            f"{row.where}: `agentmail {' '.join((*path, alt))}`: no such command"
                        )
                    else:
                        nxt.append(((*path, alt), sub))
            paths = nxt
        for path, _ in paths:
            found[path] = row
    return found, bad


def _flags_in(row: Row) -> set[str]:
    text = " ".join(row.cells[:2])
    return set(re.findall(r"(?<![\w-])(--?[a-zA-Z][\w-]*)", text))


def test_every_cli_row_names_a_command() -> None:
    _, bad = documented_commands()
    assert not bad, "docs/api.md, CLI:\n  " + "\n  ".join(bad)


def test_every_command_and_option_is_in_the_cli_table() -> None:
    documented, _ = documented_commands()
    problems: list[str] = []
    for path, cmd in commands():
        name = " ".join(("agentmail", *path))
        opts = options_of(cmd)
        if path not in documented:
            if isinstance(cmd, click.Group) and not opts:
                continue  # a bare group: its subcommands have the rows
            problems.append(f"`{name}` has no row in the CLI table")
            continue
        row = documented[path]
        flags = _flags_in(row)
        for opt in opts:
            if not flags & {*opt.opts, *opt.secondary_opts}:
                problems.append(
                    f"{row.where}: `{name}`: option {'/'.join(opt.opts)} is not in its row"
                )
        words = set(re.findall(r"[\w-]+", " ".join(row.cells[:2])))
        for param in cmd.params:
            choices = getattr(param.type, "choices", None) or ()
            missing = [str(c) for c in choices if str(c) not in words]
            hidden = isinstance(param, click.Option) and param.hidden
            if missing and not hidden:
                problems.append(f"{row.where}: `{name}` {param.name}: choices {missing} missing")
    assert not problems, "docs/api.md, CLI:\n  " + "\n  ".join(problems)


def test_every_option_in_the_cli_table_exists() -> None:
    documented, _ = documented_commands()
    tree = dict(commands())
    problems = []
    for path, row in sorted(documented.items()):
        cmd = tree[path]
        known = {o for p in options_of(cmd) for o in (*p.opts, *p.secondary_opts)}
        known |= {"-h", "--help"}
        for flag in sorted(_flags_in(row) - known):
            problems.append(f"{row.where}: `agentmail {' '.join(path)}` has no option {flag}")
    assert not problems, "docs/api.md names options that do not exist:\n  " + "\n  ".join(problems)


# --- environment ----------------------------------------------------------------------

_ENV_NAME = re.compile(r"[A-Z][A-Z0-9]*(_[A-Z0-9]+)+")


@functools.cache
def env_names_in_src() -> dict[str, set[str]]:
    """Every `AGENTMAIL_*` name src/ uses as a whole string or a keyword (an
    environment mapping built with `dict(NAME=…)`), with the files."""
    found: dict[str, set[str]] = {}
    for path in SRC.rglob("*.py"):
        for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
            name = None
            if isinstance(node, ast.Constant) and isinstance(node.value, str):
                name = node.value
            elif isinstance(node, ast.keyword):
                name = node.arg
            if name and name.startswith("AGENTMAIL_") and _ENV_NAME.fullmatch(name):
                found.setdefault(name, set()).add(str(path.relative_to(SRC.parent)))
    for field in Settings.model_fields:  # Settings.from_env: AGENTMAIL_<FIELD>
        found.setdefault(f"AGENTMAIL_{field.upper()}", set()).add("mailui4agents/settings.py")
    return found


@functools.cache
def strings_in_src() -> set[str]:
    out: set[str] = set()
    for path in SRC.rglob("*.py"):
        for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
            if isinstance(node, ast.Constant) and isinstance(node.value, str):
                out.add(node.value)
    return out


def env_rows() -> dict[str, Row]:
    out: dict[str, Row] = {}
    for row in rows_under(_doc(), "Environment"):
        if row.header[:1] != ("variable",):
            continue
        for name in CODE.findall(row.cells[0]):
            if _ENV_NAME.fullmatch(name):
                out[name] = row
    return out


def test_every_environment_variable_the_code_reads_is_documented() -> None:
    documented = env_rows()
    missing = [
        f"{name} (used in {', '.join(sorted(files))})"
        for name, files in sorted(env_names_in_src().items())
        if name not in documented
    ]
    assert not missing, "docs/api.md, Environment, has no row for:\n  " + "\n  ".join(missing)


def test_every_documented_environment_variable_exists() -> None:
    in_src = env_names_in_src()
    strings = strings_in_src()
    text = _doc()
    stale = [
        f"{row.where}: {name} is read nowhere in src/"
        for name, row in sorted(env_rows().items())
        if name not in in_src and name not in strings
    ]
    for m in re.finditer(r"AGENTMAIL_[A-Z0-9_]*[A-Z0-9]", text):
        if m.group(0) not in in_src:
            stale.append(f"docs/api.md:{line_of(text, m.start())}: {m.group(0)} does not exist")
    assert not stale, "docs/api.md names variables the code does not use:\n  " + "\n  ".join(stale)


@functools.cache
def _test_side_text() -> str:
    root = API_MD.parents[1]
    files = [*(root / "tests").rglob("*.py"), *(root / "scripts").iterdir(), root / "Makefile"]
    return "\n".join(f.read_text(encoding="utf-8") for f in files if f.is_file())


DOCUMENTS = sorted(
    [*(API_MD.parents[1] / "docs").rglob("*.md"), *(API_MD.parents[1] / n for n in PROSE_DOCS[:2])]
)


@pytest.mark.parametrize("path", DOCUMENTS, ids=lambda p: p.name)
def test_environment_variables_named_in_any_document_exist(path: Path) -> None:
    """docs/behaviour.md and the others name variables in prose; each is read by the
    code (a string or keyword in src/, or AGENTMAIL_<FIELD> of Settings), or by the
    test suite and its scripts (`AGENTMAIL_TEST_TIER`)."""
    in_src = env_names_in_src()
    text = path.read_text(encoding="utf-8")
    stale = [
        f"{path.name}:{line_of(text, m.start())}: {m.group(0)} is read nowhere"
        for m in re.finditer(r"AGENTMAIL_[A-Z0-9_]*[A-Z0-9]", text)
        if m.group(0) not in in_src
        and m.group(0) not in strings_in_src()
        and m.group(0) not in _test_side_text()
    ]
    assert not stale, "\n  ".join(["variables the code does not read:", *stale])


# --- settings -------------------------------------------------------------------------


def _default_text(value: object) -> str:
    if isinstance(value, bool):
        return "true" if value else "false"
    if isinstance(value, float) and value.is_integer():
        return str(int(value))
    return str(value)


def test_the_gateway_table_names_every_setting_with_its_variable_and_default() -> None:
    fields = Settings.model_fields
    problems = []
    seen = set()
    for row in rows_under(_doc(), "Environment"):
        if "setting" not in row.header:
            continue
        setting = "".join(CODE.findall(row.get("setting")))
        variable = "".join(CODE.findall(row.get("variable")))
        if setting not in fields:
            problems.append(f"{row.where}: `{setting}` is no field of Settings")
            continue
        seen.add(setting)
        if variable != f"AGENTMAIL_{setting.upper()}":
            problems.append(f"{row.where}: {setting} is read from AGENTMAIL_{setting.upper()}")
        default = fields[setting].default
        cell = row.get("default")
        shown = CODE.findall(cell)
        if default is None or default == ():
            if not cell.startswith("none"):
                problems.append(f"{row.where}: {setting} has no default; write `none: …`")
        elif isinstance(default, Path):
            if not shown or Path(shown[0]) != default:
                problems.append(f"{row.where}: {setting} defaults to `{default}`, not {cell}")
        elif not shown or shown[0] != _default_text(default):
            problems.append(
                f"{row.where}: {setting} defaults to `{_default_text(default)}`, not {cell}"
            )
    problems += [
        f"Settings.{f} (AGENTMAIL_{f.upper()}) has no row in the gateway table"
        for f in fields
        if f not in seen
    ]
    assert not problems, "docs/api.md, Environment, gateway side:\n  " + "\n  ".join(problems)


def _wire_names(served_app: FastAPI) -> set[str]:
    """Field names of every pydantic model in `wire/` and `api/`, and the query
    parameters of the routes: the snake_case names docs/api.md may use that are
    no setting."""
    import importlib
    import pkgutil

    from mailui4agents import api, wire

    names: set[str] = set()
    for package in (wire, api):
        for info in pkgutil.iter_modules(package.__path__, package.__name__ + "."):
            module = importlib.import_module(info.name)
            for value in vars(module).values():
                if isinstance(value, type) and issubclass(value, BaseModel):
                    names |= set(value.model_fields)
    for route in served_app.router.routes:
        if isinstance(route, APIRoute):
            names |= {p.name for p in route.dependant.query_params}
    try:
        from fastapi.routing import iter_route_contexts

        for ctx in iter_route_contexts(served_app.routes):
            dep = getattr(ctx, "dependant", None)
            if dep is not None:
                names |= {p.name for p in dep.query_params}
    except ImportError:
        pass
    return names


SETTING_LIKE = re.compile(r"[a-z][a-z0-9]*(_[a-z0-9]+)*_(s|bytes|chars|days|kib|max|public|cost)")


@pytest.mark.parametrize("name", ["docs/api.md", "docs/behaviour.md", "docs/limits.md"])
def test_settings_named_in_prose_exist(name: str, tmp_path: Path) -> None:
    text = (API_MD.parents[1] / name).read_text(encoding="utf-8")
    wire = _wire_names(create_app(Settings(data_dir=tmp_path)))
    stale = [
        f"{name}:{line_of(text, m.start())}: `{m.group(1)}` is no setting (Settings) "
        "and no wire field"
        for m in re.finditer(r"`([a-z0-9_]+)`", text)
        if SETTING_LIKE.fullmatch(m.group(1))
        and m.group(1) not in Settings.model_fields
        and m.group(1) not in wire
    ]
    assert not stale, "\n  ".join([f"{name} names settings that do not exist:", *stale])
