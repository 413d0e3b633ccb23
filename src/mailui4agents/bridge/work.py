"""The bridge's side of a session's worktree (docs/review.md): pick or create it
for a turn, post what the turn changed as a ``work`` mail, report the worktree to
the gateway, carry out the owners' Merge / Discard / Keep / Open PR (a push),
and the retention sweep.

The git mechanics are in :mod:`mailui4agents.bridge.worktrees`; everything here
that runs git does so in a worker thread. A turn, an action and a sweep of one
session never overlap: the bridge queues actions and sweeps in the session's
own queue of the pool (bridge/worker.py).
"""

from __future__ import annotations

import json
import logging
import os
import time
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import anyio

from mailui4agents.bridge import worktree_finish as finish
from mailui4agents.bridge import worktrees as wt_git
from mailui4agents.bridge.replies import BODY_MAX_BYTES, clamp_utf8
from mailui4agents.bridge.worktrees import Snapshot, TurnDiff, Worktree, WorktreeMap
from mailui4agents.client import ApiError, AsyncClient, MailOut
from mailui4agents.domain.relay_keys import clamp_relay_key
from mailui4agents.wire.models import Duplicate

logger = logging.getLogger(__name__)

DAY_S = 86400.0
DEFAULT_RETENTION_S = 7 * DAY_S
SWEEP_EVERY_S = 3600.0
WORK_JSON_MAX_BYTES = 1024 * 1024
ACTION_MESSAGE_MAX = 4000


@dataclass
class WorkSettings:
    agent: str
    state_dir: Path
    #: ``--worktrees``: every session whose workspace is a git repository.
    all_sessions: bool = False
    diff_max_bytes: int = wt_git.DEFAULT_DIFF_MAX_BYTES
    #: ``--worktree-retention`` in seconds; 0: never removed.
    retention_s: float = DEFAULT_RETENTION_S
    sweep_every_s: float = SWEEP_EVERY_S

    @property
    def root(self) -> Path:
        return self.state_dir / "worktrees"


def work_key(agent: str, mail_id: str) -> str:
    return clamp_relay_key(f"work:{agent}:{mail_id}")


class WorkKeeper:
    """One bridge's worktrees (``<state>/worktrees.json``) and what is done with them."""

    def __init__(self, settings: WorkSettings, client: AsyncClient) -> None:
        self.s = settings
        self.client = client
        self.map = WorktreeMap.open(settings.state_dir / "worktrees.json")
        self._said_no_repo: set[str] = set()

    # -- a turn ---------------------------------------------------------------------

    def wanted(self, mail: MailOut) -> bool:
        return self.s.all_sessions or mail.worktree

    async def prepare(
        self, mail: MailOut, workspace: Path
    ) -> tuple[Worktree | None, Snapshot | None]:
        """The turn's worktree and the snapshot its diff starts from (none: the turn
        runs in the workspace)."""
        wt = await self.for_turn(mail, workspace)
        return (wt, await self.before(mail.id, wt)) if wt is not None else (None, None)

    async def for_turn(self, mail: MailOut, workspace: Path) -> Worktree | None:
        """The session's worktree (created on its first turn), or None: the turn
        runs in the workspace as before (not wanted, or no git repository there)."""
        known = self.map.get(mail.session_id)
        if known is not None and known.state == "active" and _is_dir(known.path):
            return known  # the session has one: every later mail runs there too
        if not self.wanted(mail):
            return None
        repo = await anyio.to_thread.run_sync(wt_git.find_repo, workspace)
        if repo is None:
            if str(workspace) not in self._said_no_repo:
                self._said_no_repo.add(str(workspace))
                logger.info(
                    "worktrees: %s is not a git repository with a commit; its sessions "
                    "run in the workspace itself",
                    workspace,
                )
            return None
        wt = await anyio.to_thread.run_sync(
            wt_git.create, repo, self.s.root, mail.session_id, mail.session_alias
        )
        self.map.put(wt)
        logger.info("worktree for session %s: %s on %s (from %s)", mail.session_id, wt.path,
                    wt.branch, wt.base_branch or wt.base_commit[:7])  # fmt: skip
        await self.report(wt)
        return wt

    def sandbox_writable(self, wt: Worktree) -> list[str]:
        """What a workspace-mode turn needs besides the worktree to commit: the
        object store, refs, reflogs and the worktree's own admin folder — not the
        repository's config or hooks (the bridge would run them unconfined)."""
        common = Path(wt.common_dir)
        paths = [str(common / "objects"), str(common / "refs"), str(common / "logs"), wt.git_dir]
        return [p for p in paths if Path(p).exists()]

    async def before(self, mail_id: str, wt: Worktree) -> Snapshot:
        """The snapshot before the mail's turn. Kept in ``worktrees.json`` until the
        work mail is posted: an attempt that is retried, or that a crash or a stop
        interrupted, is diffed from where the mail's first attempt began."""
        kept = wt.pending.get(mail_id)
        if kept is not None and len(kept) == 2:
            return Snapshot(head=kept[0], tree=kept[1])
        snap = await anyio.to_thread.run_sync(wt_git.snapshot, wt)
        wt.pending[mail_id] = [snap.head, snap.tree]
        self.map.put(wt)
        return snap

    def forget(self, mail_id: str, wt: Worktree) -> None:
        if wt.pending.pop(mail_id, None) is not None:
            self.map.put(wt)

    async def after(self, mail: MailOut, wt: Worktree, before: Snapshot) -> str | None:
        """Post the turn's ``work`` mail (none when nothing changed) and report the
        worktree; the work mail's id, or None."""
        try:
            after = await anyio.to_thread.run_sync(wt_git.snapshot, wt)
            changes = await anyio.to_thread.run_sync(
                wt_git.diff, wt, before, after, self.s.diff_max_bytes
            )
        except (wt_git.GitError, OSError) as exc:
            logger.error("mail %s: could not read what the turn changed in %s: %s",
                         mail.id, wt.path, exc)  # fmt: skip
            return None
        sent = None
        if not changes.empty:
            sent = await self._post(mail, changes)
        self.forget(mail.id, wt)
        await self.report(wt)
        return sent

    async def _post(self, mail: MailOut, changes: TurnDiff) -> str | None:
        to = mail.reply_address or mail.from_
        try:
            ids = await self._attachments(changes)
            body = clamp_utf8(changes.body(), BODY_MAX_BYTES, "\n[summary cut: too long]\n")
            sent = await self.client.send_mail(
                [to],
                changes.subject(mail.subject),
                body,
                parent_mail_id=mail.id,
                relay=True,
                relay_key=work_key(self.s.agent, mail.id),
                from_session_id=mail.session_id,
                mail_type="work",
                attachment_ids=ids,
            )
        except ApiError as exc:
            logger.error("mail %s: could not post the work mail: %s", mail.id, exc)
            return None
        mail_id = str(sent.mail_id) if isinstance(sent, Duplicate) else sent.id
        logger.info("mail %s: work mail %s (%d file(s), patch %d bytes%s)", mail.id, mail_id,
                    len(changes.files), changes.patch_bytes,
                    ", capped" if changes.capped else "")  # fmt: skip
        return mail_id

    async def _attachments(self, changes: TurnDiff) -> list[str]:
        """``turn.diff`` first (a gateway limit below ours caps it too), then ``work.json``."""
        diff_id: str | None = None
        if changes.patch is not None and changes.patch:
            try:
                ref = await self.client.upload_attachment(
                    changes.patch, name="turn.diff", content_type="text/x-diff"
                )
                diff_id = ref.attachment_id
            except ApiError as exc:
                if exc.status != 413:
                    raise
                logger.warning("the gateway refused turn.diff (%d bytes) as too large: "
                               "only the summary is attached", len(changes.patch))  # fmt: skip
                changes.max_bytes = min(changes.max_bytes, len(changes.patch) - 1)
                changes.patch = None
        data = json.dumps(changes.work_json(), ensure_ascii=False).encode()
        while len(data) > WORK_JSON_MAX_BYTES:  # thousands of long paths: fewer entries
            changes.file_limit = min(changes.file_limit, len(changes.files)) // 2
            data = json.dumps(changes.work_json(), ensure_ascii=False).encode()
        ref = await self.client.upload_attachment(
            data, name="work.json", content_type="application/json"
        )
        return [ref.attachment_id, *([diff_id] if diff_id else [])]

    async def report(self, wt: Worktree) -> None:
        """``PUT …/work``: the worktree as the session shows it."""
        fields: dict[str, Any] = {
            "branch": wt.branch,
            "path": wt.path,
            "base_branch": wt.base_branch,
            "base_commit": wt.base_commit,
            "state": wt.state,
        }
        if wt.state == "active" and _is_dir(wt.path):
            try:
                st = await anyio.to_thread.run_sync(wt_git.status, wt)
            except (wt_git.GitError, OSError) as exc:
                logger.warning("worktree %s: could not read its state: %s", wt.path, exc)
                return
            fields.update(head_commit=st.head, bytes=st.bytes, dirty=st.dirty,
                          unmerged=st.unmerged)  # fmt: skip
            try:
                fields["remote"] = await anyio.to_thread.run_sync(finish.remote_of, wt)
            except (wt_git.GitError, OSError) as exc:  # no remote known: no Open PR
                logger.warning("worktree %s: could not read its remotes: %s", wt.path, exc)
        else:
            fields.update(head_commit=wt.base_commit, bytes=0, dirty=False, unmerged=0)
            fields["state"] = "removed"
        try:
            await self.client.report_work(wt.session_id, **fields)
        except ApiError as exc:
            logger.warning("could not report the worktree of session %s: %s", wt.session_id, exc)

    # -- the owners' actions ----------------------------------------------------------

    async def act(self, action: dict[str, Any]) -> None:
        """Carry out one ``work_action`` and answer it (``finish_work_action``)."""
        action_id = str(action.get("id") or "")
        session_id = str(action.get("session_id") or "")
        kind = action.get("action")
        if not action_id or action.get("status", "pending") != "pending":
            return
        wt = self.map.get(session_id)
        if wt is None or wt.state != "active":
            await self._finish(action_id, "refused",
                               "This bridge has no active worktree for the session.")  # fmt: skip
            return
        try:
            if kind == "merge":
                out = await anyio.to_thread.run_sync(finish.merge, wt)
            elif kind == "discard":
                out = await anyio.to_thread.run_sync(finish.discard, wt)
                if out.status == "done":
                    wt.state = "removed"
                    self.map.put(wt)
            elif kind == "push":
                remote = await anyio.to_thread.run_sync(finish.remote_of, wt)
                if remote is None:
                    out = finish.Outcome("refused", "The repository has no remote to push to.")
                else:
                    out = await anyio.to_thread.run_sync(finish.push, wt, remote)
            elif kind == "keep":
                wt.kept_at, wt.asked_at = time.time(), None
                self.map.put(wt)
                out = finish.Outcome("done", self._kept_message(wt))
            else:
                out = finish.Outcome("refused", f"Unknown action {kind!r}.")
        except (wt_git.GitError, OSError) as exc:
            logger.error("work action %s (%s) on %s failed: %s", action_id, kind, wt.path, exc)
            out = finish.Outcome("failed", f"{kind} failed: {exc}")
        # The new state first: whoever waits for the answer then reads it.
        await self.report(wt)
        await self._finish(action_id, out.status, out.message, out.conflicts)

    def _kept_message(self, wt: Worktree) -> str:
        if self.s.retention_s <= 0:
            return f"Kept {wt.branch}: this bridge never removes worktrees."
        days = self.s.retention_s / DAY_S
        return f"Kept {wt.branch}; the retention clock restarts ({days:g} day(s))."

    async def _finish(
        self, action_id: str, status: str, message: str, conflicts: tuple[str, ...] = ()
    ) -> None:
        text = clamp_utf8(message, ACTION_MESSAGE_MAX)
        try:
            await self.client.finish_work_action(action_id, status, text, list(conflicts))
        except ApiError as exc:
            logger.warning("could not answer work action %s: %s", action_id, exc)
        else:
            logger.info("work action %s: %s: %s", action_id, status, text.splitlines()[0])

    async def pending(self) -> list[dict[str, Any]]:
        """The owners' actions that waited while the bridge was away."""
        try:
            items = await self.client.pending_work_actions()
        except ApiError as exc:
            logger.warning("could not list pending work actions: %s", exc)
            return []
        return [dict(item) if isinstance(item, dict) else _as_dict(item) for item in items]

    # -- retention ----------------------------------------------------------------------

    def active(self) -> list[str]:
        return [sid for sid, wt in self.map.items.items() if wt.state == "active"]

    async def sweep(self, session_id: str) -> str:
        """One worktree's retention: keep, remove (clean) or ask the owner (anything
        that could be lost). Returns what was decided."""
        wt = self.map.get(session_id)
        if wt is None or wt.state != "active":
            return "keep"
        now = time.time()
        try:
            session = await self.client.agent_session(session_id)
        except ApiError as exc:
            logger.warning("sweep: could not read session %s: %s", session_id, exc)
            return "keep"
        archived = session.status == "archived"
        if archived and wt.archived_at is None:
            wt.archived_at = now
            self.map.put(wt)
        elif not archived and wt.archived_at is not None:
            wt.archived_at, wt.asked_at = None, None
            self.map.put(wt)
        st = None
        if _is_dir(wt.path):
            try:
                st = await anyio.to_thread.run_sync(wt_git.status, wt)
            except (wt_git.GitError, OSError) as exc:
                logger.warning("sweep: could not read %s: %s", wt.path, exc)
        decision = wt_git.sweep_decision(wt, st, now, self.s.retention_s)
        if decision == "remove":
            try:
                out = await anyio.to_thread.run_sync(finish.discard, wt)
            except (wt_git.GitError, OSError) as exc:
                logger.error("sweep: could not remove %s: %s", wt.path, exc)
                return "keep"
            if out.status == "done":
                wt.state = "removed"
                self.map.put(wt)
                logger.info("sweep: removed the clean worktree %s (%s)", wt.path, wt.branch)
            else:
                logger.warning("sweep: %s", out.message)
            await self.report(wt)
        elif decision == "ask" and wt.asked_at is None:
            reason = wt_git.ask_reason(st)
            try:
                await self.client.ask_about_work(session_id, reason)
            except ApiError as exc:
                logger.warning("sweep: could not ask about %s: %s", wt.path, exc)
            else:
                wt.asked_at = now
                self.map.put(wt)
                logger.info("sweep: %s is past its retention but %s: asked the owner",
                            wt.path, reason)  # fmt: skip
        elif decision == "ask":
            logger.info("sweep: %s is past its retention and still waits for its owner",
                        wt.path)  # fmt: skip
        return decision


def _is_dir(path: str) -> bool:
    return os.path.isdir(path)


def _as_dict(item: Any) -> dict[str, Any]:
    dump = getattr(item, "model_dump", None)
    if callable(dump):
        data = dump(mode="json")
        return dict(data) if isinstance(data, dict) else {}
    return {}
