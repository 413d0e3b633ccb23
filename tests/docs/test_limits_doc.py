"""docs/limits.md names real settings and real constants.

In its "setting / where" column a plain name is a field of `Settings`, and a
name after a module (`domain/strict_json.py` `MAX_DEPTH`) is defined in that
module; the module exists. Every field of `Settings` that bounds a size, a count
or a wait is in the table. Pure Python (fast tier).
"""

from __future__ import annotations

import re
from pathlib import Path

import mailui4agents
from mailui4agents.settings import Settings
from tests.docs.markdown import CODE, DOCS, rows

LIMITS_MD = DOCS / "limits.md"
SRC = Path(mailui4agents.__file__).parent
WHERE = "setting / where"
# Per-request parameters named beside a setting (not settings themselves).
REQUEST_PARAMETERS = {"body_limit"}
# Settings that bound nothing: where things are, credentials, the scheduler's pace.
NOT_LIMITS = {
    "data_dir",
    "database_url",
    "admin_password",
    "metrics_enabled",
    "metrics_token",
    "argon2_time_cost",
    "argon2_memory_kib",
    "password_checks_at_once",
    "scheduler_interval_s",
    "sse_ping_s",
    "sse_batch",
    "sse_queue_max",
    "sse_token_recheck_s",
    "web_session_ttl_s",
    "login_token_ttl_s",
    "login_window_s",
    "login_failures_per_user",
    "login_failures_per_address",
    "login_attempts_per_address",
    "blob_grace_s",
    "calendar_late_after_s",
    "push_endpoint_allow",  # a rule (which endpoints), not an amount
    "vapid_subject",
    "push_poll_s",  # the sender's pace
    "push_retry_base_s",
    "smtp_url",  # where e-mail goes, and how (docs/email.md)
    "smtp_password_file",
    "smtp_password",
    "smtp_ca_file",
    "mail_from",
    "public_url",  # where links in e-mail point
    "email_poll_s",  # the sender's pace
    "email_retry_base_s",
    "imap_url",  # where replies come from, and how (docs/email.md)
    "imap_password_file",
    "imap_password",
    "imap_ca_file",
    "imap_poll_s",  # the fetcher's pace
    "smtp_listen",
    "require_dkim",  # a rule (which replies count), not an amount
    "email_links_require_login",
}


def _problems() -> tuple[list[str], set[str]]:
    problems: list[str] = []
    named: set[str] = set()
    for row in rows(LIMITS_MD.read_text(encoding="utf-8")):
        if WHERE not in row.header:
            continue
        module: str | None = None
        for token in CODE.findall(row.get(WHERE)):
            where = f"docs/limits.md:{row.line}"
            if token.endswith(".py"):
                module = token
                if not (SRC / token).is_file():
                    problems.append(f"{where}: {token} is no module of src/mailui4agents")
                    module = None
                continue
            if module is not None:
                name = token.rsplit(".", 1)[-1]
                source = (SRC / module).read_text(encoding="utf-8")
                if not re.search(rf"\b{re.escape(name)}\b", source):
                    problems.append(f"{where}: {module} defines no {token}")
                continue
            if re.fullmatch(r"[a-z][a-z0-9_]*", token):
                if token in Settings.model_fields:
                    named.add(token)
                elif token not in REQUEST_PARAMETERS:
                    problems.append(f"{where}: `{token}` is no field of Settings")
    return problems, named


def test_limits_md_names_real_settings_and_constants() -> None:
    problems, _ = _problems()
    assert not problems, "docs/limits.md:\n  " + "\n  ".join(problems)


def test_every_limit_setting_is_in_limits_md() -> None:
    _, named = _problems()
    missing = sorted(set(Settings.model_fields) - named - NOT_LIMITS)
    assert not missing, (
        "Settings fields that look like limits but have no row in docs/limits.md "
        f"(add one, or list them in NOT_LIMITS with why): {missing}"
    )
