"""Tests for the mode policy: tool classes, verdicts per mode, the approval whitelist."""

from __future__ import annotations

import pytest
from hypothesis import given
from hypothesis import strategies as st

from mailui4agents.domain.policy import classify_tool, decide, outcome_allows

# --- Tool classes, written out by hand -------------------------------------------------

READ_TOOLS = [
    # Claude Code
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
    # Gemini CLI
    "read_file",
    "read_many_files",
    "glob",
    "search_file_content",
    "list_directory",
    "google_web_search",
    "web_fetch",
]
MAIL_TOOLS = [
    "mcp__agentmail__send_mail",
    "mcp__agentmail__ask_human",
    "mcp__agentmail__read_inbox",
    "mcp__agentmail__connect_to_server",
    "mcp_agentmail_send_mail",
    "mcp_agentmail_search_mail",
    "agentmail_read_thread",
    "agentmail_download_attachment",
]
GUARDED_TOOLS = [
    # Claude Code tools that change the machine
    "Bash",
    "PowerShell",
    "Write",
    "Edit",
    "MultiEdit",
    "NotebookEdit",
    "Monitor",
    # Gemini CLI
    "run_shell_command",
    "write_file",
    "replace",
    "save_memory",
    # other MCP servers
    "mcp__github__create_pull_request",
    "mcp_filesystem_write_file",
    # look like ours but are not one of our tools
    "mcp__agentmail__",
    "mcp__agentmail__delete_everything",
    "mcp_agentmail_evil_send_mail",
    "mcp__agentmailx__send_mail",
    "agentmail_",
    "send_mail",
    # names differing only in case or spacing are unknown, hence guarded
    "bash",
    "read",
    "READ",
    "Read ",
    " Read",
    "webfetch",
    "Mcp__agentmail__send_mail",
    # unknown
    "",
    "SomeFutureTool",
]
EXPECTED_CLASS = (
    {name: "read" for name in READ_TOOLS}
    | {name: "mail" for name in MAIL_TOOLS}
    | {name: "guarded" for name in GUARDED_TOOLS}
)


@pytest.mark.parametrize("tool_name", sorted(EXPECTED_CLASS))
def test_every_listed_tool_has_the_class_the_table_says(tool_name: str) -> None:
    assert classify_tool(tool_name) == EXPECTED_CLASS[tool_name]


@given(st.text())
def test_a_random_name_is_guarded_unless_it_is_a_known_read_or_mail_tool(name: str) -> None:
    if name in READ_TOOLS:
        assert classify_tool(name) == "read"
    elif classify_tool(name) == "mail":
        # Only our own tool names on one of the three prefixes are mail.
        assert any(name.startswith(p) for p in ("mcp__agentmail__", "mcp_agentmail_", "agentmail_"))
    else:
        assert classify_tool(name) == "guarded"


# --- decide: every mode × every tool class × sandbox, against a hand-written table -----

# What the mode name *means* when deciding. Exact names only; everything else is
# workspace — in particular nothing that merely resembles "full".
MODE_MEANS: list[tuple[object, str]] = [
    ("plan", "plan"),
    ("workspace", "workspace"),
    ("full", "full"),
    ("FULL", "workspace"),
    ("Full", "workspace"),
    (" full", "workspace"),
    ("full ", "workspace"),
    ("PLAN", "workspace"),
    ("Plan", "workspace"),
    ("", "workspace"),
    (None, "workspace"),
    ("None", "workspace"),
    ("yolo", "workspace"),
    ("bypassPermissions", "workspace"),
    ("default", "workspace"),
    (0, "workspace"),
    (True, "workspace"),
    (["full"], "workspace"),
]

# (meaning, tool class, sandbox verified) → verdict, every combination written out.
VERDICTS: dict[tuple[str, str, bool], str] = {
    ("plan", "read", False): "allow",
    ("plan", "read", True): "allow",
    ("plan", "mail", False): "allow",
    ("plan", "mail", True): "allow",
    ("plan", "guarded", False): "deny",
    ("plan", "guarded", True): "deny",
    ("workspace", "read", False): "allow",
    ("workspace", "read", True): "allow",
    ("workspace", "mail", False): "allow",
    ("workspace", "mail", True): "allow",
    ("workspace", "guarded", False): "ask",
    ("workspace", "guarded", True): "allow",
    ("full", "read", False): "allow",
    ("full", "read", True): "allow",
    ("full", "mail", False): "allow",
    ("full", "mail", True): "allow",
    ("full", "guarded", False): "allow",
    ("full", "guarded", True): "allow",
}

CASES = [
    (mode, meaning, tool, tool_class, sandbox)
    for mode, meaning in MODE_MEANS
    for tool, tool_class in sorted(EXPECTED_CLASS.items())
    for sandbox in (False, True)
]


@pytest.mark.parametrize(("mode", "meaning", "tool", "tool_class", "sandbox"), CASES)
def test_every_mode_tool_and_sandbox_combination_gets_the_verdict_of_the_table(
    mode: object, meaning: str, tool: str, tool_class: str, sandbox: bool
) -> None:
    assert decide(mode, tool, sandbox) == VERDICTS[(meaning, tool_class, sandbox)]


def test_the_table_covers_every_combination_exactly_once() -> None:
    meanings = ("plan", "workspace", "full")
    classes = ("read", "mail", "guarded")
    assert set(VERDICTS) == {(m, c, s) for m in meanings for c in classes for s in (False, True)}


# Negative controls: each "allow" of a guarded tool has a neighbour that is not allowed.


@pytest.mark.parametrize("tool", ["Bash", "Write", "run_shell_command", "mcp__x__y", "Nope"])
def test_full_allows_a_guarded_tool_but_no_spelling_of_full_other_than_the_exact_one_does(
    tool: str,
) -> None:
    assert decide("full", tool, False) == "allow"
    for near_full in ("FULL", "Full", " full", "full ", "fulL", "full\n", "yolo"):
        assert decide(near_full, tool, False) == "ask"
        assert decide(near_full, tool, True) == "allow"  # only via the sandbox, as workspace


def test_a_verified_sandbox_allows_guarded_tools_in_workspace_but_never_in_plan() -> None:
    assert decide("workspace", "Bash", True) == "allow"
    assert decide("workspace", "Bash", False) == "ask"
    assert decide("plan", "Bash", True) == "deny"


def test_only_a_real_true_counts_as_a_verified_sandbox() -> None:
    for not_verified in ("true", "false", 1, [True], object()):
        assert decide("workspace", "Bash", not_verified) == "ask"  # type: ignore[arg-type]


def test_plan_allows_reads_and_mail_but_refuses_every_writing_tool() -> None:
    assert decide("plan", "Read", False) == "allow"
    assert decide("plan", "mcp__agentmail__send_mail", False) == "allow"
    for tool in ("Bash", "Write", "Edit", "NotebookEdit", "write_file", "save_memory"):
        assert decide("plan", tool, False) == "deny"


def test_a_lookalike_of_our_mail_tools_is_refused_in_plan() -> None:
    assert decide("plan", "mcp__agentmail__send_mail", False) == "allow"
    assert decide("plan", "mcp__agentmail__drop_tables", False) == "deny"
    assert decide("plan", "mcp_agentmail_evil_send_mail", False) == "deny"


@given(mode=st.one_of(st.none(), st.text(), st.integers()), tool=st.text(), sandbox=st.booleans())
def test_no_mode_other_than_the_exact_string_full_allows_every_guarded_tool_without_sandbox(
    mode: object, tool: str, sandbox: bool
) -> None:
    verdict = decide(mode, tool, False)
    if classify_tool(tool) == "guarded" and mode != "full":
        assert verdict != "allow"
    assert decide(mode, tool, sandbox) in ("allow", "deny", "ask")


# --- outcome_allows: a whitelist ---------------------------------------------------------


@pytest.mark.parametrize("decision", ["approve", "approved"])
def test_an_explicit_approval_allows_the_tool(decision: str) -> None:
    assert outcome_allows(decision) is True


@pytest.mark.parametrize(
    "decision",
    [
        "deny",
        "denied",
        "",
        None,
        "APPROVE",
        "Approve",
        "APPROVED",
        "approve ",
        " approve",
        "approve\n",
        "approves",
        "approval",
        "expired",
        "cancelled",
        "timeout",
        "shutdown",
        "yes",
        "allow",
        True,
        1,
        b"approve",
        ["approve"],
        {"decision": "approve"},
        object(),
    ],
)
def test_anything_but_an_explicit_approval_leaves_the_tool_refused(decision: object) -> None:
    assert outcome_allows(decision) is False


@given(st.text())
def test_no_other_string_is_an_approval(text: str) -> None:
    assert outcome_allows(text) is (text in ("approve", "approved"))
