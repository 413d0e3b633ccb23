"""``agentmail work show | merge | push | discard | keep SESSION``: a session's worktree
from the terminal (docs/review.md). SESSION is a session id or its alias.

Merging, pushing, discarding and keeping are for the session's owners (and
admins); the agent's bridge carries them out, and ``merge`` and ``push`` wait for
its answer. People's
commands: an agent key is refused before anything is sent."""

from __future__ import annotations

import re
import time
from typing import Any

import click

from mailui4agents.cli.approvals import run_as_person
from mailui4agents.cli.common import echo_json, fail
from mailui4agents.cli.output import one_line
from mailui4agents.client import AsyncClient
from mailui4agents.wire.models import to_json

MERGE_WAIT_S = 60.0
_UUID = re.compile(r"^[0-9a-f]{8}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{12}$")


async def session_id_of(client: AsyncClient, session: str) -> str:
    """The id of SESSION: an id as given, else the one session of that alias you
    may read (several in different workspaces: say which, by id)."""
    if _UUID.match(session.lower()):
        return session
    found = [s for s in (await client.sessions(q=session, limit=500)).items if s.alias == session]
    if not found:
        fail(f"no session you may read is named '{session}'")
    if len(found) > 1:
        ids = ", ".join(f"{s.id} ({s.workspace})" for s in found)
        fail(f"several sessions are named '{session}': give one of these ids: {ids}")
    return found[0].id


def size_text(n: int) -> str:
    """1536 → ``1.5 KiB``."""
    value = float(n)
    for unit in ("B", "KiB", "MiB", "GiB"):
        if value < 1024 or unit == "GiB":
            return f"{int(value)} B" if unit == "B" else f"{value:.1f} {unit}"
        value /= 1024
    return f"{n} B"  # pragma: no cover


def action_line(a: dict[str, Any]) -> str:
    """``2026-12-03 19:40:01  merge    refused  by ana — conflicts (app.py)``."""
    when = str(a["created_at"])[:19].replace("T", " ")
    text = f"{when}  {a['action']:<8} {a['status']:<8} by {a['requested_by']}"
    if a.get("message"):
        text += f" — {one_line(str(a['message']))}"
    if a.get("conflicts"):
        text += f" ({', '.join(a['conflicts'][:5])}{', …' if len(a['conflicts']) > 5 else ''})"
    return text


def show_lines(view: dict[str, Any]) -> list[str]:
    """What ``agentmail work show`` prints."""
    work = view.get("work")
    if work is None:
        chosen = "asked for" if view.get("worktree") else "not asked for"
        return [f"No worktree reported yet (own worktree {chosen})."]
    state = work["state"]
    if work.get("dirty"):
        state += ", uncommitted changes"
    if work.get("unmerged"):
        state += f", {work['unmerged']} commit(s) not merged"
    lines = [
        f"Branch:  {work['branch']} (from {work.get('base_branch') or 'a detached HEAD'})",
        f"Path:    {work['path']}",
        f"Size:    {size_text(int(work.get('bytes') or 0))}",
        f"State:   {state}",
        f"Commits: {work['base_commit'][:7]}..{work['head_commit'][:7]}",
        f"Remote:  {work.get('remote') or 'none (no Open PR)'}",
    ]
    if view.get("actions"):
        lines.append("Actions (newest first):")
        lines += [f"  {action_line(a)}" for a in view["actions"]]
    comments = view.get("comments") or []
    if comments:
        lines.append(f"Comments ({view.get('pending_comments', 0)} of yours not sent):")
        for c in comments:
            where = f"{c['line']}" if not c.get("end_line") else f"{c['line']}-{c['end_line']}"
            sent = "sent" if c.get("sent_at") else "pending"
            lines.append(
                f"  {c['path']}:{where} ({c['side']}) {c['author']}, {sent}: {one_line(c['body'])}"
            )
    return lines


@click.group("work")
def work() -> None:
    """A session's worktree: show it, merge it, push it, discard it or keep it (docs/review.md)."""


@work.command("show")
@click.argument("session")
@click.option("--json", "as_json", is_flag=True, help="Print JSON.")
def show(session: str, as_json: bool) -> None:
    """The worktree of SESSION (an id or an alias): branch, path, size, uncommitted
    and unmerged work, the last actions and the review comments."""

    async def fetch(client: AsyncClient) -> dict[str, Any]:
        return to_json(await client.work(await session_id_of(client, session)))

    view = run_as_person(fetch)
    if as_json:
        echo_json(view)
        return
    for line in show_lines(view):
        click.echo(line)


def _act(session: str, action: str, wait_s: float) -> dict[str, Any]:
    """Ask for `action`, then wait up to `wait_s` for the bridge's answer."""

    async def go(client: AsyncClient) -> dict[str, Any]:
        made = await client.work_action(await session_id_of(client, session), action)
        deadline = time.monotonic() + wait_s
        while made.status == "pending" and (left := deadline - time.monotonic()) > 0:
            made = await client.get_work_action(made.id, wait=left)
        return to_json(made)

    return run_as_person(go)


def _answer(out: dict[str, Any], as_json: bool) -> None:
    if as_json:
        echo_json(out)
    elif out["status"] == "pending":
        click.echo(
            f"Asked: {out['action']} ({out['id']}); the agent's bridge has not answered yet. "
            f"See it with: agentmail work show {out['session_id']}"
        )
    else:
        said = f": {out['message']}" if out.get("message") else ""
        click.echo(f"{out['action']} {out['status']}{said}")
        for path in out.get("conflicts") or []:
            click.echo(f"  conflict: {path}")
    if out["status"] in ("refused", "failed"):
        raise SystemExit(1)


@work.command("merge")
@click.argument("session")
@click.option("--no-wait", is_flag=True, help="Ask and return; do not wait for the bridge.")
@click.option("--json", "as_json", is_flag=True, help="Print the action as JSON.")
def merge(session: str, no_wait: bool, as_json: bool) -> None:
    """Merge the worktree's branch into the branch it came from (fast-forward or a
    merge commit), and wait up to 60 s for the bridge's answer. Exit 1 when it
    was refused (conflicts go back to the agent as a mail) or failed."""
    _answer(_act(session, "merge", 0 if no_wait else MERGE_WAIT_S), as_json)


@work.command("push")
@click.argument("session")
@click.option("--no-wait", is_flag=True, help="Ask and return; do not wait for the bridge.")
@click.option("--json", "as_json", is_flag=True, help="Print the action as JSON.")
def push(session: str, no_wait: bool, as_json: bool) -> None:
    """Open PR: push the worktree's branch to the repository's remote (only when the
    bridge reported one), wait up to 60 s for the bridge's answer and print it: the
    command that opens the pull request. Exit 1 when it was refused or failed."""
    _answer(_act(session, "push", 0 if no_wait else MERGE_WAIT_S), as_json)


@work.command("discard")
@click.argument("session")
@click.option("--yes", is_flag=True, help="Yes: remove the worktree and its branch.")
@click.option("--json", "as_json", is_flag=True, help="Print the action as JSON.")
def discard(session: str, yes: bool, as_json: bool) -> None:
    """Remove the worktree and its branch, with whatever work is in them (needs --yes)."""
    if not yes:
        fail(
            "discarding removes the worktree and its branch, uncommitted and unmerged work "
            "included; run again with --yes"
        )
    _answer(_act(session, "discard", 0), as_json)


@work.command("keep")
@click.argument("session")
@click.option("--json", "as_json", is_flag=True, help="Print the action as JSON.")
def keep(session: str, as_json: bool) -> None:
    """Keep the worktree: its retention starts again."""
    _answer(_act(session, "keep", 0), as_json)
