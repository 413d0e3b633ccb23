"""Failure classification and wording; the runners' stream parsers."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from mailui4agents.bridge.failures import Failure, classify, failure_body, failure_subject
from mailui4agents.bridge.runners.base import (
    Denied,
    FinalText,
    MailSent,
    SessionStarted,
    Text,
    TurnError,
)
from mailui4agents.bridge.runners.claude_code import ClaudeParser
from mailui4agents.bridge.runners.command import CommandParser, CommandRunner


@pytest.mark.parametrize(
    ("detail", "kind"),
    [
        ("API error 401: Invalid API key · Fix external API key", "auth"),
        ("Not logged in · Please run /login", "auth"),
        ("API Error: Request rejected (429) · Your credit balance is too low", "quota"),
        ("402 Payment Required", "quota"),
        ("You exceeded your current quota", "quota"),
        ("model claude-x not found", "no_model"),
        ("No model configured", "no_model"),
        ("segfault", "error"),
    ],
)
def test_failures_are_classified_from_what_the_cli_said(detail: str, kind: str) -> None:
    assert classify(detail).kind == kind


def test_an_unclear_failure_of_a_resumed_session_says_the_resume_failed() -> None:
    assert classify("No conversation found with session ID: x", resumed=True).kind == (
        "resume_failed"
    )
    assert classify("No conversation found with session ID: x").kind == "error"
    assert classify("401 invalid x-api-key", resumed=True).kind == "auth"


@pytest.mark.parametrize(
    ("kind", "words"),
    [
        ("cli_missing", "not installed"),
        ("auth", "not logged in"),
        ("quota", "credit or quota"),
        ("no_model", "no usable model"),
        ("timeout", "timed out"),
        ("resume_failed", "Start a new session"),
        ("workspace_missing", "workspace does not exist"),
        ("workspace_not_allowed", "outside the folders the bridge lets this agent work in"),
        ("gave_up", "gave up"),
    ],
)
def test_every_failure_mail_says_what_happened_and_what_to_do(kind: str, words: str) -> None:
    body = failure_body(Failure(kind, "details here"), agent="claude", subject="Fix it")  # type: ignore[arg-type]
    assert words in body and "What to do:" in body and "details here" in body
    assert failure_subject(kind, "Fix it").endswith("Fix it")  # type: ignore[arg-type]
    assert ("timed out" in failure_subject(kind, "x")) is (kind == "timeout")  # type: ignore[arg-type]


def test_permanent_failures_are_not_retried_and_unclear_ones_are() -> None:
    assert Failure("auth", "").permanent and Failure("timeout", "").permanent
    assert not Failure("error", "").permanent


def test_the_command_parser_reads_json_lines() -> None:
    parser = CommandParser()
    lines = [
        "",
        json.dumps({"type": "session", "id": "p1"}),
        "not json between lines",
        json.dumps({"type": "text", "text": "hello"}),
        json.dumps({"type": "other"}),
        json.dumps({"type": "error", "message": "quota"}),
    ]
    events = [e for line in lines for e in parser.feed(line)] + parser.finish()
    assert events == [SessionStarted("p1"), Text("hello"), TurnError("quota")]


def test_the_command_parser_takes_plain_text_whole() -> None:
    parser = CommandParser()
    for line in ["", "The answer:", '{"no": "type key"}', "done"]:
        assert parser.feed(line) == []
    assert parser.finish() == [FinalText('The answer:\n{"no": "type key"}\ndone')]


def test_the_command_runner_refuses_unknown_options_and_a_missing_program() -> None:
    with pytest.raises(ValueError, match="unknown --runner-arg"):
        CommandRunner(["true"], {"modle": "x"})
    with pytest.raises(ValueError, match="needs the program"):
        CommandRunner([], {})
    assert CommandRunner(["/no/such/agent"]).missing() is not None
    assert CommandRunner(["sh"]).missing() is None
    assert CommandRunner(["sh"]).enforcement("workspace") == "advisory"
    assert CommandRunner(["sh"], {"enforcement": "PARTIAL"}).enforcement("plan") == "advisory"


def _claude(*records: dict[str, object]) -> list[object]:
    parser = ClaudeParser()
    return [e for r in records for e in parser.feed(json.dumps(r))]


def test_the_claude_parser_reads_session_answer_denials_and_mail_sends() -> None:
    sid = "723f2279-2b0c-4023-a146-3aa505f748d2"
    events = _claude(
        {"type": "system", "subtype": "init", "session_id": sid},
        {"type": "assistant", "session_id": sid, "message": {"content": [
            {"type": "tool_use", "id": "t1", "name": "mcp__agentmail__send_mail", "input": {}},
            {"type": "tool_use", "id": "t2", "name": "mcp__agentmail__read_inbox", "input": {}},
            {"type": "tool_use", "id": "t3", "name": "mcp__agentmail__forward_mail", "input": {}},
        ]}},
        {"type": "user", "session_id": sid, "message": {"content": [
            {"type": "tool_result", "tool_use_id": "t1", "content": "sent", "is_error": False},
            {"type": "tool_result", "tool_use_id": "t2", "content": "ok", "is_error": False},
            {"type": "tool_result", "tool_use_id": "t3", "content": "no", "is_error": True},
        ]}},
        {"type": "result", "subtype": "success", "is_error": False, "result": "DONE",
         "session_id": sid, "permission_denials": [{"tool_name": "Bash", "tool_use_id": "x"}]},
    )  # fmt: skip
    assert events == [
        SessionStarted(sid),
        MailSent("mcp__agentmail__send_mail"),
        Denied("Bash", "denied"),
        FinalText("DONE"),
    ]


def test_the_claude_parser_turns_an_api_error_result_into_a_turn_error() -> None:
    events = _claude(
        {"type": "result", "subtype": "success", "is_error": True, "api_error_status": 429,
         "result": "API Error: Request rejected (429) · Your credit balance is too low",
         "session_id": "s"},
    )  # fmt: skip
    last = events[-1]
    assert last == TurnError(
        "API error 429: API Error: Request rejected (429) · Your credit balance is too low"
    )
    assert isinstance(last, TurnError) and classify(last.message).kind == "quota"
    assert _claude({"type": "result", "subtype": "error_during_execution", "is_error": True})[
        -1
    ] == TurnError("error_during_execution")


def test_claude_code_sessions_are_read_from_its_session_store(tmp_path: Path) -> None:
    from mailui4agents.bridge.runners.claude_code import ClaudeCodeRunner

    project = tmp_path / ".claude" / "projects" / "-srv-shop"
    project.mkdir(parents=True)
    sid = "723f2279-2b0c-4023-a146-3aa505f748d2"
    (project / f"{sid}.jsonl").write_text(
        json.dumps({"type": "system", "cwd": "/srv/shop", "sessionId": sid}) + "\n"
        + json.dumps({"type": "user", "cwd": "/srv/shop",
                      "message": {"role": "user", "content": "Fix the login bug, please"}})
        + "\n"
    )  # fmt: skip
    (project / "no-cwd.jsonl").write_text('{"type":"user"}\n')
    (project / "broken.jsonl").write_bytes(b"\xff\xfe not json\n")
    runner = ClaudeCodeRunner({"home": str(tmp_path), "bin": "/no/claude"})
    assert runner.recent_sessions([]) == [
        {
            "platform_id": sid,
            "slug": "fix-the-login-bug-please",
            "title": "Fix the login bug, please",
            "cwd": "/srv/shop",
            "updated_at": runner.recent_sessions([])[0]["updated_at"],
        }
    ]
    assert ClaudeCodeRunner({"home": str(tmp_path / "nobody")}).recent_sessions([]) == []
    assert runner.missing() is not None and runner.version() is None
    with pytest.raises(ValueError, match="unknown --runner-arg"):
        ClaudeCodeRunner({"mdoel": "x"})


@pytest.mark.parametrize(
    ("mode", "flag"), [("plan", "plan"), ("workspace", "default"), ("full", "default")]
)
@pytest.mark.parametrize("resume", [None, "723f2279-2b0c-4023-a146-3aa505f748d2"])
def test_the_claude_command_line_passes_mode_hook_and_mail_tools_on_every_turn(
    tmp_path: Path, mode: str, flag: str, resume: str | None
) -> None:
    from mailui4agents.bridge.runners.base import TurnContext
    from mailui4agents.bridge.runners.claude_code import ClaudeCodeRunner

    env = {"AGENTMAIL_URL": "http://gw", "AGENTMAIL_KEY": "am_agent_k", "AGENTMAIL_AGENT": "c",
           "AGENTMAIL_SESSION_ID": "s1", "PATH": "/bin"}  # fmt: skip
    ctx = TurnContext(
        agent="c", mail_id="m1", session_id="s1", mode=mode, workspace=tmp_path,  # type: ignore[arg-type]
        platform_session_id=resume, prompt="do it", base_env=env, turn_dir=tmp_path,
        hook_timeout_s=540,
    )  # fmt: skip
    launch = ClaudeCodeRunner({"bin": "/opt/claude", "model": "m-1"}).launch(ctx)
    argv = launch.argv
    assert argv[:2] == ["/opt/claude", "-p"] and launch.stdin == b"do it"
    assert argv[argv.index("--permission-mode") + 1] == flag
    assert argv[argv.index("--output-format") + 1] == "stream-json" and "--verbose" in argv
    assert argv[argv.index("--model") + 1] == "m-1"
    assert (argv[argv.index("--resume") + 1] if "--resume" in argv else None) == resume
    settings = json.loads(Path(argv[argv.index("--settings") + 1]).read_text())
    [hook] = settings["hooks"]["PreToolUse"][0]["hooks"]
    assert hook["command"].endswith("mailui4agents.cli.main hook claude-code")
    assert hook["timeout"] == 600
    mcp = json.loads(Path(argv[argv.index("--mcp-config") + 1]).read_text())
    server = mcp["mcpServers"]["agentmail"]
    assert server["args"][-1] == "mcp" and server["env"]["AGENTMAIL_SESSION_ID"] == "s1"
    assert "PATH" not in server["env"]
    assert (tmp_path / "mcp.json").stat().st_mode & 0o077 == 0  # it holds the key
