"""Names and types of uploaded files: pure rules, no I/O.

An uploaded name is only ever shown and offered back as a download name; it never
becomes a path on our disk (blobs live under their sha256). Still, a recipient's
client may save the file under that name, so it must be a plain file name there.
"""

from __future__ import annotations

import re
import unicodedata
from urllib.parse import quote

DEFAULT_NAME = "attachment"
DEFAULT_CONTENT_TYPE = "application/octet-stream"
MAX_NAME_BYTES = 255
MAX_CONTENT_TYPE_CHARS = 200

_SEPARATORS = re.compile(r"[/\\]")
# type/subtype, optionally with parameters ("text/plain; charset=utf-8").
_CONTENT_TYPE = re.compile(r"^[A-Za-z0-9][\w.+-]*/[A-Za-z0-9][\w.+-]*(\s*;[ -~]*)?$")


def _visible(ch: str) -> bool:
    # Cc: control characters (NUL, ESC, newlines). Cf: format characters such as
    # U+202E RIGHT-TO-LEFT OVERRIDE, which can disguise "exe.txt" as "txt.exe".
    return unicodedata.category(ch) not in ("Cc", "Cf")


def _clip(text: str, max_bytes: int) -> str:
    """At most `max_bytes` of UTF-8, never splitting a character."""
    return text.encode()[:max_bytes].decode("utf-8", "ignore")


def safe_filename(raw: str | None) -> str:
    """A plain file name from whatever a client sent.

    Basename only (both `/` and `\\` separate), no control or format characters,
    at most 255 bytes of UTF-8 (keeping a short extension), never empty, never
    `.` or `..`.
    """
    name = _SEPARATORS.split(raw or "")[-1]
    name = "".join(ch for ch in name if _visible(ch)).strip()
    if not name.strip("."):
        return DEFAULT_NAME
    if len(name.encode()) > MAX_NAME_BYTES:
        stem, dot, ext = name.rpartition(".")
        if dot and stem and 0 < len(ext.encode()) <= 16:
            name = _clip(stem, MAX_NAME_BYTES - len(ext.encode()) - 1) + "." + ext
        else:
            name = _clip(name, MAX_NAME_BYTES)
    return name


def safe_content_type(raw: str | None) -> str:
    """The client's content type if it looks like one; else application/octet-stream."""
    value = (raw or "").strip()
    if len(value) > MAX_CONTENT_TYPE_CHARS or not _CONTENT_TYPE.match(value):
        return DEFAULT_CONTENT_TYPE
    return value


def content_disposition(name: str) -> str:
    """`attachment` (never inline) with the name for old clients (ASCII, no quotes)
    and exactly (RFC 6266 `filename*`) for everyone else."""
    fallback = "".join(ch if " " <= ch <= "~" and ch not in '"\\' else "_" for ch in name)
    return f"attachment; filename=\"{fallback}\"; filename*=UTF-8''{quote(name, safe='')}"
