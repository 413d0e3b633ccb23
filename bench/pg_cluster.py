"""Run a command with a throwaway PostgreSQL cluster (mailui4agents/testing_pg.py):
`{url}` in the arguments becomes the URL of an empty database, e.g.

    .venv/bin/python bench/pg_cluster.py .venv/bin/python bench/delivery.py --database-url {url}

The cluster (durability off: fsync, synchronous_commit) is stopped and deleted
afterwards. Figures from it are of a tuned-for-tests server, not a production one."""

from __future__ import annotations

import subprocess
import sys

from mailui4agents.testing_pg import PgCluster, find_bindir


def main() -> int:
    bindir = find_bindir()
    if bindir is None:
        print("PostgreSQL binaries missing: run scripts/install-test-deps.sh", file=sys.stderr)
        return 1
    cluster = PgCluster(bindir)
    try:
        cluster.start()
        cluster.execute("CREATE DATABASE bench")
        args = [a.replace("{url}", cluster.url("bench")) for a in sys.argv[1:]]
        return subprocess.call(args)
    finally:
        cluster.stop()


if __name__ == "__main__":
    sys.exit(main())
