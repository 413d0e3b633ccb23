#!/usr/bin/env python
"""Fuzz the HTTP API of a real `agentmail serve` with schemathesis, on SQLite and
on PostgreSQL, and fail on any 5xx (docs/fuzzing.md).

    .venv/bin/python scripts/fuzz-api.py [--backend sqlite|postgresql|both]
        [--max-examples 10] [--seed 22] [--workers 2] [--time-limit 1200]

Schemathesis is pinned (SCHEMATHESIS_VERSION) and installed with
`pip --target` into .cache/schemathesis/ (not committed), so the project's venv
stays as constraints.txt makes it; a no-op when it is there. It runs in its own
process with that directory first on PYTHONPATH.

Per database: a gateway on a free port (a temp data dir; for PostgreSQL a
throwaway cluster, mailui4agents.testing_pg), an admin (its password given at
first start), a plain user and an agent owned by that user, each with a token;
scripts/fuzz_api_hooks.py gives every route its token. Then the `coverage` and
`fuzzing` phases, the one check `not_a_server_error`, NUL characters allowed in
strings, a fixed seed and no example database (so a run repeats). Everything
started here is stopped on the way out, Ctrl-C included.

Closing line per database: `sqlite: N cases, N passed, 0 server errors`; with
failures, each with its operation and curl reproduction. Exit 0 only when every
database ran to the end with no 5xx and no errored case.
"""

from __future__ import annotations

import argparse
import json
import os
import shutil
import signal
import subprocess
import sys
import tempfile
import time
import urllib.error
import urllib.request
import xml.etree.ElementTree as ET
from dataclasses import dataclass, field
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
SCHEMATHESIS_VERSION = "4.32.5"
TARGET = ROOT / ".cache" / "schemathesis"
HOOKS = ROOT / "scripts" / "fuzz_api_hooks.py"

ADMIN_PASSWORD = "fuzz-admin-password-1"
USER, USER_PASSWORD = "fuzz-user", "fuzz-user-password-1"
AGENT = "fuzz-agent"

# Seconds schemathesis waits for one response; a request that takes longer counts
# as an errored case (a failure of the run, though not a 5xx).
REQUEST_TIMEOUT = 20.0


def log(message: str) -> None:
    print(f"[fuzz-api] {message}", flush=True)


# -- schemathesis -------------------------------------------------------------------


def ensure_schemathesis() -> None:
    """Install the pinned schemathesis into TARGET unless it is there."""
    marker = TARGET / f"schemathesis-{SCHEMATHESIS_VERSION}.dist-info"
    if marker.is_dir():
        return
    log(f"installing schemathesis=={SCHEMATHESIS_VERSION} into {TARGET.relative_to(ROOT)}/")
    TARGET.parent.mkdir(parents=True, exist_ok=True)
    staging = Path(tempfile.mkdtemp(prefix="schemathesis-", dir=TARGET.parent))
    try:
        subprocess.run(
            [sys.executable, "-m", "pip", "install", "--quiet", "--disable-pip-version-check",
             "--target", str(staging), f"schemathesis=={SCHEMATHESIS_VERSION}"],
            check=True,
        )  # fmt: skip
        shutil.rmtree(TARGET, ignore_errors=True)  # a partial or other version
        staging.rename(TARGET)  # whole or not at all: a killed install leaves no marker
    finally:
        shutil.rmtree(staging, ignore_errors=True)


# -- the gateway and its credentials ------------------------------------------------


def call(base: str, method: str, path: str, body: dict[str, object], token: str = "") -> dict:
    headers = {"Content-Type": "application/json"}
    if token:
        headers["Authorization"] = f"Bearer {token}"
    request = urllib.request.Request(
        base + path, data=json.dumps(body).encode(), headers=headers, method=method
    )
    try:
        with urllib.request.urlopen(request, timeout=30) as response:
            return json.loads(response.read())
    except urllib.error.HTTPError as e:
        raise RuntimeError(f"{method} {path}: {e.code} {e.read()[:500]!r}") from None


def make_credentials(base: str) -> dict[str, str]:
    """An admin's token, a plain user's token and an agent key (env for the hooks)."""
    login = "/api/v1/auth/login"
    admin = call(base, "POST", login, {"username": "admin", "password": ADMIN_PASSWORD})["token"]
    user = {"username": USER, "password": USER_PASSWORD, "is_admin": False}
    call(base, "POST", "/api/v1/admin/users", user, admin)
    user_token = call(base, "POST", login, {"username": USER, "password": USER_PASSWORD})["token"]
    agent = call(base, "POST", "/api/v1/admin/agents", {"name": AGENT, "owners": [USER]}, admin)
    return {
        "FUZZ_BASE_URL": base,
        "FUZZ_ADMIN_TOKEN": admin,
        "FUZZ_USER": USER,
        "FUZZ_PASSWORD": USER_PASSWORD,
        "FUZZ_USER_TOKEN": user_token,
        "FUZZ_AGENT": AGENT,
        "FUZZ_AGENT_KEY": agent["key"],
    }


# -- one run ------------------------------------------------------------------------


@dataclass
class Outcome:
    backend: str
    cases: int = 0
    passed: int = 0
    server_errors: int = 0
    errored: int = 0
    skipped_operations: int = 0
    complete: bool = False
    note: str = ""
    failures: list[str] = field(default_factory=list)
    seconds: float = 0.0
    renewed: list[str] = field(default_factory=list)  # credentials the hooks made again
    auth_only: list[str] = field(default_factory=list)  # operations that saw only 401/403

    @property
    def ok(self) -> bool:
        return self.complete and self.server_errors == 0 and self.errored == 0 and not self.note

    def line(self) -> str:
        text = f"{self.backend}: {self.cases} cases, {self.passed} passed, "
        text += f"{self.server_errors} server errors"
        if self.errored:
            text += f", {self.errored} errored"
        if self.skipped_operations:
            text += f" ({self.skipped_operations} operations skipped)"
        text += f" [{self.seconds:.0f} s]"
        if self.note:
            text += f" — {self.note}"
        return text


def failures_from_junit(path: Path) -> list[str]:
    """Each failing or errored test case of the JUnit report: its operation and
    message (which holds the curl reproduction)."""
    if not path.exists():
        return []
    found = []
    for case in ET.parse(path).iter("testcase"):
        for bad in (*case.findall("failure"), *case.findall("error")):
            text = (bad.text or bad.get("message") or "").strip()
            found.append(f"{case.get('name')}\n{text}")
    return found


def run_schemathesis(
    backend: str, base: str, credentials: dict[str, str], args: argparse.Namespace, work: Path
) -> Outcome:
    outcome = Outcome(backend)
    reports = work / "reports"
    command = [
        sys.executable, "-m", "schemathesis.cli", "run", f"{base}/api/v1/openapi.json",
        "--url", base,
        "--checks", "not_a_server_error",
        "--phases", "coverage,fuzzing",
        "--generation-allow-x00", "true",
        "--generation-database", "none",
        "--seed", str(args.seed),
        "--max-examples", str(args.max_examples),
        "--workers", str(args.workers),
        "--request-timeout", str(REQUEST_TIMEOUT),
        "--report", "json,junit",
        "--report-dir", str(reports),
        "--no-color",
    ]  # fmt: skip
    env = {
        **{k: v for k, v in os.environ.items() if not k.startswith("AGENTMAIL_")},
        **credentials,
        "PYTHONPATH": str(TARGET),
        "SCHEMATHESIS_HOOKS": str(HOOKS),
        "FUZZ_RENEWALS_LOG": str(work / "renewals.log"),
        "PYTHONDONTWRITEBYTECODE": "1",
    }
    log(f"{backend}: schemathesis {' '.join(command[4:])}")
    started = time.monotonic()
    output = work / "schemathesis.log"
    with output.open("w") as sink:
        proc = subprocess.Popen(
            command, cwd=work, env=env, stdout=sink, stderr=subprocess.STDOUT,
            start_new_session=True,
        )  # fmt: skip
        try:
            proc.wait(args.time_limit)
        except subprocess.TimeoutExpired:
            outcome.note = f"stopped at the time limit ({args.time_limit} s)"
            os.killpg(proc.pid, signal.SIGKILL)
            proc.wait()
        except BaseException:
            os.killpg(proc.pid, signal.SIGKILL)
            proc.wait()
            raise
    outcome.seconds = time.monotonic() - started
    report = reports / "schemathesis-report.json"
    junit = reports / "junit.xml"
    for candidate in reports.glob("*.json") if reports.is_dir() else ():
        report = candidate
    for candidate in reports.glob("*.xml") if reports.is_dir() else ():
        junit = candidate
    if not report.exists():
        outcome.note = outcome.note or f"schemathesis exited {proc.returncode} without a report"
        print(output.read_text(errors="replace")[-6000:], file=sys.stderr)
        return outcome
    doc = json.loads(report.read_text())
    cases = doc["test_cases"]
    outcome.cases = cases["generated"]
    outcome.server_errors = cases["with_failures"]
    outcome.errored = cases["errored"]
    outcome.passed = outcome.cases - outcome.server_errors - outcome.errored
    outcome.skipped_operations = doc["operations"]["skipped"]
    outcome.complete = bool(doc["complete"])
    if not outcome.complete and not outcome.note:
        outcome.note = f"schemathesis stopped early ({doc['stop_reason']})"
    outcome.failures = failures_from_junit(junit)
    renewals = work / "renewals.log"
    if renewals.exists():
        outcome.renewed = renewals.read_text().split("\n")[:-1]
    outcome.auth_only = list(doc.get("warnings", {}).get("missing_auth", []))
    for error in doc.get("errors", []):
        outcome.failures.append(f"error: {error['title']} (×{error['count']})")
    if args.keep:
        kept = Path(args.keep) / backend
        shutil.rmtree(kept, ignore_errors=True)
        shutil.copytree(work, kept, ignore=shutil.ignore_patterns("data", "pg"))
        log(f"{backend}: reports and log kept in {kept}")
    return outcome


def fuzz(backend: str, args: argparse.Namespace) -> Outcome:
    from mailui4agents.testing import FAST_HASH_ENV, GatewayProcess, clean_env

    work = Path(tempfile.mkdtemp(prefix=f"agentmail-fuzz-{backend}-"))
    cluster = None
    gateway = None
    try:
        env = clean_env(**FAST_HASH_ENV, AGENTMAIL_ADMIN_PASSWORD=ADMIN_PASSWORD)
        if backend == "postgresql":
            from mailui4agents.testing_pg import PgCluster, find_bindir

            bindir = find_bindir()
            assert bindir is not None  # checked by main()
            cluster = PgCluster(bindir)
            cluster.start()
            cluster.execute("CREATE DATABASE agentmail_fuzz")
            env["AGENTMAIL_DATABASE_URL"] = cluster.url("agentmail_fuzz")
        gateway = GatewayProcess(work / "data", env)
        gateway.start(timeout=60)
        log(f"{backend}: gateway at {gateway.url}")
        credentials = make_credentials(gateway.url)
        outcome = run_schemathesis(backend, gateway.url, credentials, args, work)
        if gateway.proc is not None and gateway.proc.poll() is not None:
            outcome.note = f"the gateway exited ({gateway.proc.returncode}) during the run"
        return outcome
    finally:
        if gateway is not None:
            gateway.stop()
            tail = "".join(gateway.output[-40:])
            if "Traceback" in tail:
                log(f"{backend}: the gateway's last output:\n{tail}")
        if cluster is not None:
            cluster.stop()
        shutil.rmtree(work, ignore_errors=True)


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--backend", choices=("sqlite", "postgresql", "both"), default="both")
    parser.add_argument("--max-examples", type=int, default=10, help="per operation and phase")
    parser.add_argument("--seed", type=int, default=22)
    parser.add_argument(
        "--workers", type=int, default=2, help="schemathesis workers (default 2: 2 cores)"
    )
    parser.add_argument(
        "--time-limit", type=int, default=1200, help="seconds per database before it is stopped"
    )
    parser.add_argument("--keep", metavar="DIR", help="keep each database's reports and log here")
    args = parser.parse_args()

    os.chdir(ROOT)
    if not (ROOT / "src" / "mailui4agents").is_dir():
        sys.exit("run from a MailUI4Agents checkout")
    try:
        import mailui4agents  # noqa: F401
    except ImportError:
        sys.exit(f"run with the project's venv: .venv/bin/python {sys.argv[0]}")
    ensure_schemathesis()

    backends = ["sqlite", "postgresql"] if args.backend == "both" else [args.backend]
    outcomes: list[Outcome] = []
    missing_pg = False
    started = time.monotonic()
    for backend in backends:
        if backend == "postgresql":
            from mailui4agents.testing_pg import find_bindir

            if find_bindir() is None:
                missing_pg = True
                print(
                    "\n" + "!" * 78 + "\n!! PostgreSQL binaries (initdb, pg_ctl) missing: "
                    "NOT fuzzed on PostgreSQL.\n!! Install them with "
                    "scripts/install-test-deps.sh\n" + "!" * 78 + "\n",
                    file=sys.stderr,
                    flush=True,
                )
                continue
        outcomes.append(fuzz(backend, args))

    print()
    for outcome in outcomes:
        for failure in outcome.failures:
            print(f"--- {outcome.backend}: {failure}\n")
        if outcome.renewed:
            made = ", ".join(
                f"{outcome.renewed.count(w)} × {w}" for w in sorted(set(outcome.renewed))
            )
            log(f"{outcome.backend}: the fuzzer killed credentials; made again: {made}")
        if outcome.auth_only:
            log(
                f"{outcome.backend}: {len(outcome.auth_only)} operations answered only 401/403: "
                + ", ".join(outcome.auth_only)
            )
    with open("/proc/loadavg") as f:
        load = f.read().split()[:3]
    log(f"wall time {time.monotonic() - started:.0f} s, load average {' '.join(load)}")
    for outcome in outcomes:
        print(outcome.line())
    if missing_pg:
        print("postgresql: NOT RUN (binaries missing)")
    return 0 if outcomes and all(o.ok for o in outcomes) else 1


if __name__ == "__main__":
    sys.exit(main())
