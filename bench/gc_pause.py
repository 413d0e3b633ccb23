"""How long the garbage collector stops the gateway, with and without freezing
what exists once it has started (`agentmail serve` does: cli/serve.py).

A full collection walks every object the collector tracks; while it runs, no
request moves. The app, its routes, SQLAlchemy's mappers and the imported
modules are most of those objects and live as long as the process: frozen, they
are not walked. The gateway runs in this process (no sockets: httpx's ASGI
transport), sends `--sends` mails to warm every path up, then:

- times one full collection (`gc.collect()`) unfrozen;
- freezes, sends `--sends` more mails counting and timing the collections of
  each generation (gen 0 and 1 are the small, frequent ones), and times one
  full collection again: it walks what those sends left alive.

Usage: .venv/bin/python bench/gc_pause.py [--sends 2000]
"""

from __future__ import annotations

import argparse
import asyncio
import gc
import os
import tempfile
import time
from pathlib import Path
from typing import Any

import httpx

from calibrate import load, machine  # bench/: the script's folder is on sys.path

ADMIN_PASSWORD = "bench-admin-password"


def full_collection_ms() -> float:
    t0 = time.perf_counter()
    gc.collect()
    return (time.perf_counter() - t0) * 1000


class Collections:
    """gc.callbacks: the count and total time of each generation's collections."""

    def __init__(self) -> None:
        self.count = [0, 0, 0]
        self.ms = [0.0, 0.0, 0.0]
        self._start = 0.0

    def __call__(self, phase: str, info: dict[str, Any]) -> None:
        if phase == "start":
            self._start = time.perf_counter()
        else:
            generation = info["generation"]
            self.count[generation] += 1
            self.ms[generation] += (time.perf_counter() - self._start) * 1000


async def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--sends", type=int, default=2000)
    args = parser.parse_args()
    os.environ.update({"AGENTMAIL_ARGON2_TIME_COST": "1", "AGENTMAIL_ARGON2_MEMORY_KIB": "64"})
    from mailui4agents.app import create_app
    from mailui4agents.settings import Settings

    print(machine())
    print(f"load before: {load()}")
    with tempfile.TemporaryDirectory() as tmp:
        settings = Settings(
            data_dir=Path(tmp) / "data",
            admin_password=ADMIN_PASSWORD,
            session_rate_limit=10**7,
        )
        app = create_app(settings)
        async with (
            app.router.lifespan_context(app),
            httpx.AsyncClient(transport=httpx.ASGITransport(app=app), base_url="http://gw") as c,
        ):
            login = {"username": "admin", "password": ADMIN_PASSWORD}
            token = (await c.post("/api/v1/auth/login", json=login)).json()["token"]
            admin = {"Authorization": f"Bearer {token}"}
            r = await c.post(
                "/api/v1/admin/agents",
                json={"name": "agent0", "workspaces": ["/**"]},
                headers=admin,
            )
            assert r.status_code == 201, r.text
            mail = {"to": ["agent0@/srv/bench"], "subject": "s", "body": "x" * 200}

            async def sends(n: int) -> None:
                for _ in range(n):
                    r = await c.post("/api/v1/mail", json=mail, headers=admin)
                    assert r.status_code == 201, r.text

            await sends(args.sends)
            gc.collect()
            tracked = len(gc.get_objects())
            unfrozen = full_collection_ms()
            gc.freeze()
            seen = Collections()
            gc.callbacks.append(seen)
            try:
                await sends(args.sends)
            finally:
                gc.callbacks.remove(seen)
            frozen = full_collection_ms()
            gc.unfreeze()
    print(f"objects the collector tracks after {args.sends} sends: {tracked}")
    print(
        f"one full collection: {unfrozen:.1f} ms unfrozen; frozen, {frozen:.2f} ms"
        f" after {args.sends} more sends"
    )
    print(
        f"during {args.sends} more sends, frozen: "
        + ", ".join(
            f"gen {g}: {seen.count[g]} collections, {seen.ms[g]:.1f} ms in all" for g in range(3)
        )
    )
    print(f"load after: {load()}")


if __name__ == "__main__":
    asyncio.run(main())
