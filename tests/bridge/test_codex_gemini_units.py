"""The Codex and Gemini runners without their CLIs: stream parsing, the command
line per mode, the session stores, the fail-closed guards. The real CLIs are
driven in test_codex_e2e.py and test_gemini_e2e.py."""

from __future__ import annotations

import json
import os
import shutil
import tomllib
import uuid
from collections.abc import Iterator
from pathlib import Path

import pytest

from mailui4agents.bridge.runners import make_runner
from mailui4agents.bridge.runners.base import (
    Denied,
    FinalText,
    MailSent,
    SessionStarted,
    TurnContext,
    TurnError,
)
from mailui4agents.bridge.runners.codex import (
    CodexParser,
    CodexRunner,
    rollout_info,
    toml_value,
    turn_denials,
)
from mailui4agents.bridge.runners.gemini import (
    GeminiParser,
    GeminiRunner,
    chat_info,
    insecure_parent,
)
from mailui4agents.domain.modes import Mode

THREAD = "01a23148-90dc-77a2-9319-acd2084a09f7"


@pytest.fixture
def safe_dir() -> Iterator[Path]:
    """A folder no other user may write to, up to the root (/tmp is not one)."""
    from tests.bridge.agent_clis import REPO

    path = REPO / ".cache" / "test-state" / f"units-{uuid.uuid4().hex[:8]}"
    path.mkdir(parents=True)
    try:
        yield path
    finally:
        shutil.rmtree(path, ignore_errors=True)


def ctx(tmp_path: Path, mode: Mode, platform_id: str | None = None) -> TurnContext:
    turn = tmp_path / "state" / "turns" / "t1"
    turn.mkdir(parents=True, exist_ok=True)
    os.chmod(tmp_path, 0o755)
    return TurnContext(
        agent="a",
        mail_id="m",
        session_id="s",
        mode=mode,
        workspace=tmp_path,
        platform_session_id=platform_id,
        prompt="hello",
        turn_dir=turn,
        hook_timeout_s=100,
        base_env={
            "AGENTMAIL_URL": "http://x",
            "AGENTMAIL_KEY": "am_agent_k",
            "AGENTMAIL_SESSION_ID": "s",
            "GEMINI_API_KEY": "dummy",
        },
    )


# -- Codex -----------------------------------------------------------------------------------


def test_codex_stream_session_final_text_and_what_is_not_fatal(tmp_path: Path) -> None:
    p = CodexParser(tmp_path)
    lines = [
        {"type": "thread.started", "thread_id": THREAD},
        {
            "type": "item.completed",
            "item": {
                "id": "i0",
                "type": "error",
                "message": "Model metadata for `fake-model` not found. Defaulting to fallback",
            },
        },
        {
            "type": "item.completed",
            "item": {
                "id": "i1",
                "type": "error",
                "message": "`--dangerously-bypass-hook-trust` is enabled.",
            },
        },
        {
            "type": "item.completed",
            "item": {
                "type": "mcp_tool_call",
                "server": "agentmail",
                "tool": "send_mail",
                "status": "completed",
            },
        },
        {"type": "item.completed", "item": {"type": "agent_message", "text": "DONE"}},
        {"type": "turn.completed", "usage": {}},
    ]
    events = [e for line in lines for e in p.feed(json.dumps(line))]
    assert events == [SessionStarted(THREAD), MailSent("send_mail"), FinalText("DONE")]
    assert p.finish() == []  # no rollout: nothing denied
    warning = {"type": "error", "message": "Model metadata for `fake-model` not found."}
    assert p.feed(json.dumps(warning)) == []  # a warning even as a top-level error


@pytest.mark.parametrize(
    "line",
    [
        {"type": "turn.failed", "error": {"message": "unexpected status 401 Unauthorized"}},
        {"type": "error", "message": "stream disconnected: 401"},
    ],
)
def test_codex_turn_failures_are_errors(tmp_path: Path, line: dict[str, object]) -> None:
    [event] = CodexParser(tmp_path).feed(json.dumps(line))
    assert isinstance(event, TurnError) and "401" in event.message


def write_rollout(home: Path, turns: list[list[dict[str, object]]]) -> Path:
    path = home / "sessions" / "2026" / "12" / "01" / f"rollout-2026-12-01T11-06-09-{THREAD}.jsonl"
    path.parent.mkdir(parents=True)
    lines = [{"type": "session_meta", "payload": {"id": THREAD, "cwd": "/w"}}]
    for n, items in enumerate(turns):
        lines.append({"type": "event_msg", "payload": {"type": "task_started", "turn_id": f"t{n}"}})
        lines.append(
            {
                "type": "response_item",
                "payload": {
                    "type": "message",
                    "role": "user",
                    "content": [{"type": "input_text", "text": "<environment_context>"}],
                },
            }
        )
        lines.append(
            {
                "type": "response_item",
                "payload": {
                    "type": "message",
                    "role": "user",
                    "content": [{"type": "input_text", "text": f"task {n}"}],
                },
            }
        )
        lines += [{"type": "response_item", "payload": item} for item in items]
    path.write_text("".join(json.dumps(x) + "\n" for x in lines))
    return path


def blocked(call: str, note: str) -> list[dict[str, object]]:
    return [
        {"type": "function_call", "name": "exec_command", "call_id": call, "arguments": "{}"},
        {
            "type": "function_call_output",
            "call_id": call,
            "output": f"Command blocked by PreToolUse hook: {note}. Command: echo hi",
        },
    ]


def test_codex_denials_come_from_the_last_turn_of_the_rollout(tmp_path: Path) -> None:
    ran: list[dict[str, object]] = [
        {"type": "function_call_output", "call_id": "c9", "output": "Process exited with 0"}
    ]
    write_rollout(tmp_path, [blocked("c1", "old turn"), blocked("c2", "use staging") + ran])
    assert turn_denials(tmp_path, THREAD) == [("exec_command", "use staging. Command: echo hi")]
    p = CodexParser(tmp_path)
    p.feed(json.dumps({"type": "thread.started", "thread_id": THREAD}))
    [denied] = p.finish()
    assert isinstance(denied, Denied) and "use staging" in denied.reason
    info = rollout_info(
        tmp_path / "sessions" / "2026" / "12" / "01" / f"rollout-2026-12-01T11-06-09-{THREAD}.jsonl"
    )
    assert info is not None and info["platform_id"] == THREAD and info["title"] == "task 0"
    assert info["cwd"] == "/w"


@pytest.mark.parametrize(
    ("mode", "sandbox"),
    [("plan", "read-only"), ("workspace", "workspace-write"), ("full", "danger-full-access")],
)
def test_codex_passes_the_sandbox_and_the_hook_on_every_turn(
    tmp_path: Path, mode: Mode, sandbox: str
) -> None:
    runner = CodexRunner({"bin": "codex", "config": str(tmp_path / "none.toml")})
    for platform_id in (None, THREAD):
        launch = runner.launch(ctx(tmp_path, mode, platform_id))
        values = [launch.argv[i + 1] for i, a in enumerate(launch.argv) if a == "-c"]
        parsed = {
            k: tomllib.loads(f"v = {v}")["v"] for k, _, v in (c.partition("=") for c in values)
        }
        assert parsed["sandbox_mode"] == sandbox
        [group] = parsed["hooks.PreToolUse"]
        [handler] = group["hooks"]
        assert "hook codex || {" in handler["command"] and handler["timeout"] == 160
        assert "--dangerously-bypass-hook-trust" in launch.argv and launch.argv[-1] == "-"
        assert ("resume" in launch.argv) == (platform_id is not None)
        if platform_id:
            assert launch.argv[launch.argv.index("resume") + 1] == THREAD
        assert launch.env["CODEX_HOME"] == str(tmp_path / "state" / "codex-home")
        assert launch.stdin == b"hello"


def test_codex_home_copies_the_config_and_links_the_login(tmp_path: Path) -> None:
    source = tmp_path / "mine"
    source.mkdir()
    (source / "config.toml").write_text('model = "gpt-x"\n')
    (source / "auth.json").write_text("{}")
    runner = CodexRunner({"home": "", "config": str(source / "config.toml")})
    runner.source_home = source
    (tmp_path / "state").mkdir()
    home = runner.codex_home(tmp_path / "state")
    assert (home / "config.toml").read_text() == 'model = "gpt-x"\n'
    assert (home / "auth.json").resolve() == (source / "auth.json").resolve()
    assert oct(home.stat().st_mode & 0o777) == "0o700"
    shared = CodexRunner({"home": str(source)})
    assert shared.codex_home(tmp_path / "state") == source  # a shared home is used as it is


def test_toml_values_round_trip() -> None:
    value = [{"matcher": "*", "hooks": [{"command": "a 'b' \"c\"", "timeout": 3, "x": True}]}]
    assert tomllib.loads(f"v = {toml_value(value)}")["v"] == value


# -- Gemini ----------------------------------------------------------------------------------


def test_gemini_stream_session_text_denial_and_mail() -> None:
    p = GeminiParser()
    lines = [
        {"type": "init", "session_id": "dfcd40d1-1809-470e-af7c-419d95ba986d", "model": "m"},
        {"type": "message", "role": "user", "content": "create"},
        {"type": "tool_use", "tool_name": "run_shell_command", "tool_id": "t1", "parameters": {}},
        {
            "type": "tool_result",
            "tool_id": "t1",
            "status": "error",
            "output": "Tool execution blocked: use staging",
            "error": {"type": "policy_violation", "message": "Tool execution blocked: use staging"},
        },
        {"type": "tool_use", "tool_name": "mcp_agentmail_send_mail", "tool_id": "t2"},
        {"type": "tool_result", "tool_id": "t2", "status": "success", "output": "sent"},
        {"type": "message", "role": "assistant", "content": "DO", "delta": True},
        {"type": "message", "role": "assistant", "content": "NE", "delta": True},
        {"type": "result", "status": "success", "stats": {}},
    ]
    events = [e for line in lines for e in p.feed(json.dumps(line))]
    assert events[0] == SessionStarted("dfcd40d1-1809-470e-af7c-419d95ba986d")
    assert Denied("run_shell_command", "Tool execution blocked: use staging") in events
    assert MailSent("mcp_agentmail_send_mail") in events
    assert events[-1] == FinalText("DONE")  # deltas are joined, not put on lines


def test_gemini_a_failed_result_is_an_error() -> None:
    line = {
        "type": "result",
        "status": "error",
        "error": {"type": "Error", "message": "[API Error: 401 API key not valid]"},
    }
    [event] = GeminiParser().feed(json.dumps(line))
    assert isinstance(event, TurnError) and "401" in event.message


@pytest.mark.parametrize(
    ("mode", "approval"), [("plan", "plan"), ("workspace", "default"), ("full", "default")]
)
def test_gemini_mode_flag_policy_and_settings(safe_dir: Path, mode: Mode, approval: str) -> None:
    runner = GeminiRunner({"bin": "gemini", "model": "gemini-fake"})
    launch = runner.launch(ctx(safe_dir, mode, "uuid-1"))
    argv = launch.argv
    assert argv[argv.index("--approval-mode") + 1] == approval
    assert ("--policy" in argv) == (mode != "plan")
    assert (
        argv[argv.index("--resume") + 1] == "uuid-1" and argv[argv.index("-m") + 1] == "gemini-fake"
    )
    settings = json.loads(Path(launch.env["GEMINI_CLI_SYSTEM_SETTINGS_PATH"]).read_text())
    [handler] = settings["hooks"]["BeforeTool"][0]["hooks"]
    assert "hook gemini || {" in handler["command"] and handler["timeout"] == 160_000
    assert settings["security"]["auth"]["selectedType"] == "gemini-api-key"
    assert (
        oct(Path(launch.env["GEMINI_CLI_SYSTEM_SETTINGS_PATH"]).stat().st_mode & 0o777) == "0o600"
    )
    if mode != "plan":
        policy = tomllib.loads(Path(argv[argv.index("--policy") + 1]).read_text())
        shell = next(r for r in policy["rule"] if r["toolName"] == "run_shell_command")
        assert shell["allowRedirection"] is True and shell["decision"] == "allow"


def test_gemini_refuses_to_start_below_a_folder_others_may_write(tmp_path: Path) -> None:
    context = ctx(tmp_path, "workspace")
    os.chmod(tmp_path, 0o777)
    assert insecure_parent(context.turn_dir) == tmp_path
    launch = GeminiRunner({"bin": "gemini"}).launch(context)
    assert "gemini" not in launch.argv[0] and "approval hook would not run" in launch.argv[-1]
    os.chmod(tmp_path, 0o755)


def test_gemini_chat_files_for_the_heartbeat(tmp_path: Path) -> None:
    project = tmp_path / ".gemini" / "tmp" / "work"
    (project / "chats").mkdir(parents=True)
    (project / ".project_root").write_text("/w\n")
    chat = project / "chats" / "session-2026-12-01T11-06-160122df.jsonl"
    lines = [
        {"sessionId": "160122df-ace0-4d6a-a736-10d78d4f4086", "kind": "main"},
        {"$set": {"messages": [{"type": "user", "content": [{"text": "<session_context>"}]}]}},
        {"id": "x", "type": "user", "content": [{"text": "fix the login bug"}]},
    ]
    chat.write_text("".join(json.dumps(x) + "\n" for x in lines))
    info = chat_info(chat)
    assert info is not None and info["platform_id"] == "160122df-ace0-4d6a-a736-10d78d4f4086"
    assert info["title"] == "fix the login bug" and info["cwd"] == "/w"
    runner = GeminiRunner({"home": str(tmp_path)})
    assert [s["platform_id"] for s in runner.recent_sessions([])] == [info["platform_id"]]


def test_runner_args_are_checked() -> None:
    with pytest.raises(ValueError, match="accepted: bin=, model=, home=, config="):
        make_runner("codex", [], {"nope": "1"})
    with pytest.raises(ValueError, match="accepted: bin=, model=, home=, auth="):
        make_runner("gemini", [], {"nope": "1"})
    with pytest.raises(ValueError, match="no command after --"):
        make_runner("codex", ["x"], {})


def test_enforcement_is_claimed_only_where_it_was_checked() -> None:
    codex, gemini = CodexRunner({}), GeminiRunner({})
    assert [codex.enforcement(m) for m in ("plan", "workspace", "full")] == [
        "native", "partial", "native"]  # fmt: skip
    assert codex.mode_enforcement == "partial"  # what the heartbeat reports
    assert gemini.mode_enforcement == "native"
