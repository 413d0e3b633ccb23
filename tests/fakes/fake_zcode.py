#!/usr/bin/env python3
"""A fake ``zcode`` that follows ZCode's documented contract (docs/platforms.md, "ZCode").

``zcode -p PROMPT --mode plan|edit|yolo [--resume ID] [--model M]``:

- sessions are ``$HOME/.zcode/cli/sessions/<id>.json`` (``sess_…``); an unknown
  ``--resume`` id exits 1 with "session not found";
- the model is the scripted Chat Completions server at ``$FAKE_ZCODE_MODEL_URL``
  (non-streaming), offered one tool, ``Bash {command}``; a 401 exits 1 quoting it;
- before each Bash call: in ``plan`` mode the call is refused (read-only, no hook);
  otherwise every ``hooks.events.PreToolUse`` handler of
  ``$HOME/.zcode/cli/config.json`` whose matcher fits runs with the contract's
  stdin ``{hook_event_name, tool_name, tool_input, session_id, permission_mode,
  cwd}`` and env ``ZCODE_SESSION_ID``/``ZCODE_PLUGIN_ROOT``/``ZCODE_PLUGIN_DATA``.
  Output is checked strictly: exactly ``{"decision":"approve"}`` runs the tool,
  exactly ``{"decision":"block","reason":str}`` or exit 2 blocks it (the reason
  is the tool result), empty output is "no opinion" (``yolo`` runs, ``edit``
  refuses: no one at a prompt), any other output or exit is a hook failure (blocks);
- at the end one JSON object: ``{"sessionId", "response", "usage"}``.
"""

from __future__ import annotations

import argparse
import json
import os
import re
import secrets
import subprocess
import sys
import urllib.error
import urllib.request
from pathlib import Path
from typing import Any

TOOL = {"type": "function", "function": {"name": "Bash", "description": "run a command",
        "parameters": {"type": "object", "properties": {"command": {"type": "string"}},
                       "required": ["command"]}}}  # fmt: skip


def hooks(home: Path, tool: str) -> list[dict[str, Any]]:
    try:
        config = json.loads((home / ".zcode" / "cli" / "config.json").read_text())
    except (OSError, ValueError):
        return []
    found = []
    for group in ((config.get("hooks") or {}).get("events") or {}).get("PreToolUse") or []:
        matcher = group.get("matcher") or "*"
        if matcher == "*" or re.fullmatch(matcher, tool):
            found += [h for h in group.get("hooks") or [] if h.get("type") == "command"]
    return found


def gate(home: Path, session: dict[str, Any], mode: str, command: str) -> tuple[bool, str]:
    """(run it?, the reason the model is told when not)."""
    if mode == "plan":
        return False, "plan mode is read-only: Bash is not available"
    opinion = None
    for handler in hooks(home, "Bash"):
        stdin = {"hook_event_name": "PreToolUse", "tool_name": "Bash",
                 "tool_input": {"command": command}, "session_id": session["id"],
                 "permission_mode": mode, "cwd": os.getcwd()}  # fmt: skip
        env = {
            **os.environ,
            "ZCODE_SESSION_ID": session["id"],
            "ZCODE_PLUGIN_ROOT": str(home / ".zcode"),
            "ZCODE_PLUGIN_DATA": str(home),
        }
        try:
            done = subprocess.run(handler["command"], shell=True, input=json.dumps(stdin),
                                  capture_output=True, text=True, env=env,
                                  timeout=float(handler.get("timeout") or 60))  # fmt: skip
        except subprocess.TimeoutExpired:
            return False, "hook failure: timed out"
        if done.returncode == 2:
            return False, done.stderr.strip() or "blocked by a hook"
        if done.returncode != 0:
            return False, f"hook failure: exit {done.returncode}"
        out = done.stdout.strip()
        if not out:
            continue
        try:
            answer = json.loads(out)
        except ValueError:
            return False, "hook failure: output is not JSON"
        if answer == {"decision": "approve"}:
            opinion = "approve"
        elif (set(answer) == {"decision", "reason"} and answer["decision"] == "block"
              and isinstance(answer["reason"], str)):  # fmt: skip
            return False, answer["reason"]
        else:
            return False, f"hook failure: output fails the schema: {out[:200]}"
    if opinion == "approve" or mode == "yolo":
        return True, ""
    return False, "no hook decided and nobody is at the prompt: not run"


def chat(url: str, messages: list[dict[str, Any]], model: str) -> dict[str, Any]:
    body = json.dumps({"model": model, "messages": messages, "tools": [TOOL]}).encode()
    request = urllib.request.Request(f"{url}/chat/completions", data=body, headers={
        "Content-Type": "application/json", "Authorization": "Bearer dummy"})  # fmt: skip
    try:
        with urllib.request.urlopen(request, timeout=60) as response:
            return dict(json.load(response)["choices"][0]["message"])
    except urllib.error.HTTPError as exc:
        sys.stderr.write(f"model request failed: {exc.code} {exc.read().decode()[:300]}\n")
        raise SystemExit(1) from None


def main() -> int:
    parser = argparse.ArgumentParser(prog="zcode")
    parser.add_argument("-p", dest="prompt")
    parser.add_argument("--mode", choices=["plan", "edit", "yolo"], default="edit")
    parser.add_argument("--resume")
    parser.add_argument("--model", default="glm-fake")
    parser.add_argument("--version", action="store_true")
    args = parser.parse_args()
    if args.version:
        print("zcode 0.0.0-fake")
        return 0
    if args.prompt is None:
        sys.stderr.write("interactive mode is not faked\n")
        return 2
    home = Path(os.environ["HOME"])
    store = home / ".zcode" / "cli" / "sessions"
    store.mkdir(parents=True, exist_ok=True)
    if args.resume:
        path = store / f"{args.resume}.json"
        if not path.exists():
            sys.stderr.write(f"session not found: {args.resume}\n")
            return 1
        session = json.loads(path.read_text())
    else:
        session = {"id": f"sess_{secrets.token_hex(8)}", "cwd": os.getcwd(), "messages": []}
        path = store / f"{session['id']}.json"
    session.setdefault("modes", []).append(args.mode)  # for tests: which --mode each turn had
    messages: list[dict[str, Any]] = session["messages"]
    messages.append({"role": "user", "content": args.prompt})
    url = os.environ["FAKE_ZCODE_MODEL_URL"]
    answer = ""
    for _ in range(5):
        message = chat(url, messages, args.model)
        messages.append(message)
        calls = message.get("tool_calls") or []
        if not calls:
            answer = message.get("content") or ""
            break
        for call in calls:
            command = json.loads(call["function"]["arguments"]).get("command", "")
            run, reason = gate(home, session, args.mode, command)
            if run:
                done = subprocess.run(command, shell=True, capture_output=True, text=True)
                result = (done.stdout + done.stderr) or "(no output)"
            else:
                result = reason
            messages.append({"role": "tool", "tool_call_id": call["id"], "content": result})
    path.write_text(json.dumps(session))
    print("starting zcode (fake)")  # a line before the object, as the real one may print
    print(json.dumps({"sessionId": session["id"], "response": answer,
                      "usage": {"input_tokens": 10, "output_tokens": 5}}))  # fmt: skip
    return 0


if __name__ == "__main__":
    sys.exit(main())
