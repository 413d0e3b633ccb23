"""The thread page's `work` mails and the review of them (docs/review.md,
"Reading and commenting in the web UI").

A `work` mail is shown as its diff (web/diff_view.py) from its two attachments,
read here through the services with the viewer's access (services/attachments.py:
the read is logged like a download). Anything the renderer refuses leaves the
mail as ordinary mail with its attachments; the reason is logged, never shown
as an error page.
"""

from __future__ import annotations

import asyncio
import logging
import threading
from collections import OrderedDict
from dataclasses import dataclass, field
from typing import Any

from mailui4agents.domain.errors import DomainError
from mailui4agents.domain.mail_types import MailType
from mailui4agents.services import access, attachments, work
from mailui4agents.services.blobs import BlobStore
from mailui4agents.services.principals import Principal
from mailui4agents.state import Gateway
from mailui4agents.web import diff_view
from mailui4agents.web.shapes import MailJson
from mailui4agents.wire.work import WorkOut, WorktreesOut

log = logging.getLogger(__name__)

WORK_JSON = "work.json"
TURN_DIFF = "turn.diff"
MAX_WORK_MAILS = 20  # the newest work mails of a thread shown as diffs; older ones as mail


def _read(store: BlobStore, sha256: str, limit: int) -> bytes:
    with store.open(sha256) as f:
        return f.read(limit + 1)


async def _readable(gw: Gateway, who: Principal, ref: dict[str, Any]) -> str:
    """The blob of one attachment of a mail, if `who` may read it (NotFound
    otherwise)."""
    async with gw.write() as s:  # a write: the read is logged (services/attachments.py)
        att = await attachments.readable(s, access.Reader(who), str(ref["attachment_id"]))
    return att.sha256


# The views of the last work mails shown, by their attachments' blobs (immutable):
# a live page re-rendered on every event parses and highlights a turn once.
_VIEWS: OrderedDict[tuple[str, str | None], diff_view.WorkView] = OrderedDict()
VIEWS_CACHED = 16
_VIEWS_LOCK = threading.Lock()


def _build(gw: Gateway, key: tuple[str, str | None], patch_size: int | None) -> diff_view.WorkView:
    """In a worker thread (to_thread): the cache is shared between them."""
    with _VIEWS_LOCK:
        if (hit := _VIEWS.get(key)) is not None:
            _VIEWS.move_to_end(key)
            return hit
    store = BlobStore.for_settings(gw.settings)
    raw = _read(store, key[0], diff_view.WORK_JSON_MAX_BYTES)
    if len(raw) > diff_view.WORK_JSON_MAX_BYTES:
        raise diff_view.BadWork("work.json is too large")
    patch = None
    if key[1] is not None and (patch_size or 0) <= diff_view.PATCH_READ_MAX_BYTES:
        patch = _read(store, key[1], diff_view.PATCH_READ_MAX_BYTES)
    view = diff_view.build(raw, patch, patch_size)
    with _VIEWS_LOCK:
        _VIEWS[key] = view
        while len(_VIEWS) > VIEWS_CACHED:
            _VIEWS.popitem(last=False)
    return view


def _named(mail: MailJson, name: str) -> dict[str, Any] | None:
    found = [a for a in mail.get("attachments") or [] if a.get("name") == name]
    return found[0] if len(found) == 1 else None


async def work_view(gw: Gateway, who: Principal, mail: MailJson) -> diff_view.WorkView | None:
    """The diff of a `work` mail, or None: show it as ordinary mail."""
    meta = _named(mail, WORK_JSON)
    if meta is None:
        return None
    patch_ref = _named(mail, TURN_DIFF)
    try:
        if int(meta.get("size") or 0) > diff_view.WORK_JSON_MAX_BYTES:
            raise diff_view.BadWork("work.json is too large")
        work_blob = await _readable(gw, who, meta)
        patch_blob = await _readable(gw, who, patch_ref) if patch_ref is not None else None
        size = int(patch_ref.get("size") or 0) if patch_ref is not None else None
        return await asyncio.to_thread(_build, gw, (work_blob, patch_blob), size)
    except diff_view.BadWork as err:
        log.warning("work mail %s shown as plain mail: %s", mail.get("id"), err)
    except (DomainError, OSError) as err:
        log.warning("work mail %s shown as plain mail: its attachments: %s", mail.get("id"), err)
    return None


async def work_views(
    gw: Gateway, who: Principal, mails: list[MailJson]
) -> dict[str, diff_view.WorkView]:
    """The diffs of the thread's newest `work` mails, by mail id."""
    works = [m for m in mails if m.get("type") == MailType.WORK][-MAX_WORK_MAILS:]
    out: dict[str, diff_view.WorkView] = {}
    for m in works:
        view = await work_view(gw, who, m)
        if view is not None:
            out[str(m["id"])] = view
    return out


@dataclass
class Review:
    """What the thread page shows of a session's work: its work mails' diffs
    (by mail id), the comments on them (by mail id, then (path, side, last
    line)), the session's worktree state, and whether the viewer may merge,
    discard or keep it (its owners and admins)."""

    views: dict[str, diff_view.WorkView] = field(default_factory=dict)
    comments: dict[str, dict[tuple[str, str, int], list[dict[str, Any]]]] = field(
        default_factory=dict
    )
    info: WorkOut | None = None
    may_finish: bool = False
    # By mail id: the comments on lines the diff does not show (a file too large,
    # not in the patch): listed under the diff.
    elsewhere: dict[str, list[dict[str, Any]]] = field(default_factory=dict)


async def review(gw: Gateway, who: Principal, session_id: str, mails: list[MailJson]) -> Review:
    """The thread page's part of the review (services/work.view: the same rows
    and rule as `GET /api/v1/sessions/{id}/work`)."""
    views = await work_views(gw, who, mails)
    async with gw.read() as s:
        info = await work.view(s, who, session_id)
        session = await work.readable_session(s, who, session_id)
        owner = await access.Reader(who).is_owner(s, session)
    comments: dict[str, dict[tuple[str, str, int], list[dict[str, Any]]]] = {}
    elsewhere: dict[str, list[dict[str, Any]]] = {}
    places = {mail_id: v.places() for mail_id, v in views.items()}
    for c in info.comments:
        key = (c.path, c.side, c.end_line or c.line)
        if key in places.get(c.mail_id, ()):
            comments.setdefault(c.mail_id, {}).setdefault(key, []).append(c.model_dump())
        else:
            elsewhere.setdefault(c.mail_id, []).append(c.model_dump())
    may_finish = owner or (who.is_human and who.is_admin)
    return Review(views, comments, info, may_finish, elsewhere)


async def worktrees(gw: Gateway) -> WorktreesOut:
    """The admin page's worktrees (services/work.worktrees; admins only, checked there)."""
    async with gw.read() as s:
        return await work.worktrees(s)
