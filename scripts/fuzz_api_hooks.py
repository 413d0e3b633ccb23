"""Schemathesis hooks for scripts/fuzz-api.py: the right bearer token per route.

Loaded by schemathesis (SCHEMATHESIS_HOOKS), not by the gateway or the tests.
The credentials come from the environment that fuzz-api.py sets after it made
them:

- /api/v1/agent/...  the agent's key (am_agent_…, OpenAPI scheme agentKey);
- /api/v1/admin/...  the admin's token (a person who is an admin);
- every other route behind a token: a plain (non-admin) person's token.

The public routes (/healthz, /readyz, /api/v1/auth/login) get none. The first
provider whose filter matches a case sets its Authorization header; a case
schemathesis sends without it on purpose (its negative auth cases) keeps it off.

The fuzzer may kill its own credentials: it learns the agent's name from
GET /api/v1/admin/agents and then rotates its key (POST …/keys), or revokes the
person's token (DELETE /api/v1/auth/tokens/{id}). So on a 401 schemathesis
asks again (`retry_on`) and replays the request once: a provider first checks
that its credential still works, and only if not makes a new one — the agent a
rotated key (with the admin's token, which only /api/v1/admin/ routes carry, and
none of those can revoke it), the person a new login. fuzz-api.py reports how
many were made.
"""

from __future__ import annotations

import json
import os
import threading
import urllib.error
import urllib.request
from typing import Any

import schemathesis

PUBLIC = ["/healthz", "/readyz", "/api/v1/auth/login"]
BASE = os.environ.get("FUZZ_BASE_URL", "")
_renewals = threading.Lock()


def _status(method: str, path: str, token: str, body: object = None) -> tuple[int, Any]:
    data = None if body is None else json.dumps(body).encode()
    headers = {"Content-Type": "application/json"}
    if token:
        headers["Authorization"] = f"Bearer {token}"
    request = urllib.request.Request(BASE + path, data=data, headers=headers, method=method)
    try:
        with urllib.request.urlopen(request, timeout=30) as response:
            return response.status, json.loads(response.read() or b"null")
    except urllib.error.HTTPError as e:
        return e.code, None


def _count_renewal(what: str) -> None:
    """One line per new credential, in the file fuzz-api.py reads at the end."""
    log = os.environ.get("FUZZ_RENEWALS_LOG")
    if log:
        with _renewals, open(log, "a") as f:
            f.write(what + "\n")


class _Bearer:
    variable = ""
    probe = ""  # a GET that answers 200 while the credential works

    def __init__(self) -> None:
        self.token = os.environ[self.variable]

    def renew(self) -> str:
        raise NotImplementedError

    def get(self, case: object, context: object) -> str:
        if self.probe and _status("GET", self.probe, self.token)[0] == 401:
            self.token = self.renew()
        return self.token

    def set(self, case: schemathesis.Case, data: str, context: object) -> None:
        case.headers = case.headers or {}
        case.headers["Authorization"] = f"Bearer {data}"


@schemathesis.auth(retry_on=[401]).apply_to(path_regex=r"^/api/v1/agent/")
class AgentKey(_Bearer):
    variable = "FUZZ_AGENT_KEY"
    probe = "/api/v1/agent/inbox"

    def renew(self) -> str:
        agent = os.environ["FUZZ_AGENT"]
        status, body = _status(
            "POST", f"/api/v1/admin/agents/{agent}/keys", os.environ["FUZZ_ADMIN_TOKEN"], {}
        )
        if status not in (200, 201):
            raise RuntimeError(f"could not rotate the agent's key: {status}")
        _count_renewal("agent key")
        return str(body["key"])


@schemathesis.auth(retry_on=[401]).apply_to(path_regex=r"^/api/v1/admin/")
class AdminToken(_Bearer):
    variable = "FUZZ_ADMIN_TOKEN"


@(
    schemathesis.auth(retry_on=[401])
    .skip_for(path_regex=r"^/api/v1/(agent|admin)/")
    .skip_for(path=PUBLIC)
)
class UserToken(_Bearer):
    variable = "FUZZ_USER_TOKEN"
    probe = "/api/v1/auth/tokens"

    def renew(self) -> str:
        login = {"username": os.environ["FUZZ_USER"], "password": os.environ["FUZZ_PASSWORD"]}
        status, body = _status("POST", "/api/v1/auth/login", "", login)
        if status not in (200, 201):
            raise RuntimeError(f"could not log the person in again: {status}")
        _count_renewal("person token")
        return str(body["token"])
