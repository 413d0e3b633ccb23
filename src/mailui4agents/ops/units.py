"""systemd units for the gateway and the bridge (docs/service.md).

The text is built here from plain values; `agentmail install-service` writes it.
Every unit is hardened the same way (HARDENING); the gateway may write only its
data dir, the bridge only its state dir, its workspace roots and the directories
its agent CLIs keep their own state in (`--writable`). A unit that fails for good
(Restart= gave up) starts `agentmail-failed@<unit>.service`, which runs
`agentmail service-failed <unit>`: it mails the admin what failed with the
journal's last lines, through the gateway.
"""

from __future__ import annotations

import re
from collections.abc import Sequence
from dataclasses import dataclass, field
from pathlib import Path

FAILED_TEMPLATE = "agentmail-failed@.service"
GATEWAY_UNIT = "agentmail-gateway.service"
BRIDGE_UNIT = "agentmail-bridge.service"

# Sandboxing that every agentmail unit gets (systemd.exec(5)). The gateway needs
# no privilege at all: it binds an unprivileged port, writes one directory and
# talks to PostgreSQL, SMTP and push services over the network.
HARDENING = (
    "NoNewPrivileges=yes",
    "ProtectSystem=strict",
    "PrivateTmp=yes",
    "PrivateDevices=yes",
    "ProtectKernelTunables=yes",
    "ProtectKernelModules=yes",
    "ProtectKernelLogs=yes",
    "ProtectControlGroups=yes",
    "ProtectClock=yes",
    "ProtectHostname=yes",
    "RestrictSUIDSGID=yes",
    "RestrictRealtime=yes",
    "RestrictNamespaces=yes",
    "LockPersonality=yes",
    "SystemCallArchitectures=native",
    "RestrictAddressFamilies=AF_UNIX AF_INET AF_INET6",
    "UMask=0077",
)
# A system unit runs as its own user and may not gain capabilities either.
SYSTEM_ONLY = ("CapabilityBoundingSet=", "AmbientCapabilities=")

_SAFE_WORD = re.compile(r"^[A-Za-z0-9_./:@%+=,-]+$")


def quote(arg: str) -> str:
    """One argument of ExecStart= (systemd.syntax(7)): plain when it is safe,
    else double-quoted with backslash escapes; `%` is doubled (a specifier)."""
    if "\n" in arg or "\r" in arg or "\0" in arg:
        raise ValueError(f"an argument with a line break: {arg!r}")
    arg = arg.replace("%", "%%")
    if arg and _SAFE_WORD.match(arg):
        return arg
    escaped = arg.replace("\\", "\\\\").replace('"', '\\"').replace("$", "$$")
    return f'"{escaped}"'


def _path(p: Path) -> str:
    text = str(p)
    if not p.is_absolute():
        raise ValueError(f"{p}: give an absolute path")
    if any(c in text for c in " \t\n\r\"'\\%"):  # ReadWritePaths= splits on spaces
        raise ValueError(f"{p}: a path with spaces, quotes or % cannot be named in a unit")
    return text


@dataclass(frozen=True)
class UnitOptions:
    agentmail: Path  # the absolute path of the `agentmail` executable
    user_unit: bool  # a `systemctl --user` unit (no User=, WantedBy=default.target)
    run_as: str | None  # system units: the account the service runs as
    env_file: Path  # optional (EnvironmentFile=-…): secrets, never written by us
    writable: Sequence[Path]  # ReadWritePaths=
    args: Sequence[str] = field(default_factory=tuple)  # after `agentmail`


def service_unit(description: str, opts: UnitOptions) -> str:
    exec_start = " ".join(quote(a) for a in [str(opts.agentmail), *opts.args])
    lines = [
        "# Written by `agentmail install-service` (docs/service.md).",
        "[Unit]",
        f"Description={description}",
        "Wants=network-online.target",
        "After=network-online.target",
        f"OnFailure={FAILED_TEMPLATE.replace('@', '@%n')}",
        # Restart= below keeps it up; after 5 failed starts in 5 minutes it gives
        # up, the unit fails and OnFailure= mails the admin.
        "StartLimitIntervalSec=300",
        "StartLimitBurst=5",
        "",
        "[Service]",
        "Type=exec",
        f"ExecStart={exec_start}",
        f"EnvironmentFile=-{_path(opts.env_file)}",
        "Restart=on-failure",
        "RestartSec=5",
        "TimeoutStopSec=30",
    ]
    if not opts.user_unit:
        assert opts.run_as, "a system unit runs as an account of its own"
        lines += [f"User={opts.run_as}", f"Group={opts.run_as}", *SYSTEM_ONLY]
    lines += list(HARDENING)
    lines.append("ReadWritePaths=" + " ".join(_path(p) for p in opts.writable))
    lines += [
        "",
        "[Install]",
        f"WantedBy={'default.target' if opts.user_unit else 'multi-user.target'}",
        "",
    ]
    return "\n".join(lines)


def failed_unit(opts: UnitOptions) -> str:
    """The template `agentmail-failed@.service`: `%i` is the failed unit's name."""
    exec_start = " ".join(
        [
            quote(str(opts.agentmail)),
            "service-failed",
            *(["--user"] if opts.user_unit else []),
            "%i",
        ]
    )
    lines = [
        "# Written by `agentmail install-service` (docs/service.md).",
        "[Unit]",
        "Description=Mail the agentmail admin that %i failed",
        "",
        "[Service]",
        "Type=oneshot",
        f"ExecStart={exec_start}",
        # AGENTMAIL_URL and AGENTMAIL_KEY (or AGENTMAIL_TOKEN) of the sender.
        f"EnvironmentFile=-{_path(opts.env_file)}",
        "TimeoutStartSec=120",
    ]
    if not opts.user_unit:
        assert opts.run_as
        # The journal of another unit is readable by the systemd-journal group.
        lines += [
            f"User={opts.run_as}",
            f"Group={opts.run_as}",
            "SupplementaryGroups=systemd-journal",
            *SYSTEM_ONLY,
        ]
    lines += list(HARDENING)
    lines += ["ProtectHome=read-only", ""]
    return "\n".join(lines)
