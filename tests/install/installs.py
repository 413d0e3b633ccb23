"""Build this package as a user gets it (`python -m build`) and install the wheel
where no source tree is on the path: a fresh virtualenv, pipx or `uv tool install`
(docs/install.md).

Every process started from an install runs with an empty PYTHONPATH and its
working directory outside the repository, so `import mailui4agents` can only
find the installed copy."""

from __future__ import annotations

import importlib.util
import shutil
import subprocess
import sys
from dataclasses import dataclass
from pathlib import Path

from mailui4agents.testing import clean_env
from tests.needs import missing

REPO = Path(__file__).resolve().parents[2]
PACKAGE = REPO / "src" / "mailui4agents"
CONSTRAINTS = REPO / "constraints.txt"
BUILD_TIMEOUT_S = 600


def outside_env(**extra: str) -> dict[str, str]:
    """An environment that puts no source tree on the path."""
    env = clean_env(PYTHONPATH="", **extra)
    env.pop("VIRTUAL_ENV", None)
    return env


def _run(args: list[str], cwd: Path, env: dict[str, str] | None = None) -> str:
    done = subprocess.run(
        args,
        cwd=cwd,
        env=env if env is not None else outside_env(),
        capture_output=True,
        text=True,
        timeout=BUILD_TIMEOUT_S,
        check=False,
    )
    assert done.returncode == 0, (
        f"{' '.join(args)} exited {done.returncode}:\n{done.stdout[-4000:]}\n{done.stderr[-4000:]}"
    )
    return done.stdout


def clean_copy(source: Path, dest: Path) -> Path:
    """What a build reads from the project at `source`, without what an earlier
    build left there: setuptools takes an old `*.egg-info/SOURCES.txt` as the sdist's
    file list, so a data file a stale one names would hide a forgotten glob."""
    dest.mkdir(parents=True)
    for name in ("pyproject.toml", "README.md"):
        shutil.copy2(source / name, dest / name)
    shutil.copytree(
        source / "src", dest / "src", ignore=shutil.ignore_patterns("*.egg-info", "__pycache__")
    )
    return dest


def build(source: Path, outdir: Path, *, sdist: bool = True) -> tuple[Path, Path | None]:
    """`python -m build` of the project at `source` (a clean copy of it): the sdist,
    then the wheel built from that sdist (so a file the sdist lacks is missing from
    the wheel too). Returns (wheel, sdist); with sdist=False only a wheel."""
    if importlib.util.find_spec("build") is None:
        missing("python -m build is not installed (a dev dependency: make .venv/.installed-stamp)")
    tree = clean_copy(source, outdir.parent / f"{outdir.name}-source")
    what = [] if sdist else ["--wheel"]
    _run([sys.executable, "-m", "build", *what, "--outdir", str(outdir), str(tree)], outdir.parent)
    wheels = sorted(outdir.glob("*.whl"))
    sdists = sorted(outdir.glob("*.tar.gz"))
    assert len(wheels) == 1, wheels
    return wheels[0], (sdists[0] if sdist else None)


@dataclass(frozen=True)
class Installed:
    """An installed `agentmail` and the interpreter of its environment."""

    agentmail: Path
    python: Path


def install_in_venv(wheel: Path, where: Path) -> Installed:
    """A fresh virtualenv holding the wheel and its runtime dependencies (pinned by
    constraints.txt, as `make run` installs them) and nothing else."""
    _run([sys.executable, "-m", "venv", str(where)], where.parent)
    python = where / "bin" / "python"
    _run(
        [str(python), "-m", "pip", "install", "--quiet", "--disable-pip-version-check",
         "-c", str(CONSTRAINTS), str(wheel)],
        where.parent,
    )  # fmt: skip
    return Installed(where / "bin" / "agentmail", python)


def install_with_pipx(wheel: Path, home: Path) -> Installed:
    """`pipx install WHEEL` with pipx's home and bin dir in `home`."""
    if importlib.util.find_spec("pipx") is None:
        missing("pipx is not installed (a dev dependency: make .venv/.installed-stamp)")
    env = outside_env(
        PIPX_HOME=str(home / "pipx"),
        PIPX_BIN_DIR=str(home / "bin"),
        PIPX_MAN_DIR=str(home / "man"),
    )
    _run(
        [sys.executable, "-m", "pipx", "install", f"--pip-args=-c {CONSTRAINTS}", str(wheel)],
        home,
        env,
    )
    venv = home / "pipx" / "venvs" / "mailui4agents"
    return Installed(home / "bin" / "agentmail", venv / "bin" / "python")


def install_with_uv(wheel: Path, home: Path) -> Installed:
    """`uv tool install WHEEL` with uv's tool dir, bin dir and cache in `home`, on
    this interpreter (uv would otherwise fetch a Python of its own)."""
    uv = shutil.which("uv", path=str(Path(sys.executable).parent))
    if uv is None:
        missing("uv is not installed (a dev dependency: make .venv/.installed-stamp)")
    env = outside_env(
        UV_TOOL_DIR=str(home / "uv-tools"),
        UV_TOOL_BIN_DIR=str(home / "bin"),
        UV_CACHE_DIR=str(home / "uv-cache"),
        UV_PYTHON_DOWNLOADS="never",
    )
    _run(
        [uv, "tool", "install", "--python", sys.executable, "--constraints", str(CONSTRAINTS),
         str(wheel)],
        home,
        env,
    )  # fmt: skip
    venv = home / "uv-tools" / "mailui4agents"
    return Installed(home / "bin" / "agentmail", venv / "bin" / "python")


def package_files() -> set[str]:
    """Every file of src/mailui4agents a wheel must carry, as wheel paths
    (`mailui4agents/web/static/app.css`): modules and the data files they read."""
    return {
        f"mailui4agents/{p.relative_to(PACKAGE).as_posix()}"
        for p in PACKAGE.rglob("*")
        if p.is_file() and "__pycache__" not in p.parts and p.suffix != ".pyc"
    }
