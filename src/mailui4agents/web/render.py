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
        markdown=markdown, time_left=time_left, short_time=short_time, tool_view=tool_view
    )
    return env
