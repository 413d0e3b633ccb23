"""The bridge's life: stream, catch-up, pool, heartbeat, shutdown (docs/bridge.md).

Start-up: stop turn processes left over by a previous life that died (the
ledger knows their process groups), open the agent's event stream FIRST, and
only once the gateway has accepted it list the unread inbox (unscoped: a
catch-up sees only mail addressed to the agent) — so nothing that arrives in
between can be missed; duplicates are dropped by mail id. Mail the ledger
holds as delivered-but-not-completed is queued again too (it is settled from
its result file when its CLI had finished, else redelivered with the
"interrupted" headline).

Shutdown (SIGTERM/SIGINT, or cancellation): running turns are stopped — their
process groups killed, never orphaned — and, not being completed, they are
redelivered on the next start.
"""

from __future__ import annotations

import logging
import os
import signal
from contextlib import aclosing
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any

import anyio

from mailui4agents.bridge import replies
from mailui4agents.bridge.activity import Activity, Board
from mailui4agents.bridge.ledger import Ledger
from mailui4agents.bridge.park import ParkServer
from mailui4agents.bridge.pool import Pool
from mailui4agents.bridge.process import kill_leftover
from mailui4agents.bridge.runners.base import Runner
from mailui4agents.bridge.sandbox import Sandbox
from mailui4agents.bridge.session_map import SessionMap
from mailui4agents.bridge.turn import Job, TurnHandler, TurnSettings
from mailui4agents.bridge.work import WorkKeeper, WorkSettings
from mailui4agents.bridge.workspace_roots import WorkspaceRoots
from mailui4agents.client import ApiError, AsyncClient, ClientConfig
from mailui4agents.client.stream import RESET

if TYPE_CHECKING:  # prometheus_client only when --metrics-port is given
    from mailui4agents.bridge.metrics import BridgeMetrics

logger = logging.getLogger(__name__)

HEARTBEAT_S = 30.0
# Changes are reported at once, but at most one heartbeat per second: a busy
# bridge would otherwise post one per turn start and end, and each heartbeat is
# a write the gateway's mail sends wait behind.
HEARTBEAT_MIN_GAP_S = 1.0


@dataclass
class BridgeConfig:
    agent: str
    runner: Runner
    client: ClientConfig
    state_dir: Path
    concurrency: int = 4
    turn_timeout_s: float = 1800.0
    hook_timeout_s: float = 540.0
    max_attempts: int = 3
    retry_delays_s: tuple[float, ...] = (5.0, 30.0, 120.0)
    heartbeat_s: float = HEARTBEAT_S
    #: Where turns may run, checked on the resolved workspace (none: nowhere).
    workspace_roots: WorkspaceRoots = field(default_factory=lambda: WorkspaceRoots(()))
    #: The Prometheus metrics the CLI serves on --metrics-port (None: not counted).
    metrics: BridgeMetrics | None = None
    #: The turns' sandbox (docs/sandbox.md); None: no sandbox at all.
    sandbox: Sandbox | None = None
    #: Worktrees (docs/review.md): ``--worktrees``, ``--diff-max-bytes``,
    #: ``--worktree-retention``; a session may ask for its own worktree without them.
    work: WorkSettings | None = None
    #: Set once the stream is open and the catch-up queued (tests and benchmarks wait on it).
    ready: anyio.Event = field(default_factory=anyio.Event)


class Bridge:
    def __init__(self, config: BridgeConfig) -> None:
        self.config = config
        self.ledger = Ledger.open(config.state_dir / "ledger.jsonl")
        self.sessions = SessionMap.open(config.state_dir / "sessions.json")
        self._dirty = anyio.Event()
        self.board = Board(on_change=self._dirty.set)
        self.workspaces: set[str] = set()
        self.pool: Pool[Job] | None = None
        self.work: WorkKeeper | None = None
        if config.metrics is not None:
            config.metrics.watch(lambda: self.pool)

    async def run(self) -> None:
        """Run until cancelled or signalled."""
        cfg = self.config
        if cfg.client.key is None:
            raise ValueError("the bridge needs the agent's key (AGENTMAIL_KEY)")
        logger.info("%s", cfg.runner.describe_defaults())
        if self.ledger.skipped_lines:
            logger.warning("ledger: skipped %d torn line(s)", self.ledger.skipped_lines)
        self._stop_leftovers()
        park = ParkServer()
        try:
            await anyio.to_thread.run_sync(cfg.runner.open)
            await self._prove_sandbox()
            async with AsyncClient(cfg.client) as client, anyio.create_task_group() as tasks:
                work = WorkKeeper(
                    cfg.work or WorkSettings(agent=cfg.agent, state_dir=cfg.state_dir), client
                )
                self.work = work
                handler = TurnHandler(
                    TurnSettings(
                        agent=cfg.agent,
                        url=cfg.client.url,
                        key=cfg.client.key,
                        state_dir=cfg.state_dir,
                        turn_timeout_s=cfg.turn_timeout_s,
                        hook_timeout_s=cfg.hook_timeout_s,
                        max_attempts=cfg.max_attempts,
                        retry_delays_s=cfg.retry_delays_s,
                        workspace_roots=cfg.workspace_roots,
                    ),
                    cfg.runner,
                    client,
                    self.ledger,
                    self.sessions,
                    park,
                    self.board,
                    metrics=cfg.metrics,
                    sandbox=cfg.sandbox,
                    work=work,
                )
                pool: Pool[Job] = Pool(
                    cfg.concurrency,
                    handler.handle,
                    key=_job_key,
                    on_change=self._dirty.set,
                )
                self.pool = pool
                pool.attach(tasks)
                await park.serve(tasks)
                tasks.start_soon(self._signals, tasks.cancel_scope)
                tasks.start_soon(self._heartbeats, client)
                connected = anyio.Event()
                tasks.start_soon(self._events, client, connected)
                await connected.wait()
                await self._catch_up(client)
                tasks.start_soon(self._sweeps)
                cfg.ready.set()
                logger.info("bridge ready: stream open, %d mail queued", pool.queued)
        finally:
            park.close()
            with anyio.CancelScope(shield=True):
                await anyio.to_thread.run_sync(cfg.runner.close)

    async def _prove_sandbox(self) -> None:
        """The start-up proof (docs/sandbox.md, "The proof"): a workspace-mode boundary
        around a scratch workspace, through the wrapper every turn uses. Each turn
        proves its own boundary again before it starts."""
        box = self.config.sandbox
        if box is None:
            return
        box.on_change = lambda: self._dirty.set()
        not_here = self.config.runner.sandbox_unsupported()
        if not_here is not None:
            box.refuse(not_here)
            return
        state = self.config.state_dir
        workspace, turn_dir = state / "sandbox-check", state / "turns" / "sandbox-check"
        for folder in (workspace, turn_dir):
            folder.mkdir(parents=True, exist_ok=True, mode=0o700)
        env = dict(os.environ)
        runner = self.config.runner
        proof = await box.prove(
            box.box("workspace", workspace, turn_dir, runner.sandbox_writable(env, state),
                    env, runner.model_ports(env))
        )  # fmt: skip
        if proof.ok:
            logger.info(
                "sandbox: proven at start in %.0f ms (network: %s); workspace turns run "
                "confined and guarded calls inside the workspace need no human",
                proof.seconds * 1000, box.network.describe() if box.network else "per mode",
            )  # fmt: skip

    def _mode_enforcement(self) -> str:
        """The heartbeat's level: native once the sandbox was proven, else the runner's."""
        box = self.config.sandbox
        if box is not None and box.status.state == "proven":
            return "native"
        return self.config.runner.mode_enforcement

    def _stop_leftovers(self) -> None:
        for entry in self.ledger.unfinished():
            if entry.pgid is not None and kill_leftover(entry.pgid, entry.start_ticks):
                logger.warning(
                    "stopped the process group %s left over from an interrupted turn (mail %s)",
                    entry.pgid,
                    entry.mail_id,
                )

    async def _signals(self, scope: anyio.CancelScope) -> None:
        with anyio.open_signal_receiver(signal.SIGTERM, signal.SIGINT) as signals:
            async for signum in signals:
                logger.info("got %s: stopping running turns", signal.Signals(signum).name)
                scope.cancel()
                return

    def _submit(self, job: Job) -> None:
        assert self.pool is not None
        if self.ledger.is_completed(job.mail_id):
            return
        if self.pool.submit(job.session_id, job):
            self.board.sessions.setdefault(job.session_id, Activity("queued", job.mail_id))
            self._dirty.set()

    async def _events(self, client: AsyncClient, connected: anyio.Event) -> None:
        async with aclosing(client.events(on_connect=connected.set)) as events:
            async for event in events:
                if event.type == RESET:
                    # Events may be gone (a compacted log, a restored backup): the
                    # inbox has every unread mail (docs/behaviour.md#live-events-sse).
                    logger.warning("event stream reset (%s): catching up from the inbox",
                                   event.data.get("reason"))  # fmt: skip
                    await self._catch_up(client)
                    continue
                if event.type == "work_action":
                    self._submit_work(dict(event.data))
                    continue
                if event.type != "new_mail":
                    continue
                data = event.new_mail()
                if data.workspace:
                    self.workspaces.add(data.workspace)
                if not replies.starts_turn(data.type):
                    await _mark_read(client, data.session_id, data.mail_id)
                    continue
                self._submit(Job(data.mail_id, data.session_id))

    def _submit_work(self, action: dict[str, Any]) -> None:
        """An owner's Merge / Discard / Keep, in the session's line (after its turn)."""
        assert self.pool is not None
        session_id, action_id = action.get("session_id"), action.get("id")
        if not isinstance(session_id, str) or not isinstance(action_id, str):
            logger.warning("a work action without session or id: ignored (%r)", action)
            return
        self.pool.submit(session_id, Job(f"work-action:{action_id}", session_id, work=action))

    async def _sweeps(self) -> None:
        """The worktrees' retention: at start, then every hour (docs/review.md)."""
        work = self.work
        if work is None:
            return
        while True:
            assert self.pool is not None
            for session_id in work.active():
                job = Job(f"work-sweep:{session_id}", session_id, work={"action": "sweep"})
                self.pool.submit(session_id, job)
            await anyio.sleep(work.s.sweep_every_s)

    async def _catch_up(self, client: AsyncClient) -> None:
        if self.work is not None:  # owners' actions that waited while the bridge was away
            for action in await self.work.pending():
                self._submit_work(action)
        # Interrupted mail first: in its session it came before anything still
        # unread. It is often no longer unread (reading a mail marks it read).
        for entry in self.ledger.unfinished():
            if entry.session_id:
                self._submit(Job(entry.mail_id, entry.session_id))
        cursor: str | None = None
        while True:
            page = await client.inbox(status="unread", limit=500, cursor=cursor)
            for item in page.items:
                if item.workspace:
                    self.workspaces.add(item.workspace)
                if not replies.starts_turn(item.type):
                    await _mark_read(client, item.session_id, item.id)
                    continue
                self._submit(Job(item.id, item.session_id, backlog=True))
            if not page.next_cursor:
                break
            cursor = page.next_cursor

    async def _heartbeats(self, client: AsyncClient) -> None:
        runner = self.config.runner
        version = await anyio.to_thread.run_sync(runner.version)
        while True:
            self._dirty = anyio.Event()
            self.board.on_change = self._dirty.set
            if self.pool is not None:
                self.pool.on_change = self._dirty.set
            try:
                await client.heartbeat(**(await self._heartbeat_body(version)))
            except ApiError as exc:
                logger.warning("heartbeat failed: %s", exc)
            sent_at = anyio.current_time()
            with anyio.move_on_after(self.config.heartbeat_s):
                await self._dirty.wait()
                await anyio.sleep(max(0.0, sent_at + HEARTBEAT_MIN_GAP_S - anyio.current_time()))

    async def _heartbeat_body(self, version: str | None) -> dict[str, Any]:
        runner = self.config.runner
        known = {s for s in self.sessions.ids.values()}
        recent = await anyio.to_thread.run_sync(runner.recent_sessions, sorted(self.workspaces))
        pool = self.pool
        return {
            "status": "online",
            "platform": runner.platform,
            "version": version,
            "mode_enforcement": self._mode_enforcement(),
            "sandbox": (
                self.config.sandbox.status.as_json()
                if self.config.sandbox is not None
                else {"state": "off", "reason": "sandbox off (--no-sandbox)"}
            ),
            "platform_sessions": [s for s in recent if s["platform_id"] not in known],
            "pending": {
                "queued": pool.queued if pool else 0,
                "running": pool.running if pool else 0,
                "parked": pool.parked if pool else 0,
                "sessions": self.board.snapshot(),
            },
        }


def _job_key(job: Job) -> str:
    return job.mail_id


async def _mark_read(client: AsyncClient, session_id: str, mail_id: str) -> None:
    try:
        await client.mark_read(session_id=session_id, mail_ids=[mail_id])
    except ApiError as exc:
        logger.warning("could not mark mail %s read: %s", mail_id, exc)
