"""Templates, safe Markdown, and static files with cache-busting names."""

from __future__ import annotations

import hashlib
import json
from datetime import UTC, datetime
from functools import cache
from pathlib import Path
from typing import Any, TypedDict

from jinja2 import Environment, FileSystemLoader, select_autoescape
from markupsafe import Markup

from mailui4agents.domain.grants import (
    EVERY,
    EXACT,
    FILE_TOOLS,
    PREFIX,
    SHELL_TOOLS,
    GrantRule,
    covers,
    covers_parts,
    new_grant,
)
from mailui4agents.domain.mail_types import MailType
from mailui4agents.domain.markdown import to_html
from mailui4agents.domain.times import rfc3339
from mailui4agents.web.shapes import RequestCard
from mailui4agents.wire.models import GrantOut

HERE = Path(__file__).parent
STATIC_DIR = HERE / "static"
TEMPLATE_DIR = HERE / "templates"


def markdown(text: str) -> Markup:
    """Untrusted Markdown as inert HTML (domain/markdown.py: the rules e-mail
    bodies are written with too)."""
    return Markup(to_html(text))


@cache
def _static_names() -> tuple[dict[str, str], dict[str, Path]]:
    """logical name -> public name ("app.js" -> "app.3f2a1b9c0d.js"), public name -> file."""
    public_of: dict[str, str] = {}
    files: dict[str, Path] = {}
    for f in sorted(STATIC_DIR.iterdir()):
        if f.is_file():
            digest = hashlib.sha256(f.read_bytes()).hexdigest()[:10]
            public = f"{f.stem}.{digest}{f.suffix}"
            public_of[f.name] = public
            files[public] = f
    return public_of, files


def static_url(name: str) -> str:
    return f"/static/{_static_names()[0][name]}"


def static_file(public: str) -> Path | None:
    """The file behind a hashed name; unhashed names are not served (no stale caches)."""
    return _static_names()[1].get(public)


def time_left(expires_at: str | None) -> str:
    if not expires_at:
        return "no expiry"
    left = int((datetime.fromisoformat(expires_at) - datetime.now(UTC)).total_seconds())
    if left <= 0:
        return "expired"
    if left < 60:
        return f"{left} s left"
    if left < 3600:
        return f"{left // 60} min left"
    return f"{left // 3600} h {left % 3600 // 60} min left"


def short_time(value: str | datetime | None) -> str:
    """A time as the pages show it, from the API's JSON (RFC 3339) or a model's."""
    if not value:
        return ""
    text = rfc3339(value) if isinstance(value, datetime) else value
    return datetime.fromisoformat(text).strftime("%Y-%m-%d %H:%M")


def size_text(n: int | None) -> str:
    """Bytes as a person reads them: "512 bytes", "3.4 MB", "12.0 GB"."""
    if n is None:
        return ""
    if n < 1000:
        return f"{n} bytes"
    value = float(n)
    for unit in ("kB", "MB", "GB", "TB"):
        value /= 1000
        if value < 1000 or unit == "TB":
            break
    return f"{value:.1f} {unit}"


def pretty_json(value: Any) -> str:
    return json.dumps(value, indent=2, ensure_ascii=False, sort_keys=True)


# A preview of file content or an edit on the card: the first lines; the whole
# input is one click away ("Whole input as JSON"), so nothing is hidden.
PREVIEW_LINES = 12
PREVIEW_CHARS = 2000
# Keys of a tool input whose meaning the card shows in words (the rest, if any,
# only in the collapsed JSON).
_PATH_KEYS = {"file_path": "File", "notebook_path": "Notebook", "path": "Path", "url": "URL"}
_SHOWN_KEYS = frozenset(
    {*_PATH_KEYS, "command", "description", "old_string", "new_string", "edits",
     "content", "new_source", "pattern", "prompt", "query"}
)  # fmt: skip


def _preview(lines: list[str]) -> tuple[str, int]:
    """The first PREVIEW_LINES lines (at most PREVIEW_CHARS), and how many were cut."""
    kept: list[str] = []
    size = 0
    for line in lines[:PREVIEW_LINES]:
        if size + len(line) > PREVIEW_CHARS:
            break
        kept.append(line)
        size += len(line) + 1
    return "\n".join(kept), len(lines) - len(kept)


def _diff_lines(edits: list[Any]) -> list[str]:
    lines: list[str] = []
    for edit in edits:
        if not isinstance(edit, dict):
            continue
        old, new = edit.get("old_string"), edit.get("new_string")
        if isinstance(old, str) and isinstance(new, str):
            if lines:
                lines.append("…")
            lines += [f"- {ln}" for ln in old.splitlines()]
            lines += [f"+ {ln}" for ln in new.splitlines()]
    return lines


class ToolView(TypedDict):
    """How a tool input is shown on a request's card (tool_view)."""

    kind: str
    path: str | None
    path_label: str
    note: str | None
    text: str
    more: int
    json: str | None


def tool_view(tool_input: object) -> ToolView:
    """How a (masked) tool input is shown, most readable first: a shell command as
    a code line; an edit as the file's path and a diff; written content as the
    path and its first lines; a path (or URL) alone; else JSON, collapsed.

    `kind` (command | diff | content | path | json) is the code block's class;
    `path`, `note` (a command's description, a search pattern) and `more` (lines
    left out of the preview) are shown with it; `json`, the whole input, is
    offered collapsed whenever the view leaves something out."""
    view: ToolView = {
        "kind": "json",
        "path": None,
        "path_label": "",
        "note": None,
        "text": "",
        "more": 0,
        "json": None,
    }
    if not isinstance(tool_input, dict):
        return {**view, "text": pretty_json(tool_input)}
    path_key = next((k for k in _PATH_KEYS if isinstance(tool_input.get(k), str)), None)
    path = tool_input[path_key] if path_key else None
    command, content = tool_input.get("command"), tool_input.get("content")
    if content is None:
        content = tool_input.get("new_source")
    edits = tool_input.get("edits")
    note = next(
        (
            v
            for k in ("description", "pattern", "query", "prompt")
            if isinstance(v := tool_input.get(k), str)
        ),
        None,
    )
    if isinstance(command, str):
        view.update({"kind": "command", "text": command})
    elif isinstance(tool_input.get("old_string"), str) and isinstance(
        tool_input.get("new_string"), str
    ):
        text, more = _preview(_diff_lines([tool_input]))
        view.update({"kind": "diff", "text": text, "more": more})
    elif isinstance(edits, list) and _diff_lines(edits):
        text, more = _preview(_diff_lines(edits))
        view.update({"kind": "diff", "text": text, "more": more})
    elif isinstance(content, str):
        text, more = _preview(content.splitlines())
        view.update({"kind": "content", "text": text, "more": more})
    elif path is not None:
        view["kind"] = "path"
    else:
        return {**view, "text": pretty_json(tool_input)}
    view.update({"path": path, "path_label": _PATH_KEYS.get(path_key or "", ""), "note": note})
    whole = view["more"] or any(k not in _SHOWN_KEYS for k in tool_input)
    view["json"] = pretty_json(tool_input) if whole else None
    return view


# A mail's type in words (docs/web.md): every template names types through
# type_word, never by the stored value (domain/mail_types.MailType).
TYPE_WORDS: dict[str, str] = {
    MailType.MESSAGE: "message",
    MailType.RELAY: "agent reply",
    MailType.PERMISSION_REQUEST: "approval request",
    "question": "question",  # a permission_request of kind "question"
    MailType.PERMISSION_DECISION: "decision",
    MailType.SYSTEM: "session notice",
    MailType.CALENDAR: "calendar entry",
    MailType.FAILURE: "failure report",
    MailType.WORK: "work",
}


def type_word(mail_type: str | None, kind: str | None = None) -> str:
    """`permission_request` carries questions too (docs/behaviour.md#mail-strict-input-inbox):
    with the request's `kind` "question" it is a question."""
    if mail_type == MailType.PERMISSION_REQUEST and kind == "question":
        return TYPE_WORDS["question"]
    value = mail_type or "message"
    return TYPE_WORDS.get(value, value.replace("_", " "))


# Where a decision came from (permissions.decided_channel, docs/remote.md):
# a paired device by its name, else the channel in words. Rules, grants and
# the system (expiry, cancelling) are named by `decided_by` instead.
CHANNEL_WORDS = {
    "web": "from the web",
    "push": "from a notification",
    "terminal": "from the terminal",
    "cli": "from the command line",
    "api": "through the API",
    "mcp": "through MCP",
    "email": "by e-mail",
}


def decided_via(p: RequestCard) -> str:
    via = p.get("decided_via") or {}
    channel = via.get("channel") or p.get("decided_channel")
    device = via.get("device") or p.get("decided_device")
    if device:
        return f"from {device}"
    return CHANNEL_WORDS.get(str(channel), "")


class RequestState(TypedDict):
    """A request's state on its card (request_state)."""

    css: str
    word: str
    line: str
    note: str | None
    answers: list[str] | None


def request_state(p: RequestCard) -> RequestState:
    """A request's state on its card: `word` (the card's heading: "Approved",
    "Denied", …; "" while pending), `line` ("Approved by ana from Ana's phone"),
    `note` and `answers` (shown after the line), `css` (a class)."""
    status = str(p.get("status") or "pending")
    word, line = _word_and_line(p, status)
    return {
        "css": status,
        "word": word,
        "line": line,
        "note": p.get("note"),
        "answers": p.get("answers"),
    }


def _word_and_line(p: RequestCard, status: str) -> tuple[str, str]:
    by = str(p.get("decided_by") or "")
    question = p.get("kind") == "question"
    if status == "pending":
        return "", "Waiting for a decision"
    if status == "expired":
        return "Timed out", "Timed out: nobody decided in time"
    if status == "cancelled" and decided_via(p) == CHANNEL_WORDS["terminal"]:
        # The agent's terminal answered its own dialog first (docs/remote.md).
        return "Answered in the terminal", "Answered in the terminal"
    if status == "cancelled":
        who = f" by {by}" if by and by != "system" else ""
        return "Cancelled", f"Cancelled{who}"
    if status == "approved":
        word = "Answered" if question else "Approved"
    elif status == "denied":
        word = "Declined" if question else "Denied"
    else:
        word = status.capitalize()
    if by.startswith("grant:"):
        return word, f"{word} by a standing grant (“Always allow”)"
    via = decided_via(p)
    line = f"{word} by {by}" if by else word
    return word, f"{line} {via}" if via else line


# Of a command or path in the "Always allow" button; the input is shown whole above it.
LABEL_CHARS = 80


def _clip(text: str) -> str:
    text = " ".join(text.split())
    return text if len(text) <= LABEL_CHARS else text[: LABEL_CHARS - 1] + "…"


def always_allow(p: RequestCard) -> dict[str, str]:
    """The words of a request's "Always allow" button (docs/behaviour.md#grants):
    `exact`, what a grant without a pattern covers (the button's own text);
    `every`, with the pattern `*`; `prefix` and `literal`, with another pattern
    (its place marked `{}`; `literal` for a shell pattern with control syntax,
    which matches only itself). static/app.js shows the one the pattern field calls for."""
    tool = str(p.get("tool_name") or "")
    tool_input = p.get("tool_input")
    rule = new_grant(tool, tool_input, None) if isinstance(tool_input, dict) else None
    every = f"Always allow {covers(GrantRule(tool, '*', EVERY))} here"
    if tool in SHELL_TOOLS:
        exact = f"Always allow `{_clip(rule.pattern or '')}` here" if rule else ""
        prefix, literal = "Always allow `{}` and what follows here", "Always allow `{}` here"
    elif tool in FILE_TOOLS:
        exact = f"Always allow {tool} on `{_clip(rule.pattern or '')}` here" if rule else ""
        prefix = literal = f"Always allow {tool} on files under {{}} here"
    else:
        exact = f"Always allow this exact {tool} input here" if rule else ""
        prefix = literal = "Always allow (a pattern on this tool matches nothing)"
    return {
        "exact": exact or "Always allow (give a pattern)",
        "every": every,
        "prefix": prefix,
        "literal": literal,
    }


def grant_covers(g: GrantOut) -> Markup:
    """A grant's `covers` as HTML: the command or path in it as code (escaped)."""
    pattern = g.pattern
    scope = g.scope or (EVERY if pattern is None else PREFIX)
    if scope == EXACT and pattern is None:  # the input, hidden from a non-decider
        return Markup.escape(g.covers or "")
    before, code, after = covers_parts(GrantRule(g.tool_name, pattern, scope))
    html = Markup.escape(before)
    if code is not None:
        html += Markup("<code>") + Markup.escape(code) + Markup("</code>")
    return html + Markup.escape(after)


ENFORCEMENT_HELP = {
    "native": "native: the agent's platform enforces this mode itself",
    "partial": "partial: the platform enforces part of this mode; the rest is asked by mail",
    "advisory": "advisory: the platform cannot enforce this mode; the agent is only told",
}
MODE_HELP = {
    "plan": "plan: the agent may read and plan, not change anything",
    "workspace": "workspace: the agent may change files in its workspace; other actions are asked",
    "full": "full: the agent acts without asking",
}


@cache
def environment() -> Environment:
    env = Environment(
        loader=FileSystemLoader(TEMPLATE_DIR),
        autoescape=select_autoescape(["html"]),
        trim_blocks=True,
        lstrip_blocks=True,
    )
    env.globals.update(
        static_url=static_url,
        ENFORCEMENT_HELP=ENFORCEMENT_HELP,
        MODE_HELP=MODE_HELP,
    )
    env.filters.update(
        markdown=markdown,
        time_left=time_left,
        short_time=short_time,
        size_text=size_text,
        tool_view=tool_view,
        type_word=type_word,
        request_state=request_state,
        always_allow=always_allow,
        grant_covers=grant_covers,
    )
    return env
