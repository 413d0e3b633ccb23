"""The log-secrets search itself (tests/log_secrets.py): what it must find, and
what it must let through (ids, hashes, request lines), or it would cry wolf."""

from __future__ import annotations

import base64
import hashlib
import secrets
import uuid
from pathlib import Path

from mailui4agents.services.identity import AGENT_KEY_PREFIX, USER_TOKEN_PREFIX
from tests import log_secrets
from tests.conftest import ADMIN_PASSWORD, USER_PASSWORD

PASSWORDS = log_secrets.test_passwords()


def whats(line: str) -> list[str]:
    return [h.what for h in log_secrets.scan_text("x.log", line, PASSWORDS)]


def test_keys_tokens_passwords_and_one_time_codes_are_found() -> None:
    assert whats(f"INFO auth: {USER_TOKEN_PREFIX}{secrets.token_urlsafe(32)}") == ["a key or token"]
    assert whats(f"key={AGENT_KEY_PREFIX}{secrets.token_urlsafe(32)}") == ["a key or token"]
    assert whats(f"login failed for admin with {ADMIN_PASSWORD}") == ["a test password"]
    assert whats(f"GET /e/{'Ab1' + secrets.token_urlsafe(32)[3:]}?x") == ["a one-time code"]


def test_every_test_password_constant_is_searched_for() -> None:
    assert {ADMIN_PASSWORD, USER_PASSWORD, "a-new-password-for-tests"} <= PASSWORDS


def test_ids_hashes_and_request_lines_are_not_secrets() -> None:
    sha = hashlib.sha256(b"x").hexdigest()
    line = (
        f"INFO mailui4agents.access GET /api/v1/mail/{{mail_id}} 200 3.1 ms "
        f"mail={uuid.uuid4()} sha256={sha} request={secrets.token_hex(8)}"
    )
    assert whats(line) == []
    assert whats("a_plain_words_and_underscores_forty_three_c") == []  # no capital, no digit
    digest = base64.b64encode(hashlib.sha256(b"body").digest()).decode()
    assert whats(f"DKIM: body hash mismatch (got b'{digest}')") == []  # 44 with its '='
    assert whats(f"bh={digest[:20]}+/{digest[:21]}") == []


def test_a_folder_is_scanned_file_by_file(tmp_path: Path) -> None:
    (tmp_path / "gateway-1.log").write_text("fine\n")
    leaked = f"ok\nleaked {USER_TOKEN_PREFIX}abcdefghijklmnopqrstuv\n"
    (tmp_path / "bridge-2.log").write_text(leaked)
    files, hits = log_secrets.scan(tmp_path)
    assert files == 2
    assert [(h.file, h.line_no) for h in hits] == [("bridge-2.log", 2)]
