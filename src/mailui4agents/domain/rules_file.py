"""`.agentmail/rules.toml`: a workspace's rules in a file (docs/rules.md,
"The rule file"). Parsed here, pure; it counts only once a person accepted its
exact content (services/rules.accept_file)."""

from __future__ import annotations

import hashlib
import tomllib
from dataclasses import dataclass

from mailui4agents.domain.rules import EFFECTS, MAX_PATTERN, MAX_REASON, MAX_TOOL

RULES_FILE = ".agentmail/rules.toml"
MAX_FILE_BYTES = 64 * 1024
MAX_FILE_RULES = 100
_KEYS = frozenset({"effect", "tool", "pattern", "reason"})


class RuleFileError(ValueError):
    """A file that cannot be accepted; the message names the rule or line."""


@dataclass(frozen=True)
class FileRule:
    effect: str
    tool_name: str
    pattern: str | None
    reason: str | None


def sha256_of(content: str) -> str:
    return hashlib.sha256(content.encode("utf-8")).hexdigest()


def parse(content: str) -> list[FileRule]:
    """The rules of the file, or RuleFileError saying what is wrong and where."""
    if len(content.encode("utf-8")) > MAX_FILE_BYTES:
        raise RuleFileError(f"the file is larger than {MAX_FILE_BYTES} bytes")
    try:
        data = tomllib.loads(content)
    except tomllib.TOMLDecodeError as e:
        raise RuleFileError(f"not valid TOML: {e}") from None
    extra = sorted(set(data) - {"rule"})
    if extra:
        raise RuleFileError(f"unknown table or key {extra[0]!r}: only [[rule]] entries")
    entries = data.get("rule", [])
    if not isinstance(entries, list) or not all(isinstance(e, dict) for e in entries):
        raise RuleFileError("rules are written as [[rule]] tables")
    if len(entries) > MAX_FILE_RULES:
        raise RuleFileError(f"at most {MAX_FILE_RULES} rules (got {len(entries)})")
    out = []
    for n, entry in enumerate(entries, start=1):
        where = f"rule {n}"
        unknown = sorted(set(entry) - _KEYS)
        if unknown:
            raise RuleFileError(
                f"{where}: unknown key {unknown[0]!r} (effect, tool, pattern, reason)"
            )
        effect, tool = entry.get("effect"), entry.get("tool")
        pattern, reason = entry.get("pattern"), entry.get("reason")
        if effect not in EFFECTS:
            raise RuleFileError(f"{where}: effect is one of allow, deny, ask")
        if not isinstance(tool, str) or not tool.strip() or len(tool) > MAX_TOOL:
            raise RuleFileError(f"{where}: tool names the tool (1-{MAX_TOOL} characters)")
        if pattern is not None and (
            not isinstance(pattern, str) or not pattern.strip() or len(pattern) > MAX_PATTERN
        ):
            raise RuleFileError(f"{where}: pattern is a non-blank string of ≤ {MAX_PATTERN}")
        if reason is not None and (not isinstance(reason, str) or len(reason) > MAX_REASON):
            raise RuleFileError(f"{where}: reason is a string of ≤ {MAX_REASON} characters")
        out.append(FileRule(effect, tool.strip(), pattern, reason))
    return out
