# make book : build the rendered book into _build/html
# make test : ruff + every test (package, multi-process gloo, notebooks)
# Each target creates .venv and installs what it needs on first use.

PYTHON ?= python3
VENV ?= .venv
PY := $(VENV)/bin/python
# The CPU wheel of torch 2.13.0 that this project's machines keep on disk;
# elsewhere pip fetches it (or, failing that, any torch the platform offers).
TORCH_SPEC ?= torch==2.13.0

.PHONY: test book lint format clean

$(VENV)/.base:
	$(PYTHON) -m venv $(VENV)
	$(PY) -m pip install -q --upgrade pip
	$(PY) -m pip install -q "$(TORCH_SPEC)" || $(PY) -m pip install -q torch
	touch $@

$(VENV)/.test: $(VENV)/.base pyproject.toml
	$(PY) -m pip install -q -e ".[test]"
	touch $@

$(VENV)/.book: $(VENV)/.base pyproject.toml
	$(PY) -m pip install -q -e ".[book]"
	touch $@

lint: $(VENV)/.test
	$(VENV)/bin/ruff check .
	$(VENV)/bin/ruff format --check .

format: $(VENV)/.test
	$(VENV)/bin/ruff format .
	$(VENV)/bin/ruff check --fix .

test: lint
	$(PY) -m pytest -q -ra tests

book: $(VENV)/.book
	$(VENV)/bin/jupyter-book build . --warningiserror --nitpick --keep-going
	@echo "Open $(CURDIR)/_build/html/index.html in a browser."

clean:
	rm -rf _build .pytest_cache .hypothesis
