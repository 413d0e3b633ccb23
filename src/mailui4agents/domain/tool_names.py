"""Tool names that grants (mailui4agents/domain/grants.py) and protected paths
(mailui4agents/domain/protected.py) share. Standard library only: the hook's
read-only fast path imports it (mailui4agents/hooks/core.py)."""

from __future__ import annotations

from collections.abc import Mapping

SHELL_TOOLS: frozenset[str] = frozenset({"Bash", "PowerShell", "run_shell_command"})

# For each file-writing tool, the input keys that may hold its target path.
# Claude Code's NotebookEdit calls it ``notebook_path``; ``file_path`` is kept
# for older versions. Gemini's write_file/replace use ``file_path`` (older
# releases: ``path``).
FILE_TOOL_PATH_KEYS: Mapping[str, tuple[str, ...]] = {
    "Write": ("file_path",),
    "Edit": ("file_path",),
    "MultiEdit": ("file_path",),
    "NotebookEdit": ("file_path", "notebook_path"),
    "write_file": ("file_path", "path"),
    "replace": ("file_path", "path"),
}
FILE_TOOLS: frozenset[str] = frozenset(FILE_TOOL_PATH_KEYS)
