# Nightly ticket batch inference. `make help` lists the targets.
SHELL := /bin/bash
PYTHON ?= python3
VENV ?= .venv
PY := $(VENV)/bin/python
# A CPU build by default (this is what CI and the demo use). GPU machines: TORCH_SPEC=torch (CUDA build).
TORCH_SPEC ?= torch==2.13.0
STAMP := $(VENV)/.installed
# Test processes (pytest-xdist): the suite waits on Airflow processes, subprocesses and PostgreSQL as much as it
# computes, so two overlap well even on two cores. TEST_WORKERS=0: one process.
TEST_WORKERS ?= 2

.DEFAULT_GOAL := help
.PHONY: help install demo airflow test test-fast bench lint format constraints clean

help: ## list the targets
	@grep -E '^[a-z-]+:.*## ' $(MAKEFILE_LIST) | awk -F':.*## ' '{printf "  make %-12s %s\n", $$1, $$2}'

$(STAMP): pyproject.toml constraints.txt
	$(PYTHON) -m venv $(VENV)
	$(PY) -m pip install --quiet --upgrade pip
	$(PY) -m pip install --quiet "$(TORCH_SPEC)"
	$(PY) -m pip install --quiet -c constraints.txt -e ".[dev]"
	@touch $@

install: $(STAMP) ## create .venv and install the project with its test and dev tools

demo: $(STAMP) ## seed a backlog into SQLite and run the real DAG once (airflow dags test), print the summary
	./scripts/demo.sh

airflow: $(STAMP) ## a local Airflow (standalone) with this DAG, pool gpu, the tickets DB connection; prints the login
	./scripts/airflow-local.sh

test: $(STAMP) ## the whole test suite (uses or starts PostgreSQL, starts its own Redis; see README, Tests)
	$(PY) -m pytest -n $(TEST_WORKERS)

test-fast: $(STAMP) ## unit tests only (no database, no model)
	$(PY) -m pytest tests/unit -q

bench: $(STAMP) ## BENCHMARKS.md numbers: engine vs peers, budget sweep, DB writes, end to end, RSS (~15 min, PostgreSQL)
	mkdir -p .data && INFERENCE_DEVICE=$${INFERENCE_DEVICE:-cpu} $(PY) -m inference bench --json .data/bench.json

lint: $(STAMP) ## ruff lint and format check
	$(VENV)/bin/ruff check . && $(VENV)/bin/ruff format --check .

format: $(STAMP) ## apply ruff fixes and formatting
	$(VENV)/bin/ruff check --fix . && $(VENV)/bin/ruff format .

constraints: $(STAMP) ## re-pin constraints.txt from the current venv
	{ echo "# Tested versions (pip constraints). Regenerate: make constraints. torch is installed separately (TORCH_SPEC)."; \
	  $(PY) -m pip freeze | grep -v -e '^-e' -e 'ticket-batch-inference' -e '^torch=='; } > constraints.txt

clean: ## remove the venv and the demo data
	rm -rf $(VENV) .data .pytest_cache .ruff_cache .hypothesis
