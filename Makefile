# Two entry points on a fresh clone (see README):  make sample  |  make test
# and the extras two commands need, installed once:  make evaluate (pbbq evaluate)  |  make browse (pbbq browse)
# All create .venv with a Python >= 3.12 (scripts/find-python) and install the project into it with uv (from
# PyPI; it downloads in parallel: 1.5 min where pip took 5.5, bytecode compiled as pip does, since without it every
# process compiles what it imports again); the tests also install the optional BERTScore
# extra (torch, ~3 GB the first time).

VENV := .venv
BIN := $(VENV)/bin
export DO_NOT_TRACK := 1

.PHONY: sample test lint evaluate browse

$(BIN)/python:
	"$$(scripts/find-python)" -m venv $(VENV)
	$(BIN)/python -m pip install --quiet --upgrade pip uv

$(VENV)/.base: pyproject.toml | $(BIN)/python
	$(BIN)/python -m uv pip install --quiet --compile-bytecode --python $(BIN)/python -e .
	@touch $@

# the test extra holds the eval and browse extras: a venv made for the tests has both
$(VENV)/.test: pyproject.toml | $(BIN)/python
	$(BIN)/python -m uv pip install --quiet --compile-bytecode --python $(BIN)/python -e ".[test,embeddings]"
	@touch $@ $(VENV)/.base $(VENV)/.eval $(VENV)/.browse

# pbbq evaluate: lm-evaluation-harness, torch and transformers (the tiny test model too), and datasets
$(VENV)/.eval: pyproject.toml | $(BIN)/python
	$(BIN)/python -m uv pip install --quiet --compile-bytecode --python $(BIN)/python -e ".[eval]"
	@touch $@ $(VENV)/.base

# pbbq browse: Datasette
$(VENV)/.browse: pyproject.toml | $(BIN)/python
	$(BIN)/python -m uv pip install --quiet --compile-bytecode --python $(BIN)/python -e ".[browse]"
	@touch $@ $(VENV)/.base

sample: $(VENV)/.base
	$(BIN)/pbbq build --sample

evaluate: $(VENV)/.eval
	@echo "pbbq evaluate is ready: see README, Scoring models"

browse: $(VENV)/.browse
	@echo "pbbq browse is ready: see README, A rebuild and its audit"

# lint-imports: the layers of pyproject's [tool.importlinter] (docs/architecture.md §2); mypy: the types, as
# pyproject's [tool.mypy] says (about 1 min of CPU on a fresh clone, as in CI: it reads the libraries' types once;
# 6 s once .mypy_cache holds them)
lint: $(VENV)/.test
	$(BIN)/ruff check .
	$(BIN)/ruff format --check .
	$(BIN)/lint-imports
	$(BIN)/mypy

test: lint
	$(BIN)/python -m pytest -n 4 --dist loadgroup
