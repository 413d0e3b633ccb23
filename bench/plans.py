"""The statements of each read request at scale, their query plans and their time.

Runs the app in-process over a data dir seeded by `bench/scale.py --keep DIR`,
makes each read request of scale.py (agent inbox, mailbox, unread mailbox,
thread, search, one mail) and, from SQLAlchemy's cursor events on the gateway's
engines, prints every statement it ran with its EXPLAIN QUERY PLAN (the real
statement with its real parameters, on a second connection) and the median
time per request spent in statements (each statement's execute and fetch, its
aiosqlite thread hop included) against the request's whole time.

Works for any source tree on PYTHONPATH, so the plans of two commits can be
compared over one database:
  PYTHONPATH=OLD/src .venv/bin/python bench/plans.py DIR [--requests 50]
Not a test; SQLite only.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import sqlite3
import time
from pathlib import Path
from statistics import median
from typing import Any

import httpx
from sqlalchemy import event

from calibrate import load, machine
from mailui4agents.app import create_app
from mailui4agents.settings import Settings
from scale import ADMIN_PASSWORD, USER_PASSWORD


class Recorder:
    def __init__(self, db_path: Path) -> None:
        self.plans = sqlite3.connect(f"file:{db_path}?mode=ro", uri=True)
        self.statements: list[tuple[str, Any]] = []
        self.sql_s = 0.0
        self._started = 0.0

    def before(self, _c: Any, _cur: Any, statement: str, params: Any, *_: Any) -> None:
        self.statements.append((" ".join(statement.split()), params))
        self._started = time.perf_counter()

    def after(self, *_: Any) -> None:
        self.sql_s += time.perf_counter() - self._started

    def plan(self, statement: str, params: Any) -> str:
        if not statement.startswith("SELECT"):
            return "-"
        rows = self.plans.execute("EXPLAIN QUERY PLAN " + statement, params).fetchall()
        return " | ".join(r[-1] for r in rows)


async def run(data: Path, n: int) -> None:
    keys = json.loads((data / "bench-keys.json").read_text())
    app = create_app(Settings(data_dir=data, admin_password=ADMIN_PASSWORD))
    rec = Recorder(data / "agentmail.db")
    async with app.router.lifespan_context(app):
        db = app.state.gateway.db
        for engine in {id(e): e for e in (db.writer, db.reader)}.values():
            event.listen(engine.sync_engine, "before_cursor_execute", rec.before)
            event.listen(engine.sync_engine, "after_cursor_execute", rec.after)
        transport = httpx.ASGITransport(app=app)
        async with httpx.AsyncClient(transport=transport, base_url="http://gw") as http:
            login = {"username": "user0", "password": USER_PASSWORD}
            user = (await http.post("/api/v1/auth/login", json=login)).json()["token"]
            as_user = {"Authorization": f"Bearer {user}"}
            r = await http.get("/api/v1/mailbox", params={"limit": "1"}, headers=as_user)
            mail_id = r.json()["items"][0]["id"]
            agent = {"Authorization": f"Bearer {keys['agent0']}"}
            kinds = [
                ("agent inbox, 50", "/api/v1/agent/inbox", agent, {"limit": 50, "status": "all"}),
                ("mailbox, 50", "/api/v1/mailbox", as_user, {"limit": 50}),
                ("mailbox, unread", "/api/v1/mailbox", as_user, {"limit": 50, "status": "unread"}),
                ("thread, 50", f"/api/v1/mail/{mail_id}/thread", as_user, {"limit": 50}),
                ("search 'invoice parser'", "/api/v1/search", as_user,
                 {"q": "invoice parser", "limit": 20}),
                ("one mail", f"/api/v1/mail/{mail_id}", as_user, {}),
            ]  # fmt: skip
            for label, path, headers, params in kinds:
                sql, total = [], []
                for _ in range(n):
                    rec.statements.clear()
                    rec.sql_s = 0.0
                    started = time.perf_counter()
                    r = await http.get(path, params=params, headers=headers)
                    total.append((time.perf_counter() - started) * 1000)
                    assert r.status_code == 200, r.text
                    sql.append(rec.sql_s * 1000)
                queries = [s for s in rec.statements if not s[0].startswith(("BEGIN", "COMMIT"))]
                print(
                    f"{label}: {len(queries)} statements, in statements {median(sql):.2f} ms "
                    f"of {median(total):.2f} ms (medians of {n}, in-process)"
                )
                for statement, params in queries:
                    print(f"  {statement[:110]}{'…' if len(statement) > 110 else ''}")
                    print(f"    plan: {rec.plan(statement, params)}")


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawTextHelpFormatter)
    ap.add_argument("data", type=Path, help="a data dir seeded by bench/scale.py --keep")
    ap.add_argument("--requests", type=int, default=50)
    args = ap.parse_args()
    print(machine())
    asyncio.run(run(args.data, args.requests))
    print(f"loadavg at the end: {load()}")


if __name__ == "__main__":
    main()
