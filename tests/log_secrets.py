"""The whole suite's logs, searched for secrets (docs/api.md, "Request ids and logs").

Every gateway and bridge a test starts (mailui4agents/testing.GatewayProcess,
tests/bridge/harness.BridgeProcess) writes what it logged into the folder named
by ``MAILUI4AGENTS_TEST_LOGS`` when it ends, and runs at log level ``info`` so
its one line per request is there to search; the in-process apps' records go to
the same folder through :func:`capture_in_process`. At the end of the run the
controlling pytest process searches every file for:

- an agent key or a person's token (``am_agent_…``, ``am_user_…``; the web
  session cookie holds such a token);
- every password the tests use (``password="…"`` and ``…PASSWORD = "…"``
  literals in tests/);
- a one-time code (pairing codes, e-mail link and push action tokens: 256 bits
  as 43 characters of URL-safe base64).

One hit fails the run and is printed with its file and line.
"""

from __future__ import annotations

import logging
import os
import re
from dataclasses import dataclass
from pathlib import Path

from mailui4agents.testing import TEST_LOGS_ENV

TESTS = Path(__file__).resolve().parent

KEYS = re.compile(r"am_(?:user|agent)_[A-Za-z0-9_-]{16,}")
#: ``secrets.token_urlsafe(32)``: 43 characters, standing alone. Mixed case and a
#: digit or ``-``/``_``: ids (hex, UUIDs) and words never have all three.
#: A run inside standard base64 (``+`` or ``=`` before it; ``+``, ``/`` or ``=`` after
#: it: a DKIM body hash, a SHA-256 digest) is not one; ``/`` before it is a URL path.
ONE_TIME = re.compile(r"(?<![A-Za-z0-9_+=-])[A-Za-z0-9_-]{43}(?![A-Za-z0-9_+/=-])")
PASSWORD_LITERAL = re.compile(r"""(?:password=|PASSWORD\s*=\s*)["']([^"'\n]{8,200})["']""")


def test_passwords(root: Path = TESTS) -> set[str]:
    """Every password literal of at least 8 characters in the tests' sources."""
    found: set[str] = set()
    for path in root.rglob("*.py"):
        found.update(PASSWORD_LITERAL.findall(path.read_text(encoding="utf-8", errors="replace")))
    return found


def looks_one_time(word: str) -> bool:
    return (
        any(c.isupper() for c in word)
        and any(c.islower() for c in word)
        and any(c.isdigit() or c in "-_" for c in word)
    )


@dataclass(frozen=True)
class Hit:
    file: str
    line_no: int
    what: str
    line: str

    def __str__(self) -> str:
        return f"{self.file}:{self.line_no}: {self.what}: {self.line.strip()[:300]}"


def scan_text(name: str, text: str, passwords: set[str]) -> list[Hit]:
    hits: list[Hit] = []
    for no, line in enumerate(text.splitlines(), 1):
        if KEYS.search(line):
            hits.append(Hit(name, no, "a key or token", line))
            continue
        if any(pw in line for pw in passwords):
            hits.append(Hit(name, no, "a test password", line))
            continue
        if any(looks_one_time(m.group(0)) for m in ONE_TIME.finditer(line)):
            hits.append(Hit(name, no, "a one-time code", line))
    return hits


def scan(folder: Path) -> tuple[int, list[Hit]]:
    """(files searched, hits) over every log the run wrote."""
    passwords = test_passwords()
    files = sorted(p for p in folder.glob("*.log") if p.is_file())
    hits: list[Hit] = []
    for path in files:
        hits += scan_text(path.name, path.read_text(encoding="utf-8", errors="replace"), passwords)
    return len(files), hits


def capture_in_process(folder: Path, worker: str) -> logging.Handler:
    """The package's own log records of this pytest process, at info, into the folder."""
    handler = logging.FileHandler(folder / f"in-process-{worker}-{os.getpid()}.log")
    handler.setLevel(logging.INFO)
    handler.setFormatter(logging.Formatter("%(levelname)s %(name)s %(message)s"))
    for name in ("mailui4agents", "uvicorn"):
        logger = logging.getLogger(name)
        logger.addHandler(handler)
        if logger.getEffectiveLevel() > logging.INFO:
            logger.setLevel(logging.INFO)
    return handler


__all__ = ["TEST_LOGS_ENV", "Hit", "capture_in_process", "scan", "scan_text"]
