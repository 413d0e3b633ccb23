"""The kernel-enforced sandbox of a bridge turn (docs/sandbox.md).

Two layers, both set up before the agent CLI starts and kept by every process
it starts: bubblewrap gives the turn a mount namespace in which everything is
read-only except what the mode makes writable (a write elsewhere fails with
EROFS), and inside it :mod:`mailui4agents.bridge.sandbox_exec` applies a
Landlock ruleset (writes elsewhere fail with EACCES; TCP connects only to the
allowed ports) and execs the CLI.

Per mode (:func:`writable_for`): ``plan`` — nothing the agent works on is
writable, the workspace neither; ``workspace`` — the workspace; ``full`` —
everything. In every mode the per-turn folder, the CLI's own state folders and
a few devices stay writable (the CLI cannot run otherwise), and the protected
paths (domain/protected.py) are mounted read-only on top, whatever the mode.

The boundary is *proven*, never assumed: :meth:`Sandbox.prove` runs the very
wrapper a turn uses with the launcher in probe mode, and only when a canary
write outside the boundary fails with EROFS/EACCES/EPERM and one inside
succeeds is the turn run confined and told so (``AGENTMAIL_SANDBOX=proven``,
workspace and plan only: hooks pass it on and the gateway lets workspace
mode allow guarded calls without asking). Anything else — bwrap missing, user
namespaces off, an old kernel, a canary that got through — runs the turn as
before, with the runner's own enforcement, every guarded call asked, and the
reason in the log and the heartbeat.
"""

from __future__ import annotations

import logging
import os
import secrets
import shutil
import subprocess
import sys
import time
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Literal
from urllib.parse import urlsplit

import anyio

import mailui4agents
from mailui4agents.bridge import sandbox_exec
from mailui4agents.domain.modes import Mode
from mailui4agents.domain.protected import protected_paths

logger = logging.getLogger(__name__)

LAUNCHER = Path(sandbox_exec.__file__).resolve()
#: The env variable a turn's hooks read; set only for a proven boundary.
ENV_FLAG = "AGENTMAIL_SANDBOX"
PROVEN = "proven"
PROBE_TIMEOUT_S = 20.0
#: Errors that show the kernel refused a write.
REFUSED = frozenset({"EROFS", "EACCES", "EPERM"})
#: Devices a CLI writes to in every mode (Landlock rules on single files).
DEVICES = ("/dev/null", "/dev/zero", "/dev/full", "/dev/tty", "/dev/ptmx", "/dev/pts",
           "/dev/random", "/dev/urandom")  # fmt: skip
#: Environment variables whose URL names the model provider (its port stays reachable).
MODEL_URL_VARS = ("ANTHROPIC_BASE_URL", "OPENAI_BASE_URL", "GOOGLE_GEMINI_BASE_URL",
                  "GEMINI_API_BASE_URL", "OPENAI_API_BASE", "DEEPSEEK_BASE_URL")  # fmt: skip
HTTPS_PORT = 443
MAX_PORTS = 64
State = Literal["proven", "unavailable", "off"]


@dataclass(frozen=True)
class Network:
    """``--sandbox-network``: ``allow`` (TCP anywhere), ``deny`` (only the gateway
    and the model provider), or a list of extra TCP ports; None = per mode."""

    kind: Literal["allow", "deny", "list"]
    ports: tuple[int, ...] = ()

    @classmethod
    def parse(cls, value: str) -> Network:
        value = value.strip()
        if value in ("allow", "deny"):
            return cls(value)  # type: ignore[arg-type]
        ports: list[int] = []
        for part in value.split(","):
            part = part.strip()
            if not part.isdigit() or not 0 < int(part) < 65536:
                raise ValueError(
                    f"{part!r} is not a TCP port: use allow, deny or a comma-separated "
                    "list of ports such as 443,8080"
                )
            ports.append(int(part))
        if not ports or len(ports) > MAX_PORTS:
            raise ValueError(f"give between 1 and {MAX_PORTS} ports")
        return cls("list", tuple(sorted(set(ports))))

    def describe(self) -> str:
        return ",".join(map(str, self.ports)) if self.kind == "list" else self.kind


def network_for(mode: Mode, setting: Network | None) -> Network:
    """The network of a turn: the bridge's setting, else allow in workspace and
    full and deny in plan (docs/sandbox.md, "Network")."""
    if setting is not None:
        return setting
    return Network("deny") if mode == "plan" else Network("allow")


def url_port(url: str) -> int | None:
    try:
        parts = urlsplit(url)
        port = parts.port
    except ValueError:
        return None
    if port is not None:
        return port
    return {"https": 443, "http": 80}.get(parts.scheme)


@dataclass(frozen=True)
class Box:
    """The boundary of one turn."""

    mode: Mode
    workspace: Path
    turn_dir: Path
    writable: tuple[str, ...]  # beneath these: writable (besides the devices)
    read_only: tuple[str, ...]  # protected paths mounted read-only on top
    ports: tuple[int, ...] | None  # TCP connect allowed to these; None: anywhere
    write_all: bool  # full mode: Landlock leaves the file system alone

    @property
    def tmp_dir(self) -> Path:
        return self.turn_dir / "tmp"

    @property
    def state_dir(self) -> Path:
        """The bridge's state dir (the turn folder is STATE/turns/TOKEN)."""
        return Path(os.path.realpath(self.turn_dir.parent.parent))


@dataclass
class Status:
    """What the heartbeat reports about the sandbox (docs/api.md, heartbeat)."""

    state: State
    reason: str | None = None

    def as_json(self) -> dict[str, str | None]:
        return {"state": self.state, "reason": self.reason}


@dataclass(frozen=True)
class Check:
    """The canaries a turn's own launcher tries before it starts the CLI."""

    deny: list[str]
    allow: list[str]
    report: Path
    env_flag: bool


@dataclass
class Proof:
    ok: bool
    reason: str | None = None
    seconds: float = 0.0


@dataclass
class Sandbox:
    """The bridge's sandbox settings and what it last proved."""

    enabled: bool = True
    network: Network | None = None
    extra_writable: tuple[str, ...] = ()
    bwrap: str = "bwrap"
    data_dir: str | None = None
    status: Status = field(default_factory=lambda: Status("unavailable", "not proven yet"))
    #: Called when :attr:`status` changes (the bridge sends a heartbeat).
    on_change: Callable[[], None] = lambda: None

    # -- the boundary of a turn -------------------------------------------------------

    def box(
        self,
        mode: Mode,
        workspace: Path,
        turn_dir: Path,
        state_dirs: Sequence[str],
        env: Mapping[str, str],
        model_ports: Sequence[int] = (),
    ) -> Box:
        home = env.get("HOME") or str(Path.home())
        protected = protected_paths(
            self.data_dir or env.get("AGENTMAIL_DATA_DIR"),
            [],
            home=home,
            env=env,
            package_dir=str(Path(mailui4agents.__file__).resolve().parent),
        )
        own = [str(turn_dir), *state_dirs, *self.extra_writable]
        if mode == "workspace":
            own.insert(0, str(workspace))
        net = network_for(mode, self.network)
        ports: tuple[int, ...] | None = None
        if net.kind != "allow":
            wanted = {HTTPS_PORT, *model_ports, *net.ports}
            for url in [env.get("AGENTMAIL_URL", ""), *(env.get(v, "") for v in MODEL_URL_VARS)]:
                port = url_port(url) if url else None
                if port is not None:
                    wanted.add(port)
            ports = tuple(sorted(wanted))
        # Protected paths are read-only on top of every writable mount, even the
        # workspace's own hook settings (domain/protected.py).
        read_only = [p for p in protected if os.path.lexists(p)]
        for root in dict.fromkeys([str(workspace), *own]):  # the workspace in every mode
            for rel in (".claude/settings.json", ".claude/settings.local.json",
                        ".gemini/settings.json"):  # fmt: skip
                candidate = os.path.join(root, rel)
                if os.path.lexists(candidate) and candidate not in read_only:
                    read_only.append(candidate)
        return Box(
            mode=mode,
            workspace=workspace,
            turn_dir=turn_dir,
            writable=tuple(_existing(own)),
            read_only=tuple(read_only),
            ports=ports,
            write_all=mode == "full",
        )

    def bwrap_argv(self, box: Box) -> list[str]:
        """bubblewrap's part of the wrapper: the mounts, then the launcher."""
        argv = [self.bwrap, "--die-with-parent"]
        argv += ["--bind", "/", "/"] if box.write_all else ["--ro-bind", "/", "/"]
        argv += ["--dev-bind", "/dev", "/dev", "--tmpfs", "/dev/shm"]
        if not box.write_all:
            for path in box.writable:
                argv += ["--bind", path, path]
        # The bridge's own state (ledger, session map, results) is no business of
        # the agent's, even inside a workspace that contains it (a workspace of
        # $HOME): read-only on top, then what the turn writes there again.
        state = str(box.state_dir)
        if os.path.isdir(state):
            argv += ["--ro-bind", state, state]
            for path in box.writable:
                if path.startswith(state + os.sep):
                    argv += ["--bind", path, path]
        for path in box.read_only:
            argv += ["--ro-bind", path, path]
        return argv

    def launcher_argv(self, box: Box) -> list[str]:
        argv = [sys.executable, "-I", "-S", str(LAUNCHER)]
        if box.write_all:
            argv.append("--write-all")
        else:
            for path in (*box.writable, *DEVICES, "/dev/shm"):
                argv += ["--write", path]
        if box.ports is None:
            argv.append("--net-all")
        else:
            for port in box.ports:
                argv += ["--connect", str(port)]
        return argv

    def wrap(self, box: Box, argv: Sequence[str], check: Check | None = None) -> list[str]:
        """The command line that runs ``argv`` inside ``box``; with ``check``, the
        launcher tries the canaries first and vouches for the boundary itself."""
        launcher = self.launcher_argv(box)
        if check is not None:
            for path in check.deny:
                launcher += ["--probe-deny", path]
            for path in check.allow:
                launcher += ["--probe-allow", path]
            launcher += ["--report", str(check.report)]
            if check.env_flag:
                launcher += ["--proven-env", ENV_FLAG]
        return [*self.bwrap_argv(box), "--", *launcher, "--", *argv]

    def turn_check(self, box: Box) -> Check | None:
        """The fast path of a turn's proof, or None when a separate probe must run
        first: once proven, a turn proves its own boundary in its launcher, before
        the CLI starts (one sandbox start instead of two, bench/sandbox.py), and
        only a passing canary hands ``AGENTMAIL_SANDBOX=proven`` on."""
        if self.status.state != "proven" or self.unavailable() is not None:
            return None
        deny, allow = self.canaries(box)
        report = box.turn_dir / "sandbox-proof"
        return Check(deny, allow, report, env_flag=box.mode != "full")

    def settle(self, check: Check, ran: bool) -> Proof:
        """After a turn that proved itself: what its launcher found (the heartbeat
        and the next turn learn of a failure). ``ran``: the CLI was started."""
        try:
            text = check.report.read_text()
        except OSError:
            if not ran:
                return Proof(ok=True)  # the turn never started: nothing was learnt
            return self._record(
                Proof(ok=False, reason="sandbox unavailable: the turn's launcher did not report")
            )
        return self._record(judge_report(text, check.deny, check.allow))

    # -- the proof --------------------------------------------------------------------

    def unavailable(self) -> str | None:
        """Why no sandbox can be set up here at all, or None."""
        if not self.enabled:
            return "sandbox off (--no-sandbox)"
        if not sys.platform.startswith("linux"):
            return f"sandbox unavailable: {sys.platform} is not Linux"
        if shutil.which(self.bwrap) is None:
            return "sandbox unavailable: bwrap not installed (Debian package bubblewrap)"
        if _userns_off():
            return "sandbox unavailable: user namespaces are off (kernel.unprivileged_userns_clone)"
        abi = sandbox_exec.abi_version()
        if abi < sandbox_exec.MIN_ABI:
            return (
                f"sandbox unavailable: Landlock ABI {abi}, needs {sandbox_exec.MIN_ABI} "
                "(Linux 6.7 with Landlock enabled)"
            )
        return None

    def canaries(self, box: Box) -> tuple[list[str], list[str]]:
        """Paths that must refuse a new file, and paths that must take one."""
        tag = f".agentmail-canary-{secrets.token_hex(6)}"
        outside = box.state_dir / "canary"  # the bridge's state: read-only in every mode
        outside.mkdir(parents=True, exist_ok=True, mode=0o700)
        package = Path(mailui4agents.__file__).resolve().parent  # protected in every mode
        deny = [str(package / tag), str(outside / tag)]
        allow = [str(box.tmp_dir / tag)]
        (deny if box.mode == "plan" else allow).append(str(box.workspace / tag))
        return deny, allow

    async def prove(self, box: Box) -> Proof:
        """Run the canaries through the turn's own wrapper; updates :attr:`status`."""
        why = self.unavailable()
        if why is not None:
            return self._record(Proof(ok=False, reason=why))
        box.tmp_dir.mkdir(parents=True, exist_ok=True, mode=0o700)
        deny, allow = self.canaries(box)
        argv = [*self.bwrap_argv(box), "--", *self.launcher_argv(box), "--probe"]
        for path in deny:
            argv += ["--probe-deny", path]
        for path in allow:
            argv += ["--probe-allow", path]
        started = time.perf_counter()
        try:
            with anyio.fail_after(PROBE_TIMEOUT_S):
                done = await anyio.run_process(argv, check=False, cwd=box.workspace)
        except (OSError, TimeoutError) as exc:
            return self._record(
                Proof(ok=False, reason=f"sandbox unavailable: the probe failed ({exc})")
            )
        seconds = time.perf_counter() - started
        return self._record(_judge(done, deny, allow, seconds))

    def refuse(self, reason: str) -> None:
        """No sandbox for this runner (its tools do not run in the turn's process)."""
        self._record(Proof(ok=False, reason=reason))

    async def for_turn(
        self,
        mode: Mode,
        workspace: Path,
        turn_dir: Path,
        env: dict[str, str],
        *,
        unsupported: str | None,
        writable: Sequence[str],
        ports: Sequence[int],
    ) -> tuple[Box | None, Check | None]:
        """The turn's boundary, or None (then the turn runs as before and every
        guarded call is asked: docs/sandbox.md, "Fallback"). `unsupported`: the
        runner's reason it cannot be confined. A proven boundary in plan or
        workspace mode is told to the turn's hooks (``AGENTMAIL_SANDBOX``): by the
        bridge after a separate probe, or — once the sandbox was proven — by the
        turn's own launcher after its canaries (the ``Check``)."""
        if unsupported is not None:
            self.refuse(unsupported)
            return None, None
        box = self.box(mode, workspace, turn_dir, writable, env, ports)
        box.tmp_dir.mkdir(parents=True, exist_ok=True, mode=0o700)
        check = self.turn_check(box)
        if check is None:
            proof = await self.prove(box)
            if not proof.ok:
                return None, None
            if mode != "full":  # full mode writes anywhere: nothing to vouch for
                env[ENV_FLAG] = PROVEN
        env["TMPDIR"] = str(box.tmp_dir)
        return box, check

    def _record(self, proof: Proof) -> Proof:
        before = self.status
        if proof.ok:
            self.status = Status("proven", None)
        else:
            state: State = "off" if not self.enabled else "unavailable"
            self.status = Status(state, proof.reason)
            if before.reason != proof.reason:
                logger.warning("%s: every guarded call is asked of a human", proof.reason)
        if self.status != before:
            self.on_change()
        return proof


def _judge(
    done: subprocess.CompletedProcess[bytes], deny: list[str], allow: list[str], seconds: float
) -> Proof:
    if done.returncode != 0:
        said = done.stderr.decode("utf-8", "replace").strip().splitlines()
        detail = said[-1] if said else f"exit status {done.returncode}"
        return Proof(ok=False, reason=f"sandbox unavailable: {detail}", seconds=seconds)
    return judge_report(done.stdout.decode("utf-8", "replace"), deny, allow, seconds)


def judge_report(text: str, deny: list[str], allow: list[str], seconds: float = 0.0) -> Proof:
    """The launcher's canary lines against what each canary had to answer."""
    denied: dict[str, str] = {}
    allowed: dict[str, str] = {}
    try:
        for row in text.splitlines():
            side, result, path = row.split("\t", 2)
            {"deny": denied, "allow": allowed}[side][path] = result
    except (ValueError, KeyError):
        return Proof(
            ok=False,
            reason="sandbox unavailable: the probe's report was unreadable",
            seconds=seconds,
        )
    for path in deny:
        if denied.get(path) not in REFUSED:
            return Proof(
                ok=False,
                reason=f"sandbox unavailable: the canary write outside the boundary to {path} "
                f"was not refused ({denied.get(path)})",
                seconds=seconds,
            )
    for path in allow:
        if allowed.get(path) != "ok":
            return Proof(
                ok=False,
                reason=f"sandbox unavailable: the canary write inside the boundary to {path} "
                f"failed ({allowed.get(path)})",
                seconds=seconds,
            )
    return Proof(ok=True, seconds=seconds)


def _existing(paths: Sequence[str]) -> list[str]:
    seen: list[str] = []
    for path in paths:
        real = os.path.realpath(path)
        if os.path.exists(real) and real not in seen:
            seen.append(real)
    return seen


def _userns_off() -> bool:
    for knob in (
        "/proc/sys/kernel/unprivileged_userns_clone",
        "/proc/sys/user/max_user_namespaces",
    ):
        try:
            if Path(knob).read_text().strip() == "0":
                return os.geteuid() != 0 or knob.endswith("max_user_namespaces")
        except OSError:
            continue
    return False
