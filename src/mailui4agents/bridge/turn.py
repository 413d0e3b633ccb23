"""One mail, one turn: from the mail to the answer or the failure mail.

:class:`TurnHandler.handle` is what the pool runs for each mail. The order:
ledger check (completed → never again; a result file of the newest attempt →
settled from it, not run again) → record ``delivered`` → read the whole mail in
its session scope → refuse what cannot run (a workspace outside the bridge's
own roots or not here, CLI missing, too many attempts) → prompt → run the CLI
(the platform session id is stored as soon as it is reported) → write the
turn's result file → relay the final text (to a human, when the model did not
mail by itself) or mail the failure → record ``completed`` → remove the result
file.
"""

from __future__ import annotations

import logging
import os
import secrets
import shutil
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any

import anyio

from mailui4agents.bridge import failures, replies
from mailui4agents.bridge.activity import Activity, Board
from mailui4agents.bridge.failures import Failure
from mailui4agents.bridge.ledger import Ledger
from mailui4agents.bridge.outcome import final_text, read_sent, turn_failure
from mailui4agents.bridge.park import ParkServer, ParkState
from mailui4agents.bridge.pool import Slot
from mailui4agents.bridge.process import ProcessResult, run_process
from mailui4agents.bridge.prompt import (
    Attachment,
    PromptInput,
    PromptMail,
    Situation,
    build_prompt,
    earlier_mails,
)
from mailui4agents.bridge.results import Results, TurnResult
from mailui4agents.bridge.runners.base import (
    Denied,
    Launch,
    MailSent,
    Runner,
    SessionStarted,
    TurnContext,
    TurnEvent,
)
from mailui4agents.bridge.sandbox import ENV_FLAG, Box, Sandbox
from mailui4agents.bridge.session_map import SessionMap
from mailui4agents.bridge.work import WorkKeeper
from mailui4agents.bridge.workspace_roots import WorkspaceRoots
from mailui4agents.bridge.worktrees import GitError, Snapshot, Worktree

if TYPE_CHECKING:  # prometheus_client only when --metrics-port is given
    from mailui4agents.bridge.metrics import BridgeMetrics
from mailui4agents.client import ApiError, AsyncClient, MailOut
from mailui4agents.domain.modes import Enforcement, Mode, mode_for_deciding
from mailui4agents.domain.times import rfc3339
from mailui4agents.wire.models import Duplicate

logger = logging.getLogger(__name__)

NEWS_MAILS = 5  # mails shown to a model whose decision arrived
NEWS_BODY_CHARS = 240
#: Environment a turn must not inherit: a person's token, or the interactive hook's owner.
NOT_INHERITED = ("AGENTMAIL_TOKEN", "AGENTMAIL_OWNER", "AGENTMAIL_HOOK_TIMEOUT")


@dataclass(frozen=True)
class Job:
    """One mail to handle. ``backlog``: found by the start-up catch-up."""

    mail_id: str
    session_id: str
    backlog: bool = False
    #: When the bridge learnt of the mail (wall clock), for the timing log.
    seen_at: float = field(default_factory=time.time, compare=False)
    #: Not a mail: an owner's work action (``{"id", "action", ...}``) or the
    #: retention sweep (``{"action": "sweep"}``) of the session's worktree, queued
    #: in the session's line so it never overlaps a turn (docs/review.md).
    work: dict[str, Any] | None = field(default=None, compare=False)


@dataclass
class TurnSettings:
    agent: str
    url: str
    key: str
    state_dir: Path
    turn_timeout_s: float = 1800.0
    hook_timeout_s: float = 540.0
    max_attempts: int = 3
    retry_delays_s: tuple[float, ...] = (5.0, 30.0, 120.0)
    #: Where turns may run (the CLI's default: $HOME/**); none: nowhere.
    workspace_roots: WorkspaceRoots = field(default_factory=lambda: WorkspaceRoots(()))


def is_folder(path: Path) -> bool:
    """An absolute path to an existing folder on this machine (a quick stat)."""
    return path.is_absolute() and path.is_dir()


def name_of(address: str) -> str:
    return address.split("@", 1)[0]


class TurnHandler:
    """Runs jobs; shared by every turn of one bridge."""

    def __init__(
        self,
        settings: TurnSettings,
        runner: Runner,
        client: AsyncClient,
        ledger: Ledger,
        sessions: SessionMap,
        park: ParkServer,
        board: Board,
        results: Results | None = None,
        metrics: BridgeMetrics | None = None,
        sandbox: Sandbox | None = None,
        work: WorkKeeper | None = None,
    ) -> None:
        self.s = settings
        self.sandbox = sandbox
        #: Worktrees and work mail (docs/review.md); None: turns run in the workspace.
        self.work = work
        self.results = results or Results.open(settings.state_dir / "results")
        self.runner = runner
        self.client = client
        self.ledger = ledger
        self.sessions = sessions
        self.park = park
        self.board = board
        self.metrics = metrics  # --metrics-port (bridge/metrics.py)

    # -- the pool's entry point ---------------------------------------------------------

    async def handle(self, job: Job, slot: Slot) -> None:
        if job.work is not None:
            await self._work(job.work, job.session_id)
            return
        try:
            await self._handle(job, slot)
        finally:
            if self.board.sessions.get(job.session_id, Activity("", "")).state != "failed":
                self.board.clear(job.session_id)

    async def _work(self, work: dict[str, Any], session_id: str) -> None:
        if self.work is None:
            return
        if work.get("action") == "sweep":
            await self.work.sweep(session_id)
        else:
            await self.work.act(work)

    async def _handle(self, job: Job, slot: Slot) -> None:
        while await self._attempt(job, slot):
            pass  # a failure worth retrying: _attempt waited out the backoff

    async def _attempt(self, job: Job, slot: Slot) -> bool:
        """One attempt at the mail; True when it should be tried again."""
        if self.ledger.is_completed(job.mail_id):
            self.results.drop(job.mail_id)  # the bridge died before it removed it
            await self._mark_read(job)
            return False
        saved = self._saved_result(job)
        if saved is not None:
            return await self._recover(job, saved)
        started_at = time.time()
        entry = self.ledger.get(job.mail_id)
        interrupted = self.ledger.was_interrupted(job.mail_id)
        give_up = entry.attempts >= self.s.max_attempts
        if not give_up:
            # Before the read: reading marks the mail read, so a crash right after
            # it must find the mail in the ledger or it would never come back.
            self.ledger.delivered(job.mail_id, job.session_id)
        try:
            mail = await self.client.read_mail(job.mail_id, session_id=job.session_id, body_limit=0)
        except ApiError as exc:
            if exc.permanent or give_up:
                logger.warning("mail %s cannot be read (%s): dropped", job.mail_id, exc)
                self.ledger.completed(job.mail_id, f"unreadable: {exc.status}")
                return False
            return await self._retry_later(job, f"the gateway: {exc}")
        if not replies.starts_turn(mail.type):
            self.ledger.completed(job.mail_id, "no_turn")
            await self._mark_read(job)
            return False
        if give_up:
            await self._fail(
                mail,
                Failure("gave_up", f"{entry.attempts} attempts, the last: {entry.outcome}"),
            )
            return False
        workspace = await self._workspace(mail)
        if workspace is None:
            return False
        missing = self.runner.missing()
        if missing is not None:
            await self._fail(mail, Failure("cli_missing", missing))
            return False
        wt: Worktree | None = None
        before: Snapshot | None = None
        if self.work is not None:
            try:
                wt, before = await self.work.prepare(mail, workspace)
            except (GitError, OSError) as exc:
                return await self._retry_later(job, f"the session's worktree: {exc}")
        read_at = time.time()
        situation = await self._situation(job, mail, interrupted)
        result, platform_id, sent = await self._run(job, slot, mail, workspace, situation, wt)
        exited_at = time.time()
        outcome = self._outcome(job, result, platform_id, sent)
        # Before the answer: the thread shows what changed, then what was said.
        if wt is not None and before is not None and not self._will_retry(job, outcome):
            assert self.work is not None  # wt comes from it
            await self.work.after(mail, wt, before)
        if self.metrics is not None:
            failed = outcome.failure
            self.metrics.turn("done" if failed is None else failed.kind, exited_at - read_at)
        # Before anything is posted or recorded: from here on a crash costs no second run.
        self.results.save(outcome)
        again = await self._settle(job, mail, outcome)
        logger.debug(
            "timing mail=%s seen=%.6f start=%.6f read=%.6f spawn=%.6f exit=%.6f done=%.6f",
            job.mail_id, job.seen_at, started_at, read_at, result.spawned_at or 0.0,
            exited_at, time.time(),
        )  # fmt: skip
        return again

    def _saved_result(self, job: Job) -> TurnResult | None:
        """The result file of the mail's newest attempt, if the bridge died before it
        settled the mail (a file of an older attempt is stale: dropped)."""
        saved = self.results.load(job.mail_id)
        if saved is None:
            return None
        if saved.attempt != self.ledger.get(job.mail_id).attempts:
            self.results.drop(job.mail_id)
            return None
        return saved

    async def _recover(self, job: Job, saved: TurnResult) -> bool:
        """Settle a mail whose CLI had finished before the bridge died, from its
        result file: the reply or failure mail is posted, the CLI not run again."""
        logger.info(
            "mail %s: its turn (attempt %d) had finished before the bridge stopped; "
            "settled from its result file, not run again",
            job.mail_id, saved.attempt,
        )  # fmt: skip
        try:
            mail = await self.client.read_mail(job.mail_id, session_id=job.session_id, body_limit=0)
        except ApiError as exc:
            if exc.permanent:
                logger.warning("mail %s cannot be read (%s): dropped", job.mail_id, exc)
                self.ledger.completed(job.mail_id, f"unreadable: {exc.status}")
                self.results.drop(job.mail_id)
                return False
            # The result file stays: the answer exists, only posting it is left.
            return await self._retry_later(job, f"the gateway: {exc}")
        return await self._settle(job, mail, saved)

    async def _workspace(self, mail: MailOut) -> Path | None:
        """The workspace to run in, resolved; None once the turn was refused.

        The bridge's own roots come first, on the resolved path (a symlink is judged
        by where it points): a sender learns nothing of what exists outside them."""
        where = mail.workspace or ""
        if not where.startswith("/"):
            detail = f"workspace {where} is not an absolute path" if where else "no workspace"
            await self._fail(mail, Failure("workspace_missing", detail))
            return None
        real, inside = self.s.workspace_roots.check(where)
        if not inside:
            shown = where if real == where else f"{where} (resolved: {real})"
            detail = (
                f"workspace {shown} is outside this bridge's workspace roots: "
                f"{self.s.workspace_roots.describe()}"
            )
            await self._fail(mail, Failure("workspace_not_allowed", detail))
            return None
        if not is_folder(Path(real)):
            await self._fail(
                mail, Failure("workspace_missing", f"workspace {where} is not a folder here")
            )
            return None
        return Path(real)

    async def _retry_later(self, job: Job, why: str, *, recorded: bool = False) -> bool:
        """Record a failed attempt (unless ``recorded``) and wait out its backoff;
        True: try again."""
        if not recorded:
            self.ledger.failed(job.mail_id, why[:300])
        attempts = self.ledger.get(job.mail_id).attempts
        delay = self.s.retry_delays_s[min(attempts - 1, len(self.s.retry_delays_s) - 1)]
        logger.warning("mail %s: attempt %d failed (%s); retrying in %g s",
                       job.mail_id, attempts, why[:200], delay)  # fmt: skip
        self.board.set(job.session_id, Activity("failed", job.mail_id, reason=why[:300]))
        await anyio.sleep(delay)
        return True

    # -- parts ---------------------------------------------------------------------------

    async def _situation(self, job: Job, mail: MailOut, interrupted: bool) -> Situation:
        if interrupted:
            return Situation.INTERRUPTED
        if mail.parent_mail_id and await self._is_own(mail.parent_mail_id, job.session_id):
            return Situation.REPLY_TO_OWN
        if job.backlog:
            return Situation.BACKLOG
        if self._platform_session(mail) is not None or any(
            e.session_id == job.session_id and e.completed for e in self.ledger.entries.values()
        ):
            return Situation.CONTINUING
        return Situation.NEW_TASK

    async def _is_own(self, mail_id: str, session_id: str) -> bool:
        if mail_id in self.ledger.own_mail:
            return True  # a relay of ours, or mail a turn's model sent itself
        try:
            parent = await self.client.read_mail(mail_id, session_id=session_id, body_limit=1)
        except ApiError:
            return False
        return name_of(parent.from_) == self.s.agent

    async def _earlier(self, mail: MailOut) -> tuple[str, ...]:
        """The session's mails before ``mail``, for a runner that cannot resume
        (bridge/prompt.py ``earlier_mails``); none when the thread cannot be read
        (the turn still runs, on the mail alone)."""
        try:
            thread = (await self.client.thread(mail.id, session_id=mail.session_id)).items
        except ApiError:
            return ()
        before = [m for m in thread if m.id != mail.id and m.created_at <= mail.created_at]
        return earlier_mails([(name_of(m.from_), m.subject, m.body) for m in before])

    def _platform_session(self, mail: MailOut) -> str | None:
        known = self.sessions.get(mail.session_id)
        if known:
            return known
        adopted = mail.platform_session_id
        if adopted:
            prefix = f"{self.runner.platform}:"
            return adopted[len(prefix) :] if adopted.startswith(prefix) else adopted
        return None

    def _will_retry(self, job: Job, outcome: TurnResult) -> bool:
        """A failure that is tried again (:meth:`_settle`); the work mail waits for
        the last attempt."""
        failure = outcome.failure
        return (
            failure is not None
            and not failure.permanent
            and self.ledger.get(job.mail_id).attempts < self.s.max_attempts
        )

    async def _run(
        self,
        job: Job,
        slot: Slot,
        mail: MailOut,
        workspace: Path,
        situation: Situation,
        wt: Worktree | None = None,
    ) -> tuple[ProcessResult, str | None, list[str]]:
        mode = mode_for_deciding(mail.permission_mode)
        if wt is not None:
            workspace = wt.cwd()  # the turn works in the session's own worktree
        platform_id = self._platform_session(mail)
        token = secrets.token_hex(16)
        turn_dir = self.s.state_dir / "turns" / token
        turn_dir.mkdir(parents=True, mode=0o700)
        env = {k: v for k, v in os.environ.items() if k not in NOT_INHERITED}
        env.update(
            AGENTMAIL_URL=self.s.url,
            AGENTMAIL_KEY=self.s.key,
            AGENTMAIL_AGENT=self.s.agent,
            AGENTMAIL_SESSION_ID=job.session_id,
            AGENTMAIL_MAIL_ID=job.mail_id,
            AGENTMAIL_PERMISSION_MODE=mode,
            AGENTMAIL_PLATFORM_SESSION_ID=platform_id or "",
            AGENTMAIL_HOOK_TIMEOUT=f"{self.s.hook_timeout_s:g}",
            AGENTMAIL_BRIDGE_SOCKET=str(self.park.path),
            AGENTMAIL_BRIDGE_TURN=token,
            AGENTMAIL_SENT_LOG=str(turn_dir / "sent.log"),
        )
        env.pop(ENV_FLAG, None)  # only this bridge's own proof may set it
        box, check = None, None
        if self.sandbox is not None:
            writable = list(self.runner.sandbox_writable(env, self.s.state_dir))
            if wt is not None and self.work is not None and mode == "workspace":
                writable += self.work.sandbox_writable(wt)  # so the agent can commit
            box, check = await self.sandbox.for_turn(
                mode, Path(wt.path) if wt is not None else workspace, turn_dir, env,
                unsupported=self.runner.sandbox_unsupported(),
                writable=writable,
                ports=self.runner.model_ports(env),
            )  # fmt: skip
        prompt = build_prompt(
            PromptInput(
                mail=prompt_mail(mail, str(workspace), wt),
                situation=situation,
                mode=mode,
                enforcement=self._enforcement(mode, box),
                agent=self.s.agent,
                earlier=await self._earlier(mail) if not self.runner.resumes else (),
                sandboxed=box is not None and mode != "full",
            )
        )
        ctx = TurnContext(
            agent=self.s.agent,
            mail_id=job.mail_id,
            session_id=job.session_id,
            mode=mode,
            workspace=workspace,
            platform_session_id=platform_id,
            prompt=prompt,
            base_env=env,
            turn_dir=turn_dir,
            hook_timeout_s=self.s.hook_timeout_s,
            sandboxed=box is not None,
        )
        running = Activity("running", job.mail_id)
        self.board.set(job.session_id, running)

        def parked(state: ParkState) -> None:
            if state.parked:
                slot.park()
                self.board.set(
                    job.session_id, Activity("parked", job.mail_id, request_id=state.request_id)
                )
            else:
                slot.unpark()
                self.board.set(job.session_id, Activity("running", job.mail_id))

        def seen(event: TurnEvent) -> None:
            if isinstance(event, SessionStarted):
                self.sessions.set(job.session_id, event.id)

        async def news() -> str:
            return await self._news(job)

        started: list[int] = []

        def spawned(pid: int) -> None:
            started.append(pid)
            self.ledger.started(job.mail_id, pid, _ticks(pid))

        park = ParkState(on_change=parked, news=news)
        self.park.turns[token] = park
        try:
            launch = self.runner.launch(ctx)
            if box is not None and self.sandbox is not None:
                wrapped = self.sandbox.wrap(box, launch.argv, check)
                launch = Launch(wrapped, launch.env, launch.stdin)
            logger.info(
                "turn for mail %s (session %s, %s, mode %s, %s)",
                job.mail_id, job.session_id, situation.value, mode,
                f"resuming {platform_id}" if platform_id else "new platform session",
            )  # fmt: skip
            result = await run_process(
                launch,
                workspace,
                self.runner.parser(),
                timeout_s=self.s.turn_timeout_s,
                park=park,
                on_event=seen,
                on_spawn=spawned,
            )
        finally:
            self.park.turns.pop(token, None)
            if park.parked:
                slot.unpark()
            result_sent = read_sent(turn_dir / "sent.log")
            if check is not None and self.sandbox is not None:
                self.sandbox.settle(check, ran=bool(started))
            shutil.rmtree(turn_dir, ignore_errors=True)
        return result, platform_id, result_sent

    def _enforcement(self, mode: Mode, box: Box | None) -> Enforcement:
        """A proven boundary is the kernel's: native in plan and workspace."""
        if box is not None and mode != "full":
            return "native"
        return self.runner.enforcement(mode)

    async def _news(self, job: Job) -> str:
        """Mail that reached the session while its turn waited for a human (unread,
        not marked read here: each is still delivered as a turn of its own)."""
        try:
            page = await self.client.inbox(
                status="unread", session_id=job.session_id, mark_read=False, limit=NEWS_MAILS
            )
        except ApiError as exc:
            logger.warning("could not list the mail of session %s: %s", job.session_id, exc)
            return ""
        items = [m for m in page.items if m.id != job.mail_id and replies.starts_turn(m.type)]
        if not items:
            return ""
        lines = [
            f"While you waited, {len(items)} more mail(s) reached this session. Each will "
            "also be delivered to you as a task of its own after this turn; take it into "
            "account now if it changes what you are doing:"
        ]
        for m in items:
            body = " ".join(m.body.split())
            if len(body) > NEWS_BODY_CHARS:
                body = body[:NEWS_BODY_CHARS] + "…"
            lines.append(f"- from {m.from_}, subject {m.subject!r}: {body}")
        return "\n".join(lines)

    def _outcome(
        self, job: Job, result: ProcessResult, platform_id: str | None, sent_ids: list[str]
    ) -> TurnResult:
        """What the CLI's run came to, as the result file keeps it."""
        attempt = self.ledger.get(job.mail_id).attempts
        # A retry resumes the session its own first attempt created: that is no
        # failure to resume an earlier conversation.
        resumed = platform_id is not None and attempt == 1
        failure = turn_failure(result, resumed=resumed, runner=self.runner)
        denied = [e for e in result.events if isinstance(e, Denied)]
        if failure is None and denied:  # read from the stream: the exit code is 0 all the same
            logger.info("mail %s: denied by the hook: %d call(s) (%s)", job.mail_id, len(denied),
                        "; ".join(f"{d.tool}: {d.reason[:80]}" for d in denied))  # fmt: skip
        return TurnResult(
            mail_id=job.mail_id,
            attempt=attempt,
            failure=failure,
            text=final_text(result.events),
            sent=tuple(sent_ids),
            model_sent=bool(sent_ids) or any(isinstance(e, MailSent) for e in result.events),
        )

    async def _settle(self, job: Job, mail: MailOut, outcome: TurnResult) -> bool:
        """Post what the turn came to and record it; its result file goes last."""
        failure = outcome.failure
        if failure is not None:
            if not self._will_retry(job, outcome):
                if not failure.permanent:
                    failure = Failure("gave_up", failure.detail)
                await self._fail(mail, failure)
                return False
            self.ledger.failed(job.mail_id, f"{failure.kind}: {failure.detail}"[:300])
            self.results.drop(job.mail_id)
            return await self._retry_later(job, f"{failure.kind}: {failure.detail}", recorded=True)
        own = list(outcome.sent)
        if replies.auto_relay_applies(
            from_human=mail.from_human, model_sent_mail=outcome.model_sent
        ):
            relay_id = await self._relay(mail, outcome.text)
            own += [relay_id] if relay_id else []
            result = "answered"
        else:
            result = "mailed_itself" if outcome.model_sent else "no_relay"
        # No mark-read call: reading the mail at the start of the attempt marked it.
        self.ledger.completed(job.mail_id, result, own)
        self.results.drop(job.mail_id)
        return False

    async def _relay(self, mail: MailOut, text: str) -> str | None:
        body = text.strip() or "(The agent finished this turn without a written answer.)"
        body = replies.clamp_utf8(body, replies.BODY_MAX_BYTES, "\n\n[answer cut: too long]")
        return await self._send(
            mail,
            subject=replies.reply_subject(mail.subject),
            body=body,
            key=replies.relay_key(self.s.agent, mail.id),
            mail_type=None,
        )

    async def _fail(self, mail: MailOut, failure: Failure) -> None:
        """Mail the sender why the turn could not run, and finish the mail."""
        logger.warning("mail %s: %s (%s)", mail.id, failure.kind, failure.detail[:300])
        self.board.set(
            mail.session_id, Activity("failed", mail.id, reason=f"{failure.kind}: {failure.detail}")
        )
        await self._send(
            mail,
            subject=replies.clamp_utf8(
                failures.failure_subject(failure.kind, mail.subject), replies.SUBJECT_MAX_BYTES
            ),
            body=failures.failure_body(failure, agent=self.s.agent, subject=mail.subject),
            key=replies.failure_key(self.s.agent, mail.id, failure.kind),
            mail_type="failure",
        )
        self.ledger.completed(mail.id, f"failed: {failure.kind}")
        self.results.drop(mail.id)
        await self._mark_read(Job(mail.id, mail.session_id))

    async def _send(
        self, mail: MailOut, *, subject: str, body: str, key: str, mail_type: str | None
    ) -> str | None:
        """Post a relay (idempotent by ``key``); its mail id, or None if refused."""
        to = mail.reply_address or mail.from_
        for delay in (*self.s.retry_delays_s[:2], None):
            try:
                sent = await self.client.send_mail(
                    [to],
                    subject,
                    body,
                    parent_mail_id=mail.id,
                    relay=True,
                    relay_key=key,
                    from_session_id=mail.session_id,
                    mail_type=mail_type,
                )
                return str(sent.mail_id) if isinstance(sent, Duplicate) else sent.id
            except ApiError as exc:
                if exc.permanent or delay is None:
                    logger.error("could not send the reply to mail %s: %s", mail.id, exc)
                    return None
                await anyio.sleep(delay)
        return None

    async def _mark_read(self, job: Job) -> None:
        try:
            await self.client.mark_read(session_id=job.session_id, mail_ids=[job.mail_id])
        except ApiError as exc:
            logger.warning("could not mark mail %s read: %s", job.mail_id, exc)


def _ticks(pid: int) -> int | None:
    from mailui4agents.bridge.process import start_ticks

    return start_ticks(pid)


def prompt_mail(mail: MailOut, workspace: str, wt: Worktree | None = None) -> PromptMail:
    return PromptMail(
        worktree=(wt.branch, wt.base_branch, wt.repo) if wt is not None else None,
        mail_id=mail.id,
        session_id=mail.session_id,
        session_alias=mail.session_alias,
        workspace=workspace,
        sender=mail.from_,
        from_human=mail.from_human is True,
        to=tuple(mail.to),
        cc=tuple(mail.cc),
        subject=mail.subject,
        body=mail.body,
        created_at=rfc3339(mail.created_at),
        reply_address=mail.reply_address,
        self_address=mail.self_address,
        attachments=tuple(
            Attachment(a.attachment_id, a.name, a.size, a.content_type) for a in mail.attachments
        ),
        in_reply_to=mail.parent_mail_id,
    )
