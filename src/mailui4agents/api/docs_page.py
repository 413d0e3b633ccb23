"""The OpenAPI browser at /api/v1/docs, with a strict Content-Security-Policy.

The page is FastAPI's Swagger UI: its script and style come from the
swagger-ui-dist package on cdn.jsdelivr.net, its icon from fastapi.tiangolo.com,
one inline script starts it, and it fetches /api/v1/openapi.json. The policy
allows exactly that (the inline script by its hash, computed from the page
served) and nothing else: no other script, no frames, no form posts, no plugins,
no other origin to connect to. So a token typed into "Authorize" can go nowhere
but this gateway. Kept rather than hidden behind a setting: docs/api.md points
people to it, and it serves nothing the OpenAPI document does not.
"""

from __future__ import annotations

import base64
import hashlib
import re
from functools import cache

from fastapi import APIRouter
from fastapi.openapi.docs import get_swagger_ui_html
from fastapi.responses import HTMLResponse

DOCS_PATH = "/api/v1/docs"
OPENAPI_PATH = "/api/v1/openapi.json"
ASSETS = "https://cdn.jsdelivr.net"
ICON = "https://fastapi.tiangolo.com"
_INLINE = re.compile(rb"<script>(.*?)</script>", re.S)

router = APIRouter(include_in_schema=False)


@cache
def page() -> tuple[bytes, str]:
    """The page and its Content-Security-Policy (built once)."""
    html = get_swagger_ui_html(
        openapi_url=OPENAPI_PATH,
        title="MailUI4Agents - Swagger UI",
        oauth2_redirect_url=None,
    ).body
    body = bytes(html)
    hashes = " ".join(
        "'sha256-" + base64.b64encode(hashlib.sha256(m).digest()).decode() + "'"
        for m in _INLINE.findall(body)
    )
    policy = (
        "default-src 'none'; "
        f"script-src {ASSETS} {hashes}; "
        f"style-src {ASSETS}; "
        f"img-src 'self' data: {ICON}; "
        "connect-src 'self'; "
        "base-uri 'none'; form-action 'none'; frame-ancestors 'none'"
    )
    return body, policy


@router.get(DOCS_PATH)
async def docs() -> HTMLResponse:
    body, policy = page()
    return HTMLResponse(
        body,
        headers={
            "Content-Security-Policy": policy,
            "X-Content-Type-Options": "nosniff",
            "Referrer-Policy": "no-referrer",
        },
    )
