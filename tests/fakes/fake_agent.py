"""A small headless agent CLI that follows the bridge's command-runner protocol
(docs/bridge.md, "Any headless agent (`--runner command -- CMD ARGS...`)")
— the stand-in for DSH, homeagent or an in-house script.

It reads the prompt on stdin and acts on directive lines found in it (the
mail body is part of the prompt):

- ``!bash CMD``   ask ``agentmail hook generic`` for a Bash call; run CMD only when allowed
- ``!mail ADDR TEXT`` send mail itself (through the client), so the bridge must not relay
- ``!reply TEXT`` send TEXT itself to the reply address the prompt gives
- ``!sleep S``    work for S seconds
- ``!hang``       hang (with a child process in its group) until killed
- ``!hang-once``  hang, unless this is a redelivery after an interruption
- ``!error MSG``  report ``{"type":"error"}`` and exit 1
- ``!exit N MSG`` write MSG to stderr and exit N
- ``!plain``      answer in plain text instead of JSON lines
- ``!write PATH`` append to PATH itself, without asking (a tool that does not ask:
  only the sandbox stands in its way); says ``wrote PATH`` or ``write PATH: ERRNO``
- ``!connect PORT`` open a TCP connection to 127.0.0.1:PORT; ``connect PORT: ok|ERRNO``

Every run appends ``start`` and ``end`` records to ``$FAKE_AGENT_LOG`` (JSON
lines, one ``write`` each) and keeps a per-session history in
``$FAKE_AGENT_STATE`` so a test can see that a turn resumed its session.
"""

from __future__ import annotations

import errno
import json
import os
import socket
import subprocess
import sys
import time
import uuid
from pathlib import Path
from typing import Any


def log(record: dict[str, Any]) -> None:
    path = os.environ.get("FAKE_AGENT_LOG")
    if not path:
        return
    record = {**record, "t": time.time(), "pid": os.getpid()}
    data = (json.dumps(record) + "\n").encode()
    fd = os.open(path, os.O_WRONLY | os.O_APPEND | os.O_CREAT, 0o600)
    try:
        os.write(fd, data)
    finally:
        os.close(fd)


def ask(command: str, tool_use_id: str) -> tuple[bool, str]:
    payload = {"tool_name": "Bash", "tool_input": {"command": command}, "tool_use_id": tool_use_id}
    done = subprocess.run(
        [sys.executable, "-m", "mailui4agents.cli.main", "hook", "generic"],
        input=json.dumps(payload).encode(),
        capture_output=True,
        check=False,
    )
    answer = json.loads(done.stdout or b"{}")
    allowed = done.returncode == 0 and answer.get("decision") == "allow"
    return allowed, str(answer.get("reason", ""))


def send_mail(address: str, text: str) -> None:
    import anyio

    from mailui4agents.client import AsyncClient, ClientConfig

    async def go() -> None:
        async with AsyncClient(ClientConfig.load()) as client:
            await client.send_mail(
                [address], "from the agent", text,
                from_session_id=os.environ["AGENTMAIL_SESSION_ID"],
            )  # fmt: skip

    anyio.run(go)


def main() -> int:
    prompt = sys.stdin.read()
    mail_id = os.environ.get("AGENTMAIL_MAIL_ID", "")
    session = os.environ.get("AGENTMAIL_PLATFORM_SESSION_ID") or f"fake-{uuid.uuid4()}"
    redelivered = prompt.startswith("REDELIVERED")
    state = Path(os.environ.get("FAKE_AGENT_STATE") or ".")
    history = state / f"{session}.txt"
    earlier = history.read_text().split() if history.exists() else []
    log(
        {
            "event": "start",
            "mail_id": mail_id,
            "session_id": os.environ.get("AGENTMAIL_SESSION_ID"),
            "platform_session_id": os.environ.get("AGENTMAIL_PLATFORM_SESSION_ID", ""),
            "mode": os.environ.get("AGENTMAIL_PERMISSION_MODE"),
            "cwd": os.getcwd(),
            "pwd": os.environ.get("PWD"),
            "headline": prompt.splitlines()[0] if prompt else "",
            "prompt": prompt,
            "earlier": earlier,
        }
    )
    plain = "!plain" in prompt.splitlines()
    out: list[str] = []
    if not plain:
        print(json.dumps({"type": "session", "id": session}), flush=True)
    for n, line in enumerate(prompt.splitlines()):
        word, _, rest = line.partition(" ")
        if word == "!bash":
            allowed, reason = ask(rest, f"call-{mail_id}-{n}")
            if allowed:
                subprocess.run(rest, shell=True, check=False)
                out.append(f"ran [{rest}] ({reason})")
            else:
                out.append(f"denied [{rest}]: {reason}")
        elif word == "!mail":
            address, _, text = rest.partition(" ")
            send_mail(address, text)
            out.append(f"mailed {address}")
        elif word == "!reply":
            marker = "Reply address (use exactly this"
            line_ = next(x for x in prompt.splitlines() if x.startswith(marker))
            send_mail(line_.rsplit(": ", 1)[1], rest)
            out.append("replied by itself")
        elif word == "!write":
            try:
                fd = os.open(rest, os.O_WRONLY | os.O_APPEND | os.O_CREAT, 0o600)
                os.write(fd, b"written by the agent\n")
                os.close(fd)
                out.append(f"wrote {rest}")
            except OSError as exc:
                out.append(f"write {rest}: {errno.errorcode.get(exc.errno or 0, exc.errno)}")
        elif word == "!connect":
            try:
                with socket.create_connection(("127.0.0.1", int(rest)), timeout=10):
                    out.append(f"connect {rest}: ok")
            except OSError as exc:
                out.append(f"connect {rest}: {errno.errorcode.get(exc.errno or 0, exc.errno)}")
        elif word == "!sleep":
            time.sleep(float(rest))
        elif word == "!hang" or (word == "!hang-once" and not redelivered):
            child = subprocess.Popen(["sleep", "1000"])
            log({"event": "hang", "mail_id": mail_id, "child": child.pid})
            child.wait()
        elif word == "!error":
            print(json.dumps({"type": "error", "message": rest}), flush=True)
            log({"event": "end", "mail_id": mail_id, "error": rest})
            return 1
        elif word == "!exit":
            code, _, message = rest.partition(" ")
            sys.stderr.write(message + "\n")
            log({"event": "end", "mail_id": mail_id, "exit": int(code)})
            return int(code)
    state.mkdir(parents=True, exist_ok=True)
    with history.open("a") as f:
        f.write(mail_id + "\n")
    answer = f"DONE mail={mail_id} earlier={len(earlier)} " + "; ".join(out)
    if plain:
        print(answer)
    else:
        print(json.dumps({"type": "text", "text": answer}), flush=True)
    log({"event": "end", "mail_id": mail_id})
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
