"""The Markdown rules of the web UI, as one function (web/render.py shows a
mail's body with it; services/email_mail.py writes the HTML part of an e-mail
with it): untrusted Markdown becomes inert HTML.

- Raw HTML off; images are not rendered (no tracking pixels, no remote loads):
  the image rule is disabled, so `![x](u)` stays text.
- Whatever the Markdown produced, only the tags below survive (nh3 is the
  Ammonia sanitizer): no script, no event handlers, links only to http(s) and
  mailto, which open without referrer.
"""

from __future__ import annotations

import nh3
from markdown_it import MarkdownIt

_md = MarkdownIt("commonmark", {"html": False, "linkify": False}).disable("image")

TAGS = {
    "p", "br", "hr", "em", "strong", "code", "pre", "blockquote", "ul", "ol", "li",
    "a", "h1", "h2", "h3", "h4", "h5", "h6",
}  # fmt: skip
ATTRIBUTES = {"a": {"href", "title"}, "ol": {"start"}}


def to_html(text: str) -> str:
    """Untrusted Markdown as sanitised HTML (a fragment, no document around it)."""
    return clean(_md.render(text))


def clean(html: str) -> str:
    """HTML reduced to what the Markdown may produce (TAGS, ATTRIBUTES)."""
    return nh3.clean(
        html,
        tags=TAGS,
        attributes=ATTRIBUTES,
        url_schemes={"http", "https", "mailto"},
        link_rel="noopener noreferrer nofollow",
        strip_comments=True,
    )
