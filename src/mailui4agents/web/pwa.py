"""The installable web app: the service worker at /sw.js, the manifest, the
offline page (docs/web.md, "Install on your phone", "Notifications in the browser").

The worker is served from the root so that its scope is the whole site ("/")
without a `Service-Worker-Allowed` header. Before static/sw.js it gets one line,
`const CONFIG = {...}`: the name of its cache and the URLs of the app shell.
The cache name carries the gateway's version and a digest of the static files
and the offline page's templates, so a new release (or any change to those)
changes /sw.js byte for byte; the browser then installs the new worker, which
drops the old cache. /sw.js itself is `no-cache`: browsers revalidate it anyway
at most every 24 h, this makes it every page load.
"""

from __future__ import annotations

import hashlib
import json
from functools import cache

from fastapi import APIRouter, Request
from fastapi.responses import JSONResponse, Response

from mailui4agents import __version__
from mailui4agents.web.render import STATIC_DIR, TEMPLATE_DIR, _static_names, static_url
from mailui4agents.web.views import _page
from mailui4agents.wire.models import JsonObject

router = APIRouter(include_in_schema=False)

OFFLINE_PATH = "/offline"
MANIFEST_PATH = "/manifest.webmanifest"
# What the worker keeps (and nothing else: no page of the app, no API answer).
SHELL_STATIC = ("app.css", "app.js", "icon.svg", "icon-192.png", "icon-512.png",
                "icon-maskable-512.png", "apple-touch-icon.png")  # fmt: skip
SW_HEADERS = {
    "Cache-Control": "no-cache",
    "X-Content-Type-Options": "nosniff",
    # The worker's own fetches: this site only.
    "Content-Security-Policy": "default-src 'self'",
}


@cache
def cache_name() -> str:
    digest = hashlib.sha256(__version__.encode())
    for public in sorted(_static_names()[1]):
        digest.update(public.encode())
    for template in ("base.html", "offline.html"):
        digest.update((TEMPLATE_DIR / template).read_bytes())
    return f"agentmail-shell-{__version__}-{digest.hexdigest()[:12]}"


@cache
def worker_source() -> str:
    config = {
        "cache": cache_name(),
        "offline": OFFLINE_PATH,
        "shell": [OFFLINE_PATH, MANIFEST_PATH, *(static_url(n) for n in SHELL_STATIC)],
        "icon": static_url("icon-192.png"),
        "badge": static_url("icon-192.png"),
    }
    body = (STATIC_DIR / "sw.js").read_text(encoding="utf-8")
    return f"const CONFIG = {json.dumps(config)};\n{body}"


@cache
def manifest_body() -> JsonObject:
    """static/manifest.webmanifest with each icon's hashed URL."""
    manifest: JsonObject = json.loads((STATIC_DIR / "manifest.webmanifest").read_text())
    for icon in manifest["icons"]:
        icon["src"] = static_url(icon["src"])
    return manifest


@router.get("/sw.js")
async def service_worker() -> Response:
    return Response(
        worker_source(), media_type="text/javascript; charset=utf-8", headers=SW_HEADERS
    )


@router.get(MANIFEST_PATH)
async def manifest() -> JSONResponse:
    return JSONResponse(
        manifest_body(),
        media_type="application/manifest+json",
        headers={"Cache-Control": "no-cache", "X-Content-Type-Options": "nosniff"},
    )


@router.get(OFFLINE_PATH)
async def offline(request: Request) -> Response:
    """The page the worker shows when the gateway cannot be reached. The same
    for everyone (no user, no data): the worker may keep it."""
    return _page(request, "offline.html", None)
