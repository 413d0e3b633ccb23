"""Templates, safe Markdown, and static files with cache-busting names."""

from __future__ import annotations

import hashlib
import json
from datetime import UTC, datetime
from functools import cache
from pathlib import Path
from typing import Any

import nh3
from jinja2 import Environment, FileSystemLoader, select_autoescape
from markdown_it import MarkdownIt
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

HERE = Path(__file__).parent
STATIC_DIR = HERE / "static"
TEMPLATE_DIR = HERE / "templates"

# Markdown with raw HTML off; images are not rendered (no tracking pixels, no
# remote loads): the image rule is disabled, so ![x](u) stays text.
_md = MarkdownIt("commonmark", {"html": False, "linkify": False}).disable("image")

# Whatever the Markdown produced, only these survive (nh3 is the Ammonia sanitizer).
_TAGS = {
    "p", "br", "hr", "em", "strong", "code", "pre", "blockquote", "ul", "ol", "li",
    "a", "h1", "h2", "h3", "h4", "h5", "h6",
}  # fmt: skip
_ATTRIBUTES = {"a": {"href", "title"}, "ol": {"start"}}


def markdown(text: str) -> Markup:
    """Untrusted Markdown as inert HTML: no raw HTML, no script, no event
    handlers, links only to http(s) and mailto, which open without referrer."""
    html = _md.render(text)
    clean = nh3.clean(
        html,
        tags=_TAGS,
        attributes=_ATTRIBUTES,
        url_schemes={"http", "https", "mailto"},
        link_rel="noopener noreferrer nofollow",
        strip_comments=True,
    )
    return Markup(clean)


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


def short_time(value: str | None) -> str:
    if not value:
        return ""
    return datetime.fromisoformat(value).strftime("%Y-%m-%d %H:%M")


def pretty_json(value: Any) -> str:
    return json.dumps(value, indent=2, ensure_ascii=False, sort_keys=True)


def tool_view(tool_input: Any) -> dict[str, Any]:
    """How a (masked) tool input is shown: a shell command as code, an edit as a
    diff, anything else as JSON."""
    if isinstance(tool_input, dict):
        command = tool_input.get("command")
        if isinstance(command, str):
            return {"kind": "command", "text": command}
        old, new = tool_input.get("old_string"), tool_input.get("new_string")
        if isinstance(old, str) and isinstance(new, str):
            lines = [f"--- {tool_input.get('file_path', '')}".rstrip()]
            lines += [f"- {ln}" for ln in old.splitlines()]
            lines += [f"+ {ln}" for ln in new.splitlines()]
            return {"kind": "diff", "text": "\n".join(lines)}
    return {"kind": "json", "text": pretty_json(tool_input)}


# Of a command or path in the "Always allow" button; the input is shown whole above it.
LABEL_CHARS = 80


def _clip(text: str) -> str:
    text = " ".join(text.split())
    return text if len(text) <= LABEL_CHARS else text[: LABEL_CHARS - 1] + "…"


def always_allow(p: dict[str, Any]) -> dict[str, str]:
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


def grant_covers(g: dict[str, Any]) -> Markup:
    """A grant's `covers` as HTML: the command or path in it as code (escaped)."""
    pattern = g.get("pattern")
    scope = g.get("scope") or (EVERY if pattern is None else PREFIX)
    if scope == EXACT and pattern is None:  # the input, hidden from a non-decider
        return Markup.escape(g.get("covers") or "")
    before, code, after = covers_parts(GrantRule(g["tool_name"], pattern, scope))
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
        tool_view=tool_view,
        always_allow=always_allow,
        grant_covers=grant_covers,
    )
    return env
