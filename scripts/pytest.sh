#!/usr/bin/env bash
# Runs the test suite. Exit 5 (no tests collected) is a failure, never a pass.
# Under CI=true a skipped required group is a failure too (see tests/conftest.py).
set -euo pipefail
cd "$(dirname "$0")/.."
# The real agent CLIs the bridge tests drive (agent-clis.txt); a no-op when installed.
if ! bash scripts/install-agent-clis.sh; then
  if [ "${CI:-}" = "true" ]; then
    echo "could not install the agent CLIs in agent-clis.txt: failing (CI=true)" >&2
    exit 1
  fi
  echo "warning: could not install the agent CLIs; their tests will skip" >&2
fi
bash scripts/install-test-deps.sh  # system Chromium and axe-core for tests/web
# Bytecode for the package's sources, as an installed wheel has it: with
# PYTHONDONTWRITEBYTECODE set (as on this project's machines) every gateway, CLI
# and hook subprocess the tests start compiled src/ again (~20 ms per hook).
.venv/bin/python -m compileall -q src
# Two worker processes (pytest-xdist) for the machine's 2 cores; each test module
# stays on one worker (--dist loadscope) so a module's shared gateway starts once.
# PYTEST_WORKERS=0 runs everything in this one process.
# PYTHONDONTWRITEBYTECODE is emptied for pytest alone, as `make check` does: else
# each worker rewrites (assert rewriting) every test module again on every run.
set +e
PYTHONDONTWRITEBYTECODE= .venv/bin/python -m pytest -n "${PYTEST_WORKERS:-2}" --dist loadscope "$@"
rc=$?
set -e
if [ "$rc" -eq 5 ]; then
  echo "pytest collected no tests: failing" >&2
  exit 1
fi
exit "$rc"
