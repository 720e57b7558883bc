# Both targets build .venv themselves, so they work on a fresh clone.
VENV ?= .venv
PY := $(VENV)/bin/python
PYTHON ?= python3

.PHONY: demo test lint bench mutate clean

$(VENV)/.installed: pyproject.toml
	@echo "installing dependencies, first run only (into $(VENV))"
	$(PYTHON) -m venv $(VENV)
	$(PY) -m pip install --quiet --upgrade pip
	$(PY) -m pip install --progress-bar on -e '.[dev,dev-server]'
	touch $@

demo: $(VENV)/.installed
	$(PY) examples/demo.py

test: $(VENV)/.installed
	$(PY) -m pytest -q

lint: $(VENV)/.installed
	$(VENV)/bin/ruff check golem tests examples benchmarks
	$(VENV)/bin/ruff format --check golem tests examples benchmarks
	$(VENV)/bin/mypy

$(VENV)/.bench: $(VENV)/.installed
	$(PY) -m pip install --quiet -e '.[dev,bench]'
	touch $@

# Every benchmark in turn (several minutes: peers.py alone searches up to 2000 turns);
# each prints its progress on stderr and its figures on stdout.
bench: $(VENV)/.bench
	for b in benchmarks/[!_]*.py; do echo "== $$b (started $$(date +%T))"; $(PY) $$b || exit 1; done

# Mutation testing with mutmut, kept out of `test` and CI: every mutant reruns the selected
# tests that reach the mutated function (1 to 3 minutes for golem/history, messages and
# strict_json on 2 cores, offline). [tool.mutmut] in pyproject.toml says what is mutated and
# which tests run. To cover golem/loop.py or golem/activities, add them to only_mutate and add
# their fast tests (the ones that need no dev server, e.g. `tests/test_x.py::TestY` or a
# `-k` expression) to pytest_add_cli_args_test_selection; MUTANTS='golem.loop.*' then runs
# only those mutants. Each run starts fresh, so changed tests are never judged by stale verdicts.
# Survivors are listed at the end; `.venv/bin/mutmut show NAME` prints one as a diff.
MUTANTS ?=
$(VENV)/.mutate: $(VENV)/.installed
	$(PY) -m pip install --quiet -e '.[dev,mutate]'
	touch $@

mutate: $(VENV)/.mutate
	rm -rf mutants
	$(VENV)/bin/mutmut run --max-children 2 $(MUTANTS)
	$(VENV)/bin/mutmut results

clean:
	rm -rf $(VENV) .pytest_cache .mypy_cache .ruff_cache .hypothesis
