"""The real agent CLIs pinned in agent-clis.txt, installed by the project's script.

Tests that need one call :func:`require`: it installs what is missing with
scripts/install-agent-clis.sh; if the CLI is still missing the test fails under
CI=true (never a skip there) and skips loudly elsewhere.
"""

from __future__ import annotations

import os
import subprocess
from pathlib import Path

from tests.needs import missing

REPO = Path(__file__).resolve().parents[2]
PINS = REPO / "agent-clis.txt"
BINARIES = {
    "@anthropic-ai/claude-code": "claude",
    "opencode-ai": "opencode",
    "@mariozechner/pi-coding-agent": "pi",
    "@openai/codex": "codex",
    "@google/gemini-cli": "gemini",
    "@deepseek-ai/dsh": "../../bin/dsh",  # the wrapper that runs dsh with its Node 22
}


def pinned(package: str) -> str:
    for line in PINS.read_text().splitlines():
        line = line.split("#", 1)[0].strip()
        if line.startswith(f"{package}=="):
            return line.split("==", 1)[1]
    raise LookupError(f"{package} is not pinned in {PINS}")


def binary(package: str) -> Path:
    cache = Path(os.environ.get("AGENT_CLIS_CACHE") or REPO / ".cache" / "agent-clis")
    prefix = cache / package.replace("/", "+") / pinned(package)
    return prefix / "node_modules" / ".bin" / BINARIES[package]


def require(package: str) -> Path:
    path = binary(package)
    if not path.exists():
        subprocess.run(["bash", str(REPO / "scripts" / "install-agent-clis.sh")], check=False)
    if path.exists():
        return path
    missing(f"{package}=={pinned(package)} is not installed (scripts/install-agent-clis.sh failed)")
