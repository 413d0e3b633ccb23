#!/usr/bin/env python3
"""Regenerate the PNG icons of the installable web app from web/static/icon.svg.

Draws the SVG in the system Chromium (Playwright for Python, as the browser tests
do: scripts/install-test-deps.sh) and saves, into web/static/:
  icon-192.png, icon-512.png           the icon as drawn (transparent rounded corners)
  icon-maskable-512.png                full-bleed background, the drawing inside the
                                       80 % safe zone (launchers cut any shape from it)
  apple-touch-icon.png                 180 px, opaque (iOS rounds the corners itself)
Run after changing icon.svg: `.venv/bin/python scripts/make-icons.py` (docs/web.md).
"""

from __future__ import annotations

import re
from pathlib import Path

from playwright.sync_api import sync_playwright

ROOT = Path(__file__).resolve().parents[1]
STATIC = ROOT / "src/mailui4agents/web/static"
CHROMIUM = "/usr/bin/chromium"


def main() -> None:
    svg = (STATIC / "icon.svg").read_text()
    background = re.search(r'<rect[^>]*fill="(#[0-9a-fA-F]{3,8})"', svg)
    assert background, "icon.svg: the first <rect> gives the background colour"
    colour = background.group(1)
    # (file, size, the drawing's share of the side, an opaque square behind it)
    made = [
        ("icon-192.png", 192, 1.0, False),
        ("icon-512.png", 512, 1.0, False),
        ("icon-maskable-512.png", 512, 0.7, True),
        ("apple-touch-icon.png", 180, 0.86, True),
    ]
    with sync_playwright() as p:
        browser = p.chromium.launch(executable_path=CHROMIUM, headless=True, args=["--no-sandbox"])
        try:
            for name, size, share, opaque in made:
                page = browser.new_page(viewport={"width": size, "height": size})
                inner = round(size * share)
                page.set_content(
                    "<!doctype html><style>html,body{margin:0;height:100%;"
                    f"background:{colour if opaque else 'transparent'}}}"
                    "body{display:flex;align-items:center;justify-content:center}"
                    f"svg{{width:{inner}px;height:{inner}px;display:block}}</style>{svg}"
                )
                page.screenshot(path=str(STATIC / name), omit_background=not opaque)
                page.close()
                print(f"wrote {STATIC / name} ({size}x{size})")
        finally:
            browser.close()


if __name__ == "__main__":
    main()
