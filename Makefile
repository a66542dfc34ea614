# Two entry points on a fresh clone (see README):  make sample  |  make test
# Both create .venv with a Python >= 3.12 (scripts/find-python) and install the project into it with uv (from
# PyPI; it downloads in parallel: 1.5 min where pip took 5.5, bytecode compiled as pip does, since without it every
# process compiles what it imports again); the tests also install the optional BERTScore
# extra (torch, ~3 GB the first time).

VENV := .venv
BIN := $(VENV)/bin
export DO_NOT_TRACK := 1

.PHONY: sample test lint

$(BIN)/python:
	"$$(scripts/find-python)" -m venv $(VENV)
	$(BIN)/python -m pip install --quiet --upgrade pip uv

$(VENV)/.base: pyproject.toml | $(BIN)/python
	$(BIN)/python -m uv pip install --quiet --compile-bytecode --python $(BIN)/python -e .
	@touch $@

$(VENV)/.test: pyproject.toml | $(BIN)/python
	$(BIN)/python -m uv pip install --quiet --compile-bytecode --python $(BIN)/python -e ".[test,embeddings]"
	@touch $@ $(VENV)/.base

sample: $(VENV)/.base
	$(BIN)/pbbq build --sample

lint: $(VENV)/.test
	$(BIN)/ruff check .
	$(BIN)/ruff format --check .

test: lint
	$(BIN)/python -m pytest -n 4 --dist loadgroup
