"""Read paths at scale: inbox, mailbox, thread and search over a seeded database.

Seeds a real gateway's SQLite database with `--mails` mails (default 1,000,000)
in `--sessions` sessions between `--users` people and `--agents` agents: each
mail has one recipient (10% also a cc), one `new_mail` event per recipient, and
every session an owner, as the gateway itself would write them. The users and
agents are made through the API (so their tokens work); the rest is bulk
inserted with sqlite3 in one transaction, with the full-text index rebuilt once
at the end. Then, on a fresh gateway over that database, it measures sequential
requests (p50/p99): an agent's inbox, a person's mailbox, a thread, a search,
and prints EXPLAIN QUERY PLAN for the inbox query.

Usage: .venv/bin/python bench/scale.py [--mails 1000000] [--requests 100]
       [--keep DIR]  (seed once into DIR and reuse it on later runs)
Prints its figures with the same-run calibration (bench/calibrate.py); it is not a test.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import random
import sqlite3
import tempfile
import time
import uuid
from datetime import UTC, datetime, timedelta
from pathlib import Path

import httpx

from calibrate import Calibration, calibrate, load, machine
from mailui4agents.testing import FAST_HASH_ENV, GatewayProcess, clean_env
from stats import pct, summary

ADMIN_PASSWORD = "bench-admin-password"
USER_PASSWORD = "bench-user-password"
WORDS = [
    "deploy",
    "staging",
    "build",
    "tests",
    "refactor",
    "migration",
    "invoice",
    "parser",
    "cache",
    "index",
    "review",
    "release",
    "schema",
    "backup",
    "rollout",
    "metrics",
    "alert",
    "latency",
    "timeout",
    "retry",
]


def text(rng: random.Random, n: int) -> str:
    return " ".join(rng.choice(WORDS) for _ in range(n))


async def make_principals(url: str, users: int, agents: int) -> dict[str, str]:
    tokens: dict[str, str] = {}
    async with httpx.AsyncClient(base_url=url, timeout=60) as http:
        r = await http.post(
            "/api/v1/auth/login", json={"username": "admin", "password": ADMIN_PASSWORD}
        )
        admin = {"Authorization": f"Bearer {r.json()['token']}"}
        for i in range(users):
            body = {"username": f"user{i}", "password": USER_PASSWORD}
            r = await http.post("/api/v1/admin/users", json=body, headers=admin)
            assert r.status_code == 201, r.text
        for i in range(agents):
            agent = {
                "name": f"agent{i}",
                "workspaces": ["/**"],
                "taskers": [f"user{u}" for u in range(users)],
            }
            r = await http.post("/api/v1/admin/agents", json=agent, headers=admin)
            assert r.status_code == 201, r.text
            tokens[f"agent{i}"] = r.json()["key"]
    return tokens


def stamp(t: datetime) -> str:
    """A UTC time as SQLAlchemy stores DateTime on SQLite (db/types.py reads it back)."""
    return t.strftime("%Y-%m-%d %H:%M:%S.%f")


def ordered_uuid(rng: random.Random, n: int) -> str:
    """A version-4-shaped UUID whose leading bits count up (as UUIDv7 would): its
    unique index is appended to in order, not inserted into at random."""
    value = (n << 80) | rng.getrandbits(80)
    value = (value & ~(0xF000 << 64)) | (0x4000 << 64)  # the version nibble
    return str(uuid.UUID(int=value))


def seed(db_path: Path, mails: int, sessions: int, users: int, agents: int) -> dict[str, float]:
    """Bulk load into the migrated database with plain sqlite3: the secondary
    indexes and the FTS triggers are dropped first and rebuilt once at the end
    (one sort each instead of a million B-tree inserts), no journal, large
    transactions; returns the seconds each phase took."""
    rng = random.Random(13)
    phases: dict[str, float] = {}
    started = last = time.perf_counter()

    def phase(name: str) -> None:
        nonlocal last
        now = time.perf_counter()
        phases[name] = now - last
        last = now

    db = sqlite3.connect(db_path, isolation_level=None)
    db.execute("PRAGMA journal_mode=OFF")  # seeding only; the gateway turns WAL back on
    db.execute("PRAGMA synchronous=OFF")
    db.execute("PRAGMA cache_size=-500000")  # 500 MB
    db.execute("PRAGMA temp_store=MEMORY")
    db.execute("BEGIN")
    for trigger in ("mails_fts_insert", "mails_fts_delete", "mails_fts_update"):
        db.execute(f"DROP TRIGGER IF EXISTS {trigger}")
    indexes = db.execute(
        "SELECT name, sql FROM sqlite_master WHERE type = 'index' AND sql IS NOT NULL"
        " AND tbl_name IN ('mails', 'mail_recipients', 'events')"
    ).fetchall()
    for name, _sql in indexes:
        db.execute(f"DROP INDEX {name}")
    t0 = datetime(2026, 1, 1, tzinfo=UTC)
    pairs = []  # (session id, user, agent, alias, workspace)
    srows, orows = [], []
    for i in range(sessions):
        sid, user, agent = ordered_uuid(rng, i), f"user{i % users}", f"agent{i % agents}"
        workspace = f"/srv/p{i % 500}"
        pairs.append((sid, user, agent, f"s{i}", workspace))
        when = stamp(t0 + timedelta(seconds=i))
        srows.append((sid, f"s{i}", False, workspace, "active", "workspace",
                      "advisory", 5, user, when, when))  # fmt: skip
        orows.append((sid, user, "owner", user, when))
    db.executemany(
        "INSERT INTO sessions (id, alias, alias_manual, workspace, status, permission_mode,"
        " permission_enforcement, hop_limit, created_by, created_at, last_mail_at)"
        " VALUES (?,?,?,?,?,?,?,?,?,?,?)",
        srows,
    )
    columns = {r[1] for r in db.execute("PRAGMA table_info(session_deciders)")}
    owner_cols = ["session_id", "name", "role", "added_by", "created_at"]
    assert set(owner_cols) <= columns, columns
    db.executemany(
        f"INSERT INTO session_deciders ({', '.join(owner_cols)}) VALUES (?,?,?,?,?)", orows
    )
    # Texts drawn from pools: a search term hits a realistic share of the mails,
    # and generating a million 30-word bodies does not dominate the seed.
    subjects = [text(rng, 4) for _ in range(2000)]
    bodies = [text(rng, 30) for _ in range(20000)]
    last_mail: dict[str, str] = {}  # session -> its newest mail: replies thread on it
    chunk = 100_000
    seq = 0
    for start in range(0, mails, chunk):
        mrows, rrows, erows = [], [], []
        for _ in range(min(chunk, mails - start)):
            seq += 1
            sid, user, agent, alias, workspace = pairs[rng.randrange(sessions)]
            human_sends = rng.random() < 0.5
            sender, to = (user, agent) if human_sends else (agent, user)
            when = stamp(t0 + timedelta(seconds=sessions + seq))
            mid = ordered_uuid(rng, sessions + seq)
            subject = subjects[rng.randrange(2000)]
            parent = last_mail.get(sid)
            last_mail[sid] = mid
            body = bodies[rng.randrange(20000)]
            mrows.append((seq, mid, sid, sender, human_sends, subject, body, parent,
                          "message", False, when))  # fmt: skip
            recipients = [(to, not human_sends, "to")]
            if rng.random() < 0.1:
                cc = f"user{rng.randrange(users)}"
                if cc not in (sender, to):
                    recipients.append((cc, True, "cc"))
            data = json.dumps(
                {
                    "mail_id": mid,
                    "session_id": sid,
                    "session_alias": alias,
                    "workspace": workspace,
                    "type": "message",
                    "from": sender,
                    "from_human": human_sends,
                    "to": [f"{to}@{workspace}.{alias}"],
                    "cc": [f"{r[0]}@{workspace}.{alias}" for r in recipients[1:]],
                    "subject": subject,
                    "in_reply_to": parent,
                }
            )
            for pos, (name, human, role) in enumerate(recipients):
                read = when if rng.random() < 0.8 else None
                rrows.append((seq, sid, name, human, role, pos, read))
                erows.append((f"{'user' if human else 'agent'}:{name}", "new_mail", data, when))
        db.executemany(
            "INSERT INTO mails (seq, id, session_id, from_name, from_human, subject, body,"
            " parent_mail_id, type, relay, created_at) VALUES (?,?,?,?,?,?,?,?,?,?,?)",
            mrows,
        )
        db.executemany(
            "INSERT INTO mail_recipients (mail_seq, session_id, name, is_human, role, position,"
            " read_at) VALUES (?,?,?,?,?,?,?)",
            rrows,
        )
        db.executemany(
            "INSERT INTO events (principal, type, data, created_at) VALUES (?,?,?,?)", erows
        )
    phase("rows")
    for _name, sql in indexes:
        db.execute(sql)
    phase("indexes")
    from mailui4agents.db.fts import SQLITE_REBUILD, SQLITE_TRIGGERS

    db.execute(SQLITE_REBUILD)
    for trigger in SQLITE_TRIGGERS:
        db.execute(trigger)
    db.execute("COMMIT")
    phase("fts")
    db.execute("ANALYZE")
    db.execute("PRAGMA journal_mode=WAL")
    db.close()
    phase("analyze")
    phases["total"] = time.perf_counter() - started
    return phases


_INBOX = (
    "SELECT mails.* FROM mails JOIN mail_recipients ON mail_recipients.mail_seq = mails.seq "
    "WHERE mail_recipients.name = ? {unread}ORDER BY {order} DESC LIMIT 51"
)
UNREAD = "AND mail_recipients.read_at IS NULL "
PLANS = (  # services/reading.inbox before migration 0008 (mails.seq) and after
    ("inbox, ORDER BY mails.seq", _INBOX.format(unread="", order="mails.seq")),
    ("unread, ORDER BY mails.seq", _INBOX.format(unread=UNREAD, order="mails.seq")),
    ("inbox, ORDER BY mail_recipients.mail_seq",
     _INBOX.format(unread="", order="mail_recipients.mail_seq")),
    ("unread, ORDER BY mail_recipients.mail_seq",
     _INBOX.format(unread=UNREAD, order="mail_recipients.mail_seq")),
)  # fmt: skip


def plans(db_path: Path) -> list[str]:
    db = sqlite3.connect(db_path)
    try:
        out = []
        for label, sql in PLANS:
            rows = db.execute("EXPLAIN QUERY PLAN " + sql, ("agent0",)).fetchall()
            out.append(f"plan, {label}: " + " | ".join(r[-1] for r in rows))
        return out
    finally:
        db.close()


async def timed(
    http: httpx.AsyncClient, path: str, token: str, n: int, **params: str
) -> list[float]:
    headers = {"Authorization": f"Bearer {token}"}
    ms = []
    for _ in range(n):
        started = time.perf_counter()
        r = await http.get(path, params=params, headers=headers)
        ms.append((time.perf_counter() - started) * 1000)
        assert r.status_code == 200, r.text
    return ms


async def measure(url: str, keys: dict[str, str], n: int) -> tuple[Calibration, list[str]]:
    async with httpx.AsyncClient(base_url=url, timeout=120) as http:
        r = await http.post(
            "/api/v1/auth/login", json={"username": "user0", "password": USER_PASSWORD}
        )
        user = r.json()["token"]
        cal = await calibrate(http, user)
        r = await http.get("/api/v1/mailbox", params={"limit": "1"},
                           headers={"Authorization": f"Bearer {user}"})  # fmt: skip
        mail_id = r.json()["items"][0]["id"]
        lines = []
        for label, path, token, params in (
            ("agent inbox, 50 newest", "/api/v1/agent/inbox", keys["agent0"],
             {"limit": "50", "status": "all"}),
            ("mailbox, 50 newest", "/api/v1/mailbox", user, {"limit": "50"}),
            ("mailbox, unread", "/api/v1/mailbox", user, {"limit": "50", "status": "unread"}),
            ("thread, first 50", f"/api/v1/mail/{mail_id}/thread", user, {"limit": "50"}),
            ("search 'invoice parser'", "/api/v1/search", user,
             {"q": "invoice parser", "limit": "20"}),
        ):  # fmt: skip
            ms = await timed(http, path, token, n, **params)
            lines.append(f"{summary(label, ms)} | {cal.vs_get(pct(ms, 50))} (p50)")
    return cal, lines


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawTextHelpFormatter)
    ap.add_argument("--mails", type=int, default=1_000_000)
    ap.add_argument("--sessions", type=int, default=20_000)
    ap.add_argument("--users", type=int, default=20)
    ap.add_argument("--agents", type=int, default=200)
    ap.add_argument("--requests", type=int, default=100)
    ap.add_argument("--keep", type=Path, help="seed into this dir once, reuse it afterwards")
    args = ap.parse_args()
    print(machine(), flush=True)
    with tempfile.TemporaryDirectory() as tmp:
        data = args.keep or Path(tmp) / "data"
        env = clean_env(AGENTMAIL_ADMIN_PASSWORD=ADMIN_PASSWORD, **FAST_HASH_ENV)
        keys_file = data / "bench-keys.json"
        if not keys_file.exists():
            gw = GatewayProcess(data_dir=data, env=env)
            gw.start(timeout=180)
            try:
                keys = asyncio.run(make_principals(gw.url, args.users, args.agents))
            finally:
                gw.stop()
            took = seed(data / "agentmail.db", args.mails, args.sessions, args.users, args.agents)
            keys_file.write_text(json.dumps(keys))
            parts = ", ".join(f"{k} {v:.1f} s" for k, v in took.items())
            print(f"seeded {args.mails} mails in {args.sessions} sessions: {parts}", flush=True)
        keys = json.loads(keys_file.read_text())
        db_mb = (data / "agentmail.db").stat().st_size / 1e6
        print(f"database: {db_mb:.0f} MB")
        gw = GatewayProcess(data_dir=data, env=env)
        gw.start(timeout=600)  # a migration may build indexes over the seeded rows first
        try:
            cal, lines = asyncio.run(measure(gw.url, keys, args.requests))
        finally:
            gw.stop()
        print(*plans(data / "agentmail.db"), sep="\n")
    print(*cal.lines(), sep="\n")
    print(*lines, sep="\n")
    print(f"loadavg at the end: {load()}")


if __name__ == "__main__":
    main()
