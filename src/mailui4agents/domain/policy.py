"""The mode policy: which tool calls run, which are refused, which a human must approve.

This is the pure core of the hook and the bridge
(docs/behaviour.md#permission-modes-and-enforcement, docs/behaviour.md#rules-on-the-waiting-side,
docs/behaviour.md#hooks). It is
deliberately small and exhaustively tested, because every mistake here is a
silent hole: a read-only session that can write, or a ``FULL`` typo that turns
off approvals.

Tool classes:

- ``read``: the tool cannot change the machine. Allowed in every mode.
- ``mail``: our own mail tools (docs/behaviour.md#mcp-tools). They only talk to the gateway, which
  applies its own rules, so they run in every mode — a ``plan`` session must
  still be able to report back by mail.
- ``guarded``: everything else, including every name we do not know. Unknown
  means guarded (fail closed): a new platform tool that writes must never slip
  through because nobody added it to a list.

Names are matched exactly (case-sensitive): the platforms send fixed names, so
``bash`` or ``READ`` is not a known tool and therefore guarded.
"""

from __future__ import annotations

from typing import Literal

from mailui4agents.domain.modes import mode_for_deciding

ToolClass = Literal["read", "guarded", "mail"]
Verdict = Literal["allow", "deny", "ask"]

# Claude Code tools that cannot change the machine.
#
# - AskUserQuestion asks the human something; it changes nothing by itself (the
#   question round trip, docs/behaviour.md#questions, is handled separately by the hook).
# - ExitPlanMode only proposes a plan.
# - TodoWrite writes the model's in-memory todo list, not a file.
# - Agent / Task start a subagent. The subagent's own tool calls fire their own
#   PreToolUse hooks and are judged one by one, so starting it is not itself a
#   change. Classing it as guarded would make every subagent need an approval
#   in workspace mode without protecting anything more.
# - WebFetch / WebSearch read the web. They can leak what the model already
#   read, but they cannot change this machine; the read boundary is the
#   workspace isolation of docs/access.md, not this policy.
# Deliberately absent: Bash, PowerShell, Write, Edit, MultiEdit, NotebookEdit,
# Monitor (runs a command) — they fall through to "guarded".
CLAUDE_READ_TOOLS: frozenset[str] = frozenset(
    {
        "Read",
        "Glob",
        "Grep",
        "LS",
        "WebFetch",
        "WebSearch",
        "TodoWrite",
        "AskUserQuestion",
        "ExitPlanMode",
        "Agent",
        "Task",
    }
)

# Gemini CLI tools that cannot change the machine. ``save_memory`` is absent on
# purpose: it writes to ~/.gemini (GEMINI.md), which later sessions read as
# instructions — a write with lasting effect, so it is guarded.
GEMINI_READ_TOOLS: frozenset[str] = frozenset(
    {
        "read_file",
        "read_many_files",
        "glob",
        "search_file_content",
        "list_directory",
        "google_web_search",
        "web_fetch",
    }
)

READ_TOOLS: frozenset[str] = CLAUDE_READ_TOOLS | GEMINI_READ_TOOLS

# Our MCP server's tools (docs/behaviour.md#mcp-tools). Only these exact names count as mail, not a
# bare prefix: Gemini names MCP tools ``mcp_<server>_<tool>``, so a third-party
# server called ``agentmail_x`` would produce ``mcp_agentmail_x_<tool>`` and a
# prefix rule would wave its tools through even in plan mode. A new mail tool
# that is not listed here is merely guarded (asked), which is the safe mistake.
MAIL_TOOL_NAMES: frozenset[str] = frozenset(
    {
        "send_mail",
        "read_inbox",
        "read_mail",
        "read_thread",
        "forward_mail",
        "upload_attachment",
        "download_attachment",
        "suggest_address",
        "list_contacts",
        "session_participants",
        "search_mail",
        "ask_human",
        "connect_to_server",
        "schedule_mail",  # mail sent later: as much mail as send_mail
    }
)

# How each platform spells "tool T of MCP server agentmail": Claude Code
# ``mcp__agentmail__T``, Gemini CLI ``mcp_agentmail_T``, and hosts that prefix
# with the server name only (opencode and others) ``agentmail_T``.
MAIL_TOOL_PREFIXES: tuple[str, ...] = ("mcp__agentmail__", "mcp_agentmail_", "agentmail_")

# Outcomes on the waiting side that allow the tool. Whitelist: anything else —
# deny, empty, expired, cancelled, a shutdown, a differently cased "APPROVE" —
# leaves the tool refused (docs/behaviour.md#rules-on-the-waiting-side).
ALLOWING_OUTCOMES: frozenset[str] = frozenset({"approve", "approved"})


def _is_mail_tool(tool_name: str) -> bool:
    for prefix in MAIL_TOOL_PREFIXES:
        if tool_name.startswith(prefix) and tool_name[len(prefix) :] in MAIL_TOOL_NAMES:
            return True
    return False


def classify_tool(tool_name: str) -> ToolClass:
    """Class of a tool by its exact platform name; unknown names are ``guarded``."""
    if tool_name in READ_TOOLS:
        return "read"
    if _is_mail_tool(tool_name):
        return "mail"
    return "guarded"


def decide(mode: object, tool_name: str, sandbox_verified: bool) -> Verdict:
    """What the mode says about one tool call, before any grant or human is asked.

    ``mode`` goes through :func:`mode_for_deciding`, so a missing, misspelt or
    differently cased mode means ``workspace`` — never ``full``. In
    ``workspace`` a guarded tool is asked of a human, unless the bridge has
    *proven* a sandbox that confines writes to the workspace (docs/behaviour.md#bridge): then
    the kernel refuses what lies outside, and asking would only add latency.
    ``sandbox_verified`` must be True only for a proven boundary; an
    ``is True`` check keeps a truthy non-bool (a string "false") from counting.
    """
    resolved = mode_for_deciding(mode)
    if resolved == "full":
        return "allow"
    if classify_tool(tool_name) != "guarded":
        return "allow"
    if resolved == "plan":
        return "deny"
    return "allow" if sandbox_verified is True else "ask"


def outcome_allows(decision: object) -> bool:
    """True only for the exact strings ``approve`` / ``approved``
    (docs/behaviour.md#rules-on-the-waiting-side whitelist)."""
    return isinstance(decision, str) and decision in ALLOWING_OUTCOMES
