"""``agentmail rules list | add | rm | enable | disable | accept`` (docs/rules.md).

People write rules; agents do not. Every command needs a person's token and
refuses an agent key before anything is sent (cli/approvals.run_as_person)."""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path
from typing import Any

import click

from mailui4agents.cli.approvals import run_as_person
from mailui4agents.cli.common import echo_json, fail
from mailui4agents.client import AsyncClient
from mailui4agents.domain.rules_file import (
    MAX_FILE_BYTES,
    RULES_FILE,
    RuleFileError,
    parse,
    sha256_of,
)
from mailui4agents.wire.models import to_json


def rule_line(rule: dict[str, Any]) -> str:
    """One row of ``agentmail rules list``."""
    where = rule.get("scope") or "?"
    if rule.get("session_id"):
        where += f" {rule['session_id']}"
    if rule.get("workspace"):
        where += f" {rule['workspace']}"
    state = "" if rule.get("enabled", True) else "  (off)"
    what = rule.get("covers") or rule.get("pattern") or "every input"
    tool = "" if rule.get("builtin") else f"{rule.get('tool_name')}: "
    reason = f" — {rule['reason']}" if rule.get("reason") else ""
    by = f"[{where}, by {rule.get('author')}]"
    return f"{rule['id']}  {rule['effect']:<5}  {tool}{what}  {by}{reason}{state}"


@click.group("rules")
def rules() -> None:
    """Rules that decide an agent's tool calls before anyone is asked (docs/rules.md)."""


@rules.command("list")
@click.option("--session", "session_id", metavar="ID", help="Only this session's rules.")
@click.option("--workspace", metavar="PATH", help="Only this workspace's rules.")
@click.option("--json", "as_json", is_flag=True, help="Print JSON.")
def list_rules(session_id: str | None, workspace: str | None, as_json: bool) -> None:
    """List the rules you may see, built-in ones first."""

    async def fetch(client: AsyncClient) -> list[dict[str, Any]]:
        return [to_json(r) for r in await client.rules(session_id, workspace)]

    found = run_as_person(fetch)
    if as_json:
        echo_json(found)
        return
    if not found:
        click.echo("No rules.")
    for rule in found:
        click.echo(rule_line(rule))


@rules.command("add")
@click.argument("effect", type=click.Choice(["allow", "deny", "ask"]))
@click.argument("tool")
@click.argument("pattern", required=False)
@click.option("--session", "session_id", metavar="ID", help="For this session (its deciders).")
@click.option("--workspace", metavar="PATH", help="For this workspace (its owners).")
@click.option("--global", "everywhere", is_flag=True, help="For every session (admins).")
@click.option("--reason", metavar="R", help="Why; told to the agent when the rule decides.")
@click.option("--json", "as_json", is_flag=True, help="Print the rule as JSON.")
def add(
    effect: str,
    tool: str,
    pattern: str | None,
    session_id: str | None,
    workspace: str | None,
    everywhere: bool,
    reason: str | None,
    as_json: bool,
) -> None:
    """Add a rule: EFFECT (allow, deny, ask) for TOOL, optionally only for
    PATTERN (a command prefix, an absolute path prefix, or * for every input).
    Give exactly one of --session, --workspace, --global."""
    chosen = [name for name, v in (("session", session_id), ("workspace", workspace),
                                   ("global", everywhere)) if v]  # fmt: skip
    if len(chosen) != 1:
        fail("give exactly one of --session ID, --workspace PATH, --global")
    scope = chosen[0]
    if workspace is not None:
        workspace = str(Path(workspace).expanduser().absolute())

    async def send(client: AsyncClient) -> dict[str, Any]:
        made = await client.add_rule(
            effect=effect, tool_name=tool, pattern=pattern, scope=scope,
            session_id=session_id, workspace=workspace, reason=reason,
        )  # fmt: skip
        return to_json(made)

    made = run_as_person(send)
    _said(made, as_json, lambda: f"Added rule {made['id']}: {rule_line(made)}")


@rules.command("rm")
@click.argument("rule_id", metavar="RULE_ID")
@click.option("--json", "as_json", is_flag=True, help="Print the removed rule as JSON.")
def rm(rule_id: str, as_json: bool) -> None:
    """Remove the rule RULE_ID (yours; admins: any)."""

    async def drop(client: AsyncClient) -> dict[str, Any]:
        return to_json(await client.remove_rule(rule_id))

    _said(run_as_person(drop), as_json, lambda: f"Removed rule {rule_id}.")


def _said(result: dict[str, Any], as_json: bool, line: Callable[[], str]) -> None:
    """A command's answer: the rule as JSON, or its line for people."""
    if as_json:
        echo_json(result)
    else:
        click.echo(line())


def _switch(rule_id: str, *, enabled: bool, as_json: bool) -> None:
    async def flip(client: AsyncClient) -> dict[str, Any]:
        return to_json(await client.switch_rule(rule_id, enabled))

    _said(run_as_person(flip), as_json, lambda: f"Rule {rule_id} is {'on' if enabled else 'off'}.")


@rules.command("enable")
@click.argument("rule_id", metavar="RULE_ID")
@click.option("--json", "as_json", is_flag=True, help="Print the rule as JSON.")
def enable(rule_id: str, as_json: bool) -> None:
    """Switch the rule RULE_ID on (built-in rules: admins)."""
    _switch(rule_id, enabled=True, as_json=as_json)


@rules.command("disable")
@click.argument("rule_id", metavar="RULE_ID")
@click.option("--json", "as_json", is_flag=True, help="Print the rule as JSON.")
def disable(rule_id: str, as_json: bool) -> None:
    """Switch the rule RULE_ID off (built-in rules: admins)."""
    _switch(rule_id, enabled=False, as_json=as_json)


@rules.command("accept")
@click.argument("workspace", type=click.Path(file_okay=False, path_type=Path))
@click.option("--file", "file", type=click.Path(dir_okay=False, path_type=Path),
              help=f"Read the file here instead of WORKSPACE/{RULES_FILE}.")  # fmt: skip
@click.option("--yes", is_flag=True, help="Accept without asking (after showing the file).")
@click.option("--json", "as_json", is_flag=True, help="Print the accepted file as JSON.")
def accept(workspace: Path, file: Path | None, yes: bool, as_json: bool) -> None:
    """Show WORKSPACE's .agentmail/rules.toml and accept exactly that content.

    An agent can write this file, so it counts only once a workspace owner
    accepted its SHA-256; a later change is ignored until accepted again."""
    ws = workspace.expanduser().absolute()
    path = file or ws / RULES_FILE
    try:
        raw = path.read_bytes()
    except OSError as e:
        fail(f"cannot read {path}: {e.strerror or e}")
    if len(raw) > MAX_FILE_BYTES:
        fail(f"{path} is larger than {MAX_FILE_BYTES} bytes")
    try:
        content = raw.decode("utf-8")
        found = parse(content)
    except UnicodeDecodeError:
        fail(f"{path} is not UTF-8")
    except RuleFileError as e:
        fail(f"{path}: {e}")
    digest = sha256_of(content)
    if not as_json:
        click.echo(f"{path} (sha256 {digest}), {len(found)} rule(s):")
        for r in found:
            pattern = r.pattern or "every input"
            click.echo(
                f"  {r.effect:<5}  {r.tool_name}: {pattern}"
                + (f" — {r.reason}" if r.reason else "")
            )
    if not yes and not click.confirm(f"Accept these rules for {ws}?", default=False):
        fail("not accepted")

    async def send(client: AsyncClient) -> dict[str, Any]:
        return to_json(await client.accept_rule_file(str(ws), content, digest))

    accepted = run_as_person(send)
    if as_json:
        echo_json(accepted)
        return
    click.echo(f"Accepted {len(accepted['rules'])} rule(s) for {accepted['workspace']}.")
