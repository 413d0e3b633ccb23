"""Containerfile and compose.yaml agree with the repository and with each other
(docs/install.md, "Container"): a lint the suite can run without a container
engine. Building the image is not part of the suite (it needs an engine and a
registry for the base image). Pure text, fast tier."""

from __future__ import annotations

import re
import shlex
from pathlib import Path

REPO = Path(__file__).resolve().parents[2]
CONTAINERFILE = (REPO / "Containerfile").read_text(encoding="utf-8")
COMPOSE = (REPO / "compose.yaml").read_text(encoding="utf-8")


def _instructions() -> list[tuple[str, str]]:
    """(INSTRUCTION, arguments), continuation lines joined, comments dropped."""
    joined = re.sub(r"\\\n", " ", CONTAINERFILE)
    out = []
    for line in joined.splitlines():
        line = line.strip()
        if line and not line.startswith("#"):
            word, _, rest = line.partition(" ")
            out.append((word.upper(), rest.strip()))
    return out


def _stages() -> list[str]:
    return [args.split()[-1] for word, args in _instructions() if word == "FROM" and " AS " in args]


def _ignored() -> set[str]:
    lines = (REPO / ".containerignore").read_text(encoding="utf-8").splitlines()
    return {ln.strip() for ln in lines if ln.strip() and not ln.startswith("#")}


def test_every_copied_path_exists_and_is_in_the_build_context() -> None:
    copied: set[str] = set()
    for word, args in _instructions():
        if word != "COPY" or args.startswith("--from"):
            continue
        *sources, _dest = shlex.split(args)
        copied.update(sources)
    # What `python -m build` reads (tests/install/installs.py, clean_copy), and the pins.
    assert {"pyproject.toml", "README.md", "src", "constraints.txt"} <= copied
    for source in sorted(copied):
        assert (REPO / source).exists(), source
        assert source not in _ignored(), f"{source} is excluded by .containerignore"


def test_the_gateway_is_the_default_target_and_the_bridge_a_second_one() -> None:
    stages = _stages()
    assert stages[-1] == "gateway", stages  # `podman build .` builds the last stage
    assert "bridge" in stages
    entrypoints = {}
    stage = ""
    for word, args in _instructions():
        if word == "FROM":
            stage = args.split()[-1]
        elif word == "ENTRYPOINT":
            entrypoints[stage] = args
    assert entrypoints == {
        "bridge": '["agentmail", "bridge"]',
        "gateway": '["agentmail"]',
    }


def test_the_port_is_the_same_everywhere() -> None:
    (expose,) = [args for word, args in _instructions() if word == "EXPOSE"]
    (cmd,) = [args for word, args in _instructions() if word == "CMD" and "serve" in args]
    (health,) = [args for word, args in _instructions() if word == "HEALTHCHECK"]
    assert f'"--port", "{expose}"' in cmd
    assert f"127.0.0.1:{expose}/healthz" in health
    assert f'"127.0.0.1:{expose}:{expose}"' in COMPOSE
    assert "target: gateway" in COMPOSE and "dockerfile: Containerfile" in COMPOSE
    assert "AGENTMAIL_DATABASE_URL: postgresql://" in COMPOSE
