"""The launcher inside a bridge turn's sandbox (docs/sandbox.md).

Run by bubblewrap as ``python -I -S sandbox_exec.py [OPTIONS] -- PROGRAM ARGS...``:
it applies a Landlock ruleset to itself (the kernel keeps it across ``exec`` and
for every child) and then execs the agent CLI. With ``--probe`` it does not
exec: it tries the canary writes and prints what happened, one line each,
so the bridge proves the boundary through the very wrapper a turn uses.

Standard library only (ctypes for the three Landlock system calls), one file,
no imports from the package and none of the slow standard modules (json,
contextlib, re): it starts with ``-I -S`` for a short start (bench/sandbox.py). Options:

- ``--write PATH``: writes allowed beneath PATH (a folder, or a single file);
- ``--write-all``: file system writes are not restricted by Landlock (mode full);
- ``--connect PORT``: TCP connect allowed to PORT; ``--net-all``: TCP not restricted;
- ``--probe-deny PATH`` / ``--probe-allow PATH``: canary files, tried after the
  ruleset is in place; with ``--probe`` the results are printed and nothing runs;
- ``--report FILE`` and ``--proven-env NAME`` (a turn that proves itself): the
  results go to FILE, and NAME=proven is put in the CLI's environment only when
  every canary answered right (removed otherwise); the CLI runs either way.

Landlock only ever narrows: an older kernel that lacks a feature (ABI < 4 has
no TCP rules) makes :func:`restrict` fail, and the launcher exits 125 without
running anything, so the bridge falls back loudly instead of running a turn it
believes confined.
"""

from __future__ import annotations

import ctypes
import errno
import os
import sys

# The Landlock system calls and constants (linux/landlock.h); the numbers are
# the same on every architecture.
SYS_CREATE_RULESET = 444
SYS_ADD_RULE = 445
SYS_RESTRICT_SELF = 446
CREATE_RULESET_VERSION = 1
RULE_PATH_BENEATH = 1
RULE_NET_PORT = 2
PR_SET_NO_NEW_PRIVS = 38

FS_EXECUTE = 1 << 0
FS_WRITE_FILE = 1 << 1
FS_READ_FILE = 1 << 2
FS_READ_DIR = 1 << 3
FS_REMOVE_DIR = 1 << 4
FS_REMOVE_FILE = 1 << 5
FS_MAKE_CHAR = 1 << 6
FS_MAKE_DIR = 1 << 7
FS_MAKE_REG = 1 << 8
FS_MAKE_SOCK = 1 << 9
FS_MAKE_FIFO = 1 << 10
FS_MAKE_BLOCK = 1 << 11
FS_MAKE_SYM = 1 << 12
FS_REFER = 1 << 13  # ABI 2
FS_TRUNCATE = 1 << 14  # ABI 3
NET_BIND_TCP = 1 << 0  # ABI 4
NET_CONNECT_TCP = 1 << 1  # ABI 4

#: Every right that changes the file system (reads and execution stay unrestricted).
FS_WRITES_V1 = (
    FS_WRITE_FILE | FS_REMOVE_DIR | FS_REMOVE_FILE | FS_MAKE_CHAR | FS_MAKE_DIR | FS_MAKE_REG
    | FS_MAKE_SOCK | FS_MAKE_FIFO | FS_MAKE_BLOCK | FS_MAKE_SYM
)  # fmt: skip
#: The rights a rule on a single file may carry.
FS_FILE_RIGHTS = FS_WRITE_FILE | FS_TRUNCATE
#: Errors that show the kernel refused a write.
REFUSED = frozenset({"EROFS", "EACCES", "EPERM"})
MIN_ABI = 4  # TCP rules: below this the network part cannot be enforced
EXIT_SETUP = 125  # the sandbox could not be set up: nothing ran


class _RulesetAttr(ctypes.Structure):
    _fields_ = [
        ("handled_access_fs", ctypes.c_uint64),
        ("handled_access_net", ctypes.c_uint64),
    ]


class _PathBeneathAttr(ctypes.Structure):
    _pack_ = 1
    _fields_ = [("allowed_access", ctypes.c_uint64), ("parent_fd", ctypes.c_int32)]


class _NetPortAttr(ctypes.Structure):
    _fields_ = [("allowed_access", ctypes.c_uint64), ("port", ctypes.c_uint64)]


_libc = ctypes.CDLL(None, use_errno=True)
_libc.syscall.restype = ctypes.c_long


def _check(result: int, what: str) -> int:
    if result < 0:
        code = ctypes.get_errno()
        raise OSError(code, f"{what}: {os.strerror(code)}")
    return result


def abi_version() -> int:
    """The kernel's Landlock ABI version; 0 when Landlock is absent or disabled."""
    result = _libc.syscall(SYS_CREATE_RULESET, None, ctypes.c_size_t(0), CREATE_RULESET_VERSION)
    return int(result) if result > 0 else 0


def restrict(writable: list[str], ports: list[int], *, write_all: bool, net_all: bool) -> None:
    """Confine this process (and what it execs) to writes beneath ``writable``
    and TCP connects to ``ports``. Raises OSError when it cannot."""
    abi = abi_version()
    if abi < MIN_ABI:
        raise OSError(errno.ENOSYS, f"Landlock ABI {abi} < {MIN_ABI} (needs Linux 6.7)")
    fs = 0 if write_all else FS_WRITES_V1 | FS_REFER | FS_TRUNCATE
    net = 0 if net_all else NET_BIND_TCP | NET_CONNECT_TCP
    if not fs and not net:
        return
    attr = _RulesetAttr(fs, net)
    size = ctypes.c_size_t(ctypes.sizeof(attr))
    fd = _check(
        _libc.syscall(SYS_CREATE_RULESET, ctypes.byref(attr), size, 0), "landlock_create_ruleset"
    )
    try:
        if fs:
            for path in writable:
                _allow_path(fd, path, fs)
        if net:
            for port in ports:
                rule = _NetPortAttr(NET_CONNECT_TCP, port)
                _check(
                    _libc.syscall(SYS_ADD_RULE, fd, RULE_NET_PORT, ctypes.byref(rule), 0),
                    f"landlock_add_rule(port {port})",
                )
        _check(_libc.prctl(PR_SET_NO_NEW_PRIVS, 1, 0, 0, 0), "prctl(NO_NEW_PRIVS)")
        _check(_libc.syscall(SYS_RESTRICT_SELF, fd, 0), "landlock_restrict_self")
    finally:
        os.close(fd)


def _allow_path(ruleset_fd: int, path: str, rights: int) -> None:
    try:
        path_fd = os.open(path, os.O_PATH | os.O_CLOEXEC)
    except FileNotFoundError:
        return  # nothing there to write beneath
    try:
        if not os.path.isdir(path):
            rights &= FS_FILE_RIGHTS
        rule = _PathBeneathAttr(rights, path_fd)
        _check(
            _libc.syscall(SYS_ADD_RULE, ruleset_fd, RULE_PATH_BENEATH, ctypes.byref(rule), 0),
            f"landlock_add_rule({path})",
        )
    finally:
        os.close(path_fd)


def try_write(path: str) -> str:
    """``ok`` when a file could be created at ``path`` (and removed again), else
    the error's symbolic name (``EROFS``, ``EACCES``, …)."""
    try:
        fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o600)
    except OSError as exc:
        return errno.errorcode.get(exc.errno or 0, str(exc.errno))
    os.close(fd)
    try:  # noqa: SIM105 (contextlib costs the launcher's start ~30 ms of imports)
        os.unlink(path)
    except OSError:
        pass
    return "ok"


def _parse(args: list[str]) -> tuple[dict[str, list[str]], set[str], list[str]]:
    values: dict[str, list[str]] = {"--write": [], "--connect": [], "--probe-deny": [],
                                    "--probe-allow": [], "--report": [],
                                    "--proven-env": []}  # fmt: skip
    flags: set[str] = set()
    i = 0
    while i < len(args):
        arg = args[i]
        if arg == "--":
            return values, flags, args[i + 1 :]
        if arg in ("--write-all", "--net-all", "--probe"):
            flags.add(arg)
            i += 1
            continue
        if arg in values and i + 1 < len(args):
            values[arg].append(args[i + 1])
            i += 2
            continue
        raise ValueError(f"unknown option {arg!r}")
    return values, flags, []


def main(args: list[str]) -> int:
    try:
        values, flags, argv = _parse(args)
        ports = [int(p) for p in values["--connect"]]
        restrict(
            values["--write"],
            ports,
            write_all="--write-all" in flags,
            net_all="--net-all" in flags,
        )
    except (OSError, ValueError) as exc:
        sys.stderr.write(f"agentmail sandbox: {exc}\n")
        return EXIT_SETUP
    # One line per canary, "deny|allow TAB result TAB path" (json costs ~25 ms).
    lines = [
        (side, try_write(path), path)
        for side in ("deny", "allow")
        for path in values[f"--probe-{side}"]
    ]
    report = "".join(f"{side}\t{result}\t{path}\n" for side, result, path in lines)
    if "--probe" in flags:
        sys.stdout.write(report)
        return 0
    if values["--report"]:
        # A turn that proves its own boundary: the flag reaches the CLI (and its
        # hooks) only when every canary answered right; the bridge reads the report.
        held = all(
            result in REFUSED if side == "deny" else result == "ok" for side, result, _ in lines
        )
        for name in values["--proven-env"]:
            if held and lines:
                os.environ[name] = "proven"
            else:
                os.environ.pop(name, None)
        try:
            with open(values["--report"][0], "w") as f:
                f.write(report)
        except OSError as exc:
            sys.stderr.write(f"agentmail sandbox: the report: {exc.strerror}\n")
            return EXIT_SETUP
    if not argv:
        sys.stderr.write("agentmail sandbox: no program after --\n")
        return EXIT_SETUP
    try:
        os.execvp(argv[0], argv)
    except OSError as exc:
        sys.stderr.write(f"agentmail sandbox: {argv[0]}: {exc.strerror}\n")
        return 127
    return 127  # not reached


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
