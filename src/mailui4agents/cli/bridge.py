"""``agentmail bridge``: turn mail into headless agent turns (docs/bridge.md)."""

from __future__ import annotations

import logging
import os
from dataclasses import replace
from pathlib import Path
from typing import TYPE_CHECKING

import anyio
import click

from mailui4agents.bridge.runners import KINDS
from mailui4agents.cli.common import describe, fail, load_config

if TYPE_CHECKING:
    from mailui4agents.bridge.metrics import BridgeMetrics

HELP = """Run an agent CLI for each mail the agent NAME receives.

Holds the agent's event stream, catches up on unread mail at start, and for
each new mail runs one headless turn of the agent CLI in the session's
workspace (cwd = the workspace; a workspace that does not exist on this
machine, or that resolved is outside the bridge's --workspace-root globs, is
refused and the sender is told). The model's final text goes back
as a reply when a human wrote and the model did not mail by itself; an agent's
mail gets no automatic reply. Every later mail of a mail session resumes the
same platform session. When a turn cannot run — CLI missing, not logged in or
bad key, out of credit or quota, no model, timed out, resumed session failed —
the sender gets a failure mail that says what to do.

\b
Runners:
  claude-code  Claude Code (`claude -p`): --permission-mode on every turn
               (plan → its own plan mode), a PreToolUse hook asking by mail,
               the agentmail MCP tools. --runner-arg bin=PATH, model=NAME.
  codex        Codex (`codex exec --json`): the sandbox per mode on every turn
               (plan → read-only, workspace → workspace-write, full →
               danger-full-access), a PreToolUse hook asking by mail, its own
               CODEX_HOME in the state dir. --runner-arg bin=, model=,
               config=FILE (provider), home=DIR (a shared CODEX_HOME).
  gemini       Gemini CLI (`gemini -p --output-format stream-json`): plan →
               --approval-mode plan; workspace/full → a policy exposing the
               shell and a BeforeTool hook asking by mail. --runner-arg bin=,
               model= (default gemini-2.5-pro), home=, auth=.
  opencode     opencode: one `opencode serve` per bridge, permission asks
               answered by mail; modes = three opencode agents.
               --runner-arg bin=, model=PROVIDER/MODEL, data_dir=.
  pi           pi (`pi -p --mode json`), gated by the shipped extension
               (`agentmail hook pi`). --runner-arg bin=, model=, home=.
  zcode        ZCode from its documented contract (needs `agentmail
               install-hook zcode`). --runner-arg bin=, model=, home=.
  acp          Any Agent Client Protocol agent: `--runner acp -- CMD ARGS`,
               permission requests answered by mail. --runner-arg
               platform=, enforcement= (default partial).
  command      Any headless agent: `--runner command -- CMD ARGS...`. The
               prompt goes to stdin; stdout is plain text (the answer) or JSON
               lines {"type":"session"|"text"|"error",...}; exit 0 = done.
               Approvals: the command calls `agentmail hook generic`.
               --runner-arg enforcement=native|partial|advisory (default
               advisory), platform=NAME, version=V.

\b
Workspace roots: --workspace-root GLOB (repeatable; default: the bridge
user's home and all below it, $HOME/**, never /). `*` matches within one path
component, `**` any depth, a plain path that folder only. The workspace is
resolved (symlinks followed) before it is matched, whatever the gateway
allowed. `/` alone is refused; `/**` (anywhere) starts with a warning.

\b
Ordering and limits: one mail session runs strictly in order; different
sessions run in parallel up to --concurrency; a full pool queues, never drops.
A turn waiting for a human's decision does not count toward --concurrency, and
its --turn-timeout pauses while it waits. On timeout the turn's whole process
group gets SIGTERM, then SIGKILL. SIGTERM/SIGINT stop running turns; they are
delivered again (marked as interrupted) on the next start. A turn whose CLI had
finished before the bridge died is not run again: its reply is posted from its
result file.

\b
Sandbox (--sandbox, the default; docs/sandbox.md): each turn runs under
bubblewrap and Landlock. plan: nothing the agent works on is writable;
workspace: the workspace (plus the turn's temp folder and the CLI's own state);
full: everything. Protected paths are read-only in every mode. The boundary is
proven with canary writes at start and before each turn; only then does
workspace mode let guarded calls run without a human. Unproven (bwrap missing,
user namespaces off, a canary that got through): the turn runs as before and
every guarded call is asked; the heartbeat says why.

\b
Worktrees (--worktrees, or a session whose first mail asked for its own
worktree; docs/review.md): when the workspace is a git repository with a
commit, the session runs in its own worktree on branch agentmail/<alias>,
under STATE/worktrees/. After each turn that changed something a `work` mail
(the diff stat, work.json, turn.diff up to --diff-max-bytes) goes into the
thread before the answer. The owners' Merge / Discard / Keep are carried out
here. --worktree-retention (default 7d, 0 = never): after the session is
archived that long a clean worktree is removed; one with uncommitted or
unmerged, unpushed commits never is: the owner gets a mail asking instead.

\b
State (--state-dir, default $XDG_STATE_HOME/agentmail/bridge-NAME):
  ledger.jsonl   delivered/completed per mail (fsync per line)
  sessions.json  mail session -> platform session
  results/       a finished turn's result until the ledger records it
  worktrees.json mail session -> its worktree (worktrees/ holds them)

\b
Environment: AGENTMAIL_URL, AGENTMAIL_KEY (the agent's key). Each turn gets
AGENTMAIL_URL, AGENTMAIL_KEY, AGENTMAIL_AGENT, AGENTMAIL_SESSION_ID,
AGENTMAIL_MAIL_ID, AGENTMAIL_PERMISSION_MODE, AGENTMAIL_PLATFORM_SESSION_ID.
A heartbeat every 30 s (and on every change) reports the runner, its version
and enforcement, what each session is doing, and the platform's own recent
sessions (so people can adopt them).
"""


def default_state_dir(agent: str) -> Path:
    base = os.environ.get("XDG_STATE_HOME") or str(Path.home() / ".local" / "state")
    return Path(base) / "agentmail" / f"bridge-{agent}"


_UNITS = {"s": 1.0, "m": 60.0, "h": 3600.0, "d": 86400.0}


def parse_duration(text: str) -> float:
    """``30m``, ``12h``, ``7d``, ``45s``; a plain number is days; ``0``: never."""
    value = text.strip().lower()
    unit = _UNITS.get(value[-1:]) if value else None
    number = value[:-1] if unit is not None else value
    try:
        amount = float(number)
    except ValueError:
        raise ValueError(f"{text!r} is not a duration: use 30m, 12h, 7d or 0") from None
    seconds = amount * (unit if unit is not None else 86400.0)
    if not 0 <= seconds <= 3650 * 86400.0 or seconds != seconds:
        raise ValueError(f"{text!r} is out of range: 0 (never) up to 3650d")
    return seconds


def _options(pairs: tuple[str, ...]) -> dict[str, str]:
    options: dict[str, str] = {}
    for pair in pairs:
        name, sep, value = pair.partition("=")
        if not sep or not name:
            raise click.BadParameter(f"{pair!r} is not KEY=VALUE", param_hint="--runner-arg")
        options[name] = value
    return options


@click.command("bridge", help=HELP, context_settings={"max_content_width": 100})
@click.option("--agent", "agent", required=True, help="The agent's name (its key must match).")
@click.option(
    "--runner",
    "kind",
    required=True,
    type=click.Choice(list(KINDS)),
    help="Which agent CLI runs the turns.",
)
@click.option("--concurrency", default=4, show_default=True, type=click.IntRange(1, 64))
@click.option(
    "--turn-timeout",
    default=1800.0,
    show_default=True,
    type=click.FloatRange(1, 7 * 86400),
    help="Seconds a turn may run (not counting time parked on a human).",
)
@click.option("--state-dir", type=click.Path(file_okay=False, path_type=Path))
@click.option("--runner-arg", "runner_args", multiple=True, metavar="KEY=VALUE")
@click.option(
    "--hook-timeout",
    default=540.0,
    show_default=True,
    type=click.FloatRange(1, 86400),
    help="Seconds a turn's hook waits for a human before denying with 'timed out'.",
)
@click.option(
    "--max-attempts",
    default=3,
    show_default=True,
    type=click.IntRange(1, 20),
    help="Attempts at one mail before giving up with a failure mail.",
)
@click.option(
    "--retry-delay",
    default=5.0,
    show_default=True,
    type=click.FloatRange(0, 3600),
    help="Seconds before the first retry of a failed turn (then 6x, 24x).",
)
@click.option(
    "--workspace-root",
    "workspace_roots",
    multiple=True,
    metavar="GLOB",
    help="A folder glob where turns may run (repeatable; default: $HOME/**).",
)
@click.option(
    "--sandbox/--no-sandbox",
    "use_sandbox",
    default=True,
    show_default=True,
    help="Run each turn in the kernel-enforced sandbox (bubblewrap + Landlock, docs/sandbox.md).",
)
@click.option(
    "--sandbox-network",
    metavar="allow|deny|PORTS",
    help="TCP inside the sandbox: allow, deny, or extra ports (443,8080); the gateway and "
    "the model stay reachable. Default: allow in workspace and full, deny in plan.",
)
@click.option(
    "--sandbox-write",
    "sandbox_writes",
    multiple=True,
    metavar="PATH",
    help="One more path a turn may write in plan and workspace mode (repeatable).",
)
@click.option(
    "--worktrees/--no-worktrees",
    "use_worktrees",
    default=False,
    show_default=True,
    help="Run every session whose workspace is a git repository in its own worktree "
    "(docs/review.md). Without it only sessions that asked for one get one.",
)
@click.option(
    "--worktree-retention",
    default="7d",
    show_default=True,
    metavar="DURATION",
    help="How long a worktree stays after its session is archived (30m, 12h, 7d; a "
    "plain number is days; 0: never removed). Never removes uncommitted or unpushed work.",
)
@click.option(
    "--diff-max-bytes",
    default=1024 * 1024,
    show_default=True,
    type=click.IntRange(1024, 1024 * 1024 * 1024),
    help="A turn's patch larger than this is not attached; the work mail says so and "
    "keeps the per-file summary.",
)
@click.option(
    "--worktree-sweep-every",
    default=3600.0,
    type=click.FloatRange(0.1, 86400),
    hidden=True,
    help="Seconds between retention sweeps (tests).",
)
@click.option("--log-level", default="info", show_default=True)
@click.option(
    "--log-format",
    type=click.Choice(["text", "json"]),
    default="text",
    show_default=True,
    envvar="AGENTMAIL_LOG_FORMAT",
    help="text: one readable line per entry; json: one JSON object per line.",
)
@click.option(
    "--metrics-port",
    type=click.IntRange(0, 65535),
    default=None,
    help="Serve Prometheus metrics at http://HOST:PORT/metrics (0 picks a free port; "
    "docs/metrics.md). Default: none.",
)
@click.option(
    "--metrics-host",
    default="127.0.0.1",
    show_default=True,
    help="The address --metrics-port listens on (no token guards it: keep it local "
    "or behind a firewall).",
)
@click.argument("command", nargs=-1, type=click.UNPROCESSED)
def bridge(
    agent: str,
    kind: str,
    concurrency: int,
    turn_timeout: float,
    state_dir: Path | None,
    runner_args: tuple[str, ...],
    hook_timeout: float,
    max_attempts: int,
    retry_delay: float,
    workspace_roots: tuple[str, ...],
    use_sandbox: bool,
    sandbox_network: str | None,
    sandbox_writes: tuple[str, ...],
    use_worktrees: bool,
    worktree_retention: str,
    diff_max_bytes: int,
    worktree_sweep_every: float,
    log_level: str,
    log_format: str,
    metrics_port: int | None,
    metrics_host: str,
    command: tuple[str, ...],
) -> None:
    import logging.config

    from mailui4agents import logs
    from mailui4agents.bridge.runners import make_runner
    from mailui4agents.bridge.sandbox import Network, Sandbox
    from mailui4agents.bridge.work import WorkSettings
    from mailui4agents.bridge.worker import Bridge, BridgeConfig
    from mailui4agents.bridge.workspace_roots import WorkspaceRoots
    from mailui4agents.client import ApiError
    from mailui4agents.domain.roots import RootError

    # httpx and httpcore stay at warning: "debug" means the bridge's own details.
    logging.config.dictConfig(logs.config(log_format, log_level))
    try:
        runner = make_runner(kind, list(command), _options(runner_args))
    except ValueError as exc:
        fail(str(exc))
    try:
        roots = WorkspaceRoots.from_options(workspace_roots)
    except RootError as exc:
        fail(f"--workspace-root: {exc}")
    try:
        network = Network.parse(sandbox_network) if sandbox_network is not None else None
    except ValueError as exc:
        raise click.BadParameter(str(exc), param_hint="--sandbox-network") from None
    for path in sandbox_writes:
        if not os.path.isabs(path):
            raise click.BadParameter(
                f"{path!r} is not an absolute path", param_hint="--sandbox-write"
            )
    try:
        retention_s = parse_duration(worktree_retention)
    except ValueError as exc:
        raise click.BadParameter(str(exc), param_hint="--worktree-retention") from None
    sandbox = Sandbox(
        enabled=use_sandbox,
        network=network,
        extra_writable=tuple(os.path.normpath(p) for p in sandbox_writes),
    )
    config = load_config()
    if config.key is None:
        fail("the bridge speaks for an agent: set AGENTMAIL_KEY to the agent's key")
    config = replace(config, agent_name=agent)
    directory = state_dir or default_state_dir(agent)
    directory.mkdir(parents=True, exist_ok=True, mode=0o700)
    settings = BridgeConfig(
        agent=agent,
        runner=runner,
        client=config,
        state_dir=directory,
        concurrency=concurrency,
        turn_timeout_s=turn_timeout,
        hook_timeout_s=hook_timeout,
        max_attempts=max_attempts,
        retry_delays_s=(retry_delay, retry_delay * 6, retry_delay * 24),
        workspace_roots=roots,
        sandbox=sandbox,
        work=WorkSettings(
            agent=agent,
            state_dir=directory,
            all_sessions=use_worktrees,
            diff_max_bytes=diff_max_bytes,
            retention_s=retention_s,
            sweep_every_s=worktree_sweep_every,
        ),
    )
    log = logging.getLogger(__name__)
    if metrics_port is not None:
        settings.metrics = _serve_metrics(kind, metrics_host, metrics_port)
    log.info(
        "bridge for %s: runner %s, concurrency %d, turn timeout %g s, state %s",
        agent, kind, concurrency, turn_timeout, directory,
    )  # fmt: skip
    log.info("workspace roots: %s", roots.describe())
    log.info(
        "worktrees: %s; retention %s; diff limit %d bytes",
        "every git workspace" if use_worktrees else "sessions that ask for one",
        "never" if retention_s == 0 else worktree_retention, diff_max_bytes,
    )  # fmt: skip
    for root in roots.broad():
        log.warning(
            "workspace root %s reaches into every top-level folder of this machine "
            "(/etc, /root, ...): the bridge refuses few workspaces or none, so the "
            "gateway's roots for %s are nearly all that stands between a mail and them",
            root, agent,
        )  # fmt: skip
    try:
        anyio.run(Bridge(settings).run)
    except ApiError as exc:
        fail(describe(exc))
    except KeyboardInterrupt:
        pass


def _serve_metrics(kind: str, host: str, port: int) -> BridgeMetrics:
    """The bridge's metrics on HOST:PORT/metrics, from a thread of prometheus_client's."""
    from prometheus_client import start_http_server

    from mailui4agents.bridge.metrics import BridgeMetrics

    metrics = BridgeMetrics(kind)
    try:
        server, _thread = start_http_server(port, addr=host, registry=metrics.registry)
    except OSError as exc:
        fail(f"--metrics-port {port} on {host}: {exc}")
    shown = f"[{host}]" if ":" in host else host
    logging.getLogger(__name__).info(
        "bridge metrics on http://%s:%d/metrics", shown, server.server_port
    )
    return metrics
