# Two commands matter: `make run` (start the gateway) and `make test` (everything CI runs).
# Both create .venv and install what they need on first use: `make run` only what
# running needs (the package and its runtime dependencies), `make test` and `make
# check` the dev tools too. `make dist` builds the wheel and sdist into dist/.

PYTHON ?= python3
VENV   := .venv
BIN    := $(VENV)/bin
STAMP  := $(VENV)/.installed-stamp
RUN_STAMP := $(VENV)/.run-stamp

.PHONY: run test check lint typecheck pytest bench dist clean

$(STAMP): pyproject.toml constraints.txt
	test -x $(BIN)/python || $(PYTHON) -m venv $(VENV)
	$(BIN)/python -m pip install --quiet --disable-pip-version-check -c constraints.txt -e '.[dev]'
	$(BIN)/python -m compileall -q src  # an editable install has no bytecode of its own
	touch $(STAMP)

# Runtime only: no test, lint or build tool (docs/install.md).
$(RUN_STAMP): pyproject.toml constraints.txt
	test -x $(BIN)/python || $(PYTHON) -m venv $(VENV)
	$(BIN)/python -m pip install --quiet --disable-pip-version-check -c constraints.txt -e .
	$(BIN)/python -m compileall -q src
	touch $(RUN_STAMP)

run: $(RUN_STAMP)
	$(BIN)/agentmail serve $(ARGS)

dist: $(STAMP)
	rm -rf dist
	$(BIN)/python -m build --outdir dist .

lint: $(STAMP)
	$(BIN)/ruff check src tests bench
	$(BIN)/ruff format --check src tests bench

typecheck: $(STAMP)
	$(BIN)/mypy

pytest: $(STAMP)
	bash scripts/pytest.sh $(PYTEST_ARGS)

test: lint typecheck pytest

# The inner loop (~100 s on 2 quiet cores): lint, types and every test that starts
# no process, browser, agent CLI or PostgreSQL, on SQLite (tests/conftest.py,
# FAST_TIER). `make test` is what CI runs: everything, on both databases.
# PYTHONDONTWRITEBYTECODE is emptied for pytest alone: where it is set (as on this
# project's machines) pytest keeps no rewritten test module, so each worker parsed
# and rewrote every test file again on every run, and a source edited since
# install was compiled again in every process.
check: lint typecheck
	AGENTMAIL_TEST_BACKEND=sqlite AGENTMAIL_TEST_TIER=fast PYTHONDONTWRITEBYTECODE= \
	  $(BIN)/python -m pytest -q -n "$${PYTEST_WORKERS:-2}" --dist loadscope $(PYTEST_ARGS)

bench: $(STAMP)
	$(BIN)/python bench/delivery.py
	$(BIN)/python bench/bridge.py

clean:
	rm -rf $(VENV) .pytest_cache .mypy_cache .ruff_cache
